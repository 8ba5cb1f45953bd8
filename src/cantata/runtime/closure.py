"""Closure agents: an agent made from a function, registered like any other agent type.

The usual use is at the edge of a system: collect what a team or a runtime publishes into
an `asyncio.Queue`, a list or a callback, without writing an agent class for it::

    queue: asyncio.Queue[Result] = asyncio.Queue()
    await register_closure(runtime, "collector", lambda m, ctx: queue.put_nowait(m),
                           subscriptions=["results"])

The function takes ``(message, ctx)`` and may be sync or async; its return value answers
a direct request. It needs no agent handle to send or publish: inside it, the runtime's
`send_message`/`publish_message` already count as sent by this agent (through the
handler's context). The message types it takes come from the annotation of its first
parameter (a union for several; none or `Any` for all): anything else is `CantHandle` for
a direct request and ignored when published, as for a `RoutedAgent`.

From autogen-core: ``ClosureAgent.register_closure(runtime, "collector", closure,
subscriptions=lambda: [TypeSubscription(...)])`` with ``closure(closure_ctx, message,
ctx)`` becomes ``register_closure(runtime, "collector", fn, subscriptions=[...])`` with
``fn(message, ctx)``; types outside the annotation are refused or ignored as above rather
than warned about.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from ..core import CantHandle, ConfigurationError
from .agent import BaseAgent
from .context import MessageContext
from .handlers import _expand
from .protocol import AgentRuntime
from .subscriptions import Subscription, TypeSubscription

__all__ = ["Closure", "ClosureAgent", "register_closure"]

Closure = Callable[[Any, MessageContext], Any | Awaitable[Any]]
"""A closure agent's function: ``(message, ctx) -> result`` (sync or async)."""


class ClosureAgent(BaseAgent):
    """An agent whose every message goes to one function (see `register_closure`)."""

    __slots__ = ("_fn", "_types")

    def __init__(self, fn: Closure, message_types: tuple[type, ...] = (object,)) -> None:
        if not callable(fn):
            raise ConfigurationError(f"a closure agent needs a function, not {fn!r}")
        self._fn = fn
        self._types = message_types

    async def on_message(self, message: Any, ctx: MessageContext) -> Any:
        """Call the function with a message of one of its types."""
        if not isinstance(message, self._types):
            if not ctx.is_rpc:
                return None
            names = " | ".join(t.__qualname__ for t in self._types)
            raise CantHandle(
                f"closure agent {ctx.recipient} takes {names}, not a direct "
                f"{type(message).__qualname__}; widen the annotation of its function's "
                "message parameter"
            )
        result = self._fn(message, ctx)
        if inspect.isawaitable(result):
            result = await result
        return result


async def register_closure(
    runtime: AgentRuntime,
    agent_type: str,
    fn: Closure,
    *,
    subscriptions: Iterable[str | Subscription] = (),
) -> None:
    """Register `fn` as agent type `agent_type`, one instance per key, each calling `fn`.

    `subscriptions`: topic types (each becomes ``TypeSubscription(topic_type, agent_type)``,
    so the agent keyed by the topic's source gets it) or ready-made subscriptions.
    """
    types = closure_types(fn, agent_type)
    subs = [TypeSubscription(s, agent_type) if isinstance(s, str) else s for s in subscriptions]
    for sub in subs:
        target = getattr(sub, "agent_type", agent_type)
        if target != agent_type:
            raise ConfigurationError(
                f"subscription {sub.id!r} routes to agent type {target!r}, not to the closure "
                f"agent {agent_type!r}; give the closure's topic types as strings instead"
            )
    await runtime.register_factory(
        agent_type, lambda: ClosureAgent(fn, types), agent_class=ClosureAgent
    )
    for sub in subs:
        await runtime.add_subscription(sub)


def closure_types(fn: Closure, agent_type: str) -> tuple[type, ...]:
    """The message types `fn` takes, from the annotation of its first parameter."""
    if not callable(fn):
        raise ConfigurationError(f"closure agent {agent_type!r} needs a function, not {fn!r}")
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # a builtin without a signature: take everything
        return (object,)
    if len(params) != 2 and not any(p.kind is p.VAR_POSITIONAL for p in params):
        raise ConfigurationError(
            f"the function of closure agent {agent_type!r} must take (message, ctx), not "
            f"{len(params)} parameters"
        )
    if not params or params[0].kind is params[0].VAR_POSITIONAL:
        return (object,)
    try:
        hints = typing.get_type_hints(fn)
    except Exception as exc:
        raise ConfigurationError(
            f"cannot resolve the annotations of closure agent {agent_type!r}'s function: "
            f"{exc}; define its message types at module level"
        ) from exc
    annotation = hints.get(params[0].name)
    if annotation is None:
        return (object,)
    try:
        return _expand(annotation)
    except TypeError as exc:
        raise ConfigurationError(f"closure agent {agent_type!r}: {exc}") from exc
