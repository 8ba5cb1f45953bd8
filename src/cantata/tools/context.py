"""What a running tool can know about the run that called it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..core import CancellationToken

__all__ = ["ToolContext"]


@dataclass(slots=True, frozen=True, kw_only=True)
class ToolContext:
    """Injected into a tool that declares a parameter annotated `ToolContext`.

    It is never part of the tool's JSON schema: the model cannot see or forge it. It
    carries the ``tool_kwargs`` the caller handed to the run (for example a user id or a
    database handle), the id of the call being answered, the run's `CancellationToken`
    (long tools should poll it), and whether a person approved this call. An effect tool
    (``@tool(effect=True)``) inside a durable workflow run gets the `idempotency_key` of its
    journal entry, the same on every retry and resume: pass it to the outside system.
    """

    kwargs: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    call_id: str | None = None
    tool_name: str | None = None
    cancellation_token: CancellationToken = field(default_factory=CancellationToken)
    approved: bool = False
    idempotency_key: str | None = None
