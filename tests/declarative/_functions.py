"""Module-level functions that configs name by import path (a termination function and a
speaker function), for the function-holding component tests."""

from __future__ import annotations

from collections.abc import Sequence

from cantata.core import Message
from cantata.teams import ChatState


def said_done(messages: Sequence[Message]) -> bool | str:
    """Stop once someone wrote DONE."""
    return "saw DONE" if any("DONE" in m.text for m in messages) else False


def always_second(state: ChatState) -> str:
    """The second participant speaks, always."""
    return state.participants[1]
