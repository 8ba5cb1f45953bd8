"""Scripted participants shared by the team tests: real agents on the scripted model."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from cantata.agents import ChatAgent
from cantata.core import Message
from cantata.models import ChatOptions, ScriptedChatClient


def counting_agent(name: str, *, approve_after: int | None = None) -> ChatAgent:
    """Answers ``"<name> says <n>"`` where n is how many messages it was shown; with
    `approve_after`, adds APPROVE once it was shown at least that many."""

    def answer(messages: list[Message], options: ChatOptions) -> str:
        text = f"{name} says {len(messages)}"
        if approve_after is not None and len(messages) >= approve_after:
            text += " APPROVE"
        return text

    return ChatAgent(ScriptedChatClient(answer), name=name, description=f"the {name}")


def function_agent(
    name: str, fn: Callable[[Sequence[Message]], str], *, description: str = ""
) -> ChatAgent:
    """A participant whose model answers `fn(messages)`."""
    return ChatAgent(
        ScriptedChatClient(lambda messages, options: fn(messages)),
        name=name,
        description=description or f"the {name}",
    )
