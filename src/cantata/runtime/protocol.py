"""`AgentRuntime`: the contract every runtime implements (in-process, Ray).

Kept free of in-process assumptions: messages are values (they may be copied across a
process boundary), agents are created by the runtime from factories registered by type,
and every call is async so a remote runtime can implement it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol, TypeAlias, runtime_checkable

from ..core import CancellationToken
from ..stores import StateStore
from .agent import BaseAgent
from .ids import AgentId, TopicId
from .subscriptions import Subscription

__all__ = ["AgentFactory", "AgentRuntime"]

AgentFactory: TypeAlias = Callable[[], BaseAgent | Awaitable[BaseAgent]]
"""Makes one agent instance; called on the first message to each new `AgentId`."""


@runtime_checkable
class AgentRuntime(Protocol):
    """Delivers direct requests and broadcast events to agents, one message at a time per
    `AgentId`, and manages their lifecycle and state."""

    async def register_factory(
        self,
        agent_type: str,
        factory: AgentFactory,
        *,
        agent_class: type[BaseAgent] | None = None,
    ) -> None:
        """Register how to create agents of `agent_type` (and the class's default
        subscriptions)."""
        ...

    async def send_message(
        self,
        message: Any,
        recipient: AgentId,
        *,
        sender: AgentId | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 (the fixed API; wraps a timer)
        cancellation_token: CancellationToken | None = None,
        message_id: str | None = None,
    ) -> Any:
        """Deliver a direct request and return the handler's result (or raise its error)."""
        ...

    async def publish_message(
        self,
        message: Any,
        topic_id: TopicId,
        *,
        sender: AgentId | None = None,
        message_id: str | None = None,
    ) -> None:
        """Deliver an event to every subscriber of `topic_id` except the sender."""
        ...

    async def add_subscription(self, subscription: Subscription) -> None:
        """Start routing matching topics to the subscription's agent."""
        ...

    async def remove_subscription(self, subscription_id: str) -> None:
        """Stop routing for the subscription with this id."""
        ...

    async def start(self) -> None:
        """Start taking messages."""
        ...

    async def stop(self) -> None:
        """Stop taking messages, let handlers in flight finish, then cancel the rest."""
        ...

    async def wait_until_idle(self) -> None:
        """Wait until no message is queued or being handled; keep running. Bounded (in
        `LocalRuntime` by its `default_timeout`, or a `timeout=`): `TimeoutError` past it."""
        ...

    async def stop_when_idle(self) -> None:
        """Wait until no message is queued or being handled, then stop."""
        ...

    async def stop_when(self, predicate: Callable[[], bool]) -> None:
        """Stop once `predicate()` is true (checked after each handled message); bounded
        like `wait_until_idle`."""
        ...

    async def close(self) -> None:
        """Stop, and run every agent's close hook."""
        ...

    async def save_state(self, store: StateStore | None = None) -> dict[str, Any]:
        """The state of agents and subscriptions as JSON data (also written to `store`)."""
        ...

    async def load_state(self, source: StateStore | Mapping[str, Any]) -> None:
        """Restore what `save_state` wrote."""
        ...
