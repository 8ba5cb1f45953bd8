"""Agents: `BaseAgent` handles any message in `on_message`; `RoutedAgent` routes by type.

An agent is bound to its runtime and `AgentId` by the runtime when it is created from
its factory (or registered as an instance), so constructors stay free of runtime plumbing
and the same class runs in any runtime.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from ..core import CancellationToken, CantHandle, ConfigurationError, RuntimeStateError
from .context import MessageContext, current_context
from .handlers import CHAIN, Table, build_tables, resolve
from .ids import AgentId, TopicId

if TYPE_CHECKING:
    from .protocol import AgentRuntime

__all__ = ["BaseAgent", "RoutedAgent"]

_log = logging.getLogger("cantata.runtime")


class BaseAgent:
    """An actor: handles one message at a time; state lives in its attributes.

    Override `on_message`, and `save_state`/`load_state` when the agent has state worth
    keeping across eviction, save/load or a restart. `close` runs when the runtime closes.
    """

    __slots__ = ("_description", "_id", "_runtime")

    def __init__(self, description: str = "") -> None:
        # AutoGen's agents take their description here; subclasses that call
        # super().__init__("...") port unchanged.
        self._description = description

    @property
    def description(self) -> str:
        """What this agent does, for people and for selectors; set by the constructor."""
        return getattr(self, "_description", "")

    @property
    def id(self) -> AgentId:
        """This agent's address; set by the runtime before the first message."""
        try:
            return self._id
        except AttributeError:
            raise RuntimeStateError(
                f"{type(self).__qualname__} is not bound to a runtime yet: its id is set "
                "when the runtime creates it; use it from handlers, not the constructor"
            ) from None

    @property
    def runtime(self) -> AgentRuntime:
        """The runtime this agent lives in."""
        try:
            return self._runtime
        except AttributeError:
            raise RuntimeStateError(
                f"{type(self).__qualname__} is not bound to a runtime yet; register it with "
                "runtime.register_factory(...) or runtime.register_instance(...)"
            ) from None

    def _bind(self, runtime: AgentRuntime, agent_id: AgentId) -> None:
        bound = getattr(self, "_id", None)
        if bound is not None and bound != agent_id:
            raise RuntimeStateError(
                f"agent instance is already bound as {bound}; it cannot also be {agent_id}: "
                "create one instance per AgentId"
            )
        self._id = agent_id
        self._runtime = runtime

    def _dispatch(self, message: Any, ctx: MessageContext) -> Awaitable[Any]:
        return self.on_message(message, ctx)

    async def on_message(self, message: Any, ctx: MessageContext) -> Any:
        """Handle one message; the result goes back to a direct sender."""
        raise CantHandle(
            f"agent {ctx.recipient} ({type(self).__qualname__}) does not override on_message"
        )

    async def save_state(self) -> Mapping[str, Any]:
        """This agent's state as values the core type registry can serialize."""
        return {}

    async def load_state(self, state: Mapping[str, Any]) -> None:
        """Restore what `save_state` returned."""

    async def close(self) -> None:
        """Release resources; called once when the runtime closes or evicts this agent."""

    async def commit_state(self) -> None:
        """Save this agent's state (`save_state`) and the id of the message it is handling
        in one store write, so a message redelivered after a crash is flagged
        `ctx.is_redelivery` by a fresh runtime on the same store. Call it from a handler,
        after the state change; the runtime needs a store."""
        ctx = current_context()
        if ctx is None or ctx.recipient != self.id:
            raise RuntimeStateError(
                f"agent {self.id} called commit_state outside its own handler; call it while "
                "handling the message whose effect it records"
            )
        commit = getattr(self.runtime, "commit_state", None)
        if commit is None:
            raise ConfigurationError(
                f"agent {self.id} runs on a {type(self.runtime).__name__}, which cannot commit "
                "agent state; use LocalRuntime(store=...)"
            )
        await commit(self.id, ctx.message_id)

    async def send_message(
        self,
        message: Any,
        recipient: AgentId,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 (the fixed API; wraps a timer)
        cancellation_token: CancellationToken | None = None,
        message_id: str | None = None,
    ) -> Any:
        """Send a direct request from this agent and return the recipient's result."""
        return await self.runtime.send_message(
            message,
            recipient,
            sender=self.id,
            timeout=timeout,
            cancellation_token=cancellation_token,
            message_id=message_id,
        )

    async def publish_message(
        self, message: Any, topic_id: TopicId, *, message_id: str | None = None
    ) -> None:
        """Publish from this agent; it never receives its own message."""
        await self.runtime.publish_message(message, topic_id, sender=self.id, message_id=message_id)


class RoutedAgent(BaseAgent):
    """An agent whose methods decorated with `@message_handler`, `@rpc` or `@event` handle
    messages by the type annotated on their `message` parameter (unions and subclasses work).

    A direct request no handler takes raises `CantHandle` to its sender; a broadcast event
    no handler takes is ignored (topics often carry types an agent does not care about).
    """

    __slots__ = ()

    _rpc_table: ClassVar[Table] = {}
    _event_table: ClassVar[Table] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._rpc_table, cls._event_table = build_tables(cls)

    def _dispatch(self, message: Any, ctx: MessageContext) -> Awaitable[Any]:
        table = self._rpc_table if ctx.is_rpc else self._event_table
        cls = message.__class__
        try:
            handler = table[cls]
        except KeyError:
            handler = resolve(table, cls)
        if handler is None:
            return self.on_unhandled_message(message, ctx)
        return handler(self, message, ctx)

    async def on_message(self, message: Any, ctx: MessageContext) -> Any:
        """Route to the handler for the message's type."""
        return await self._dispatch(message, ctx)

    async def on_unhandled_message(self, message: Any, ctx: MessageContext) -> Any:
        """Called when no handler takes the message: raises `CantHandle` for a direct
        request; a broadcast event is ignored (logged when handlers of its type exist but
        none's `match=` took it)."""
        name = type(message).__qualname__
        table = self._rpc_table if ctx.is_rpc else self._event_table
        tried = getattr(table.get(type(message)), CHAIN, None)
        if not ctx.is_rpc:
            if tried:
                _log.info(
                    "agent %s (%s): no handler's match= took broadcast %s %s (tried %s); ignored",
                    ctx.recipient,
                    type(self).__qualname__,
                    name,
                    ctx.message_id,
                    ", ".join(tried),
                )
            return None
        if tried:
            raise CantHandle(
                f"agent {ctx.recipient} ({type(self).__qualname__}): none of the handlers for "
                f"{name} ({', '.join(tried)}) matched this one (their match= returned False); "
                "add a handler without match= to take the rest"
            )
        hint = ""
        if self._event_table.get(type(message)) or resolve(dict(self._event_table), type(message)):
            hint = f" (its handler for {name} is @event, broadcast only; use @message_handler)"
        raise CantHandle(
            f"agent {ctx.recipient} ({type(self).__qualname__}) has no handler for a direct "
            f"{name}{hint}; add a @message_handler or @rpc method taking it"
        )
