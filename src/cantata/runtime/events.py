"""Runtime events: what listeners and the error hook hear about deliveries and agents.

Why events rather than logs only: a failed broadcast delivery has no sender waiting for
it, so the failure must reach someone (a supervisor, a test, a trace) as a value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from .context import MessageContext
from .ids import AgentId

__all__ = [
    "AgentActivated",
    "AgentEvicted",
    "AgentReleased",
    "DeliveryFailed",
    "MessageWasDropped",
    "RuntimeEvent",
]


@dataclass(frozen=True, slots=True)
class DeliveryFailed:
    """A broadcast event could not be handled by `agent_id` (its handler raised, or the
    agent could not be created)."""

    agent_id: AgentId
    message: Any
    context: MessageContext
    error: BaseException


@dataclass(frozen=True, slots=True)
class MessageWasDropped:
    """An intervention dropped a message at `stage`."""

    stage: Literal["send", "publish", "response"]
    message: Any
    context: MessageContext


@dataclass(frozen=True, slots=True)
class AgentActivated:
    """An agent instance was created; `restored` when its state came from the store."""

    agent_id: AgentId
    restored: bool


@dataclass(frozen=True, slots=True)
class AgentEvicted:
    """An idle agent was saved to the store and removed from memory."""

    agent_id: AgentId


@dataclass(frozen=True, slots=True)
class AgentReleased:
    """An agent whose work was over (a finished run's actor) left memory, unsaved."""

    agent_id: AgentId


RuntimeEvent: TypeAlias = (
    DeliveryFailed | MessageWasDropped | AgentActivated | AgentEvicted | AgentReleased
)
