"""Interventions: observe, rewrite or drop messages on their way through the runtime.

Why a hook and not a wrapper agent: tracing, redaction, policy and fault injection apply
to every message, including ones between agents nobody wrote a wrapper for.
"""

from __future__ import annotations

from typing import Any, Final, final

from .context import MessageContext
from .ids import AgentId

__all__ = ["DROP", "DropMessage", "InterventionHandler"]


@final
class DropMessage:
    """The type of `DROP`: return it from an intervention to drop the message."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "DROP"


DROP: Final = DropMessage()
"""Returned by an intervention to drop a message; a direct sender gets `MessageDropped`."""


class InterventionHandler:
    """Base for interventions: each hook returns the message (maybe rewritten) or `DROP`.

    The defaults pass everything through, so a subclass overrides only what it needs.
    Hooks run in registration order; the first `DROP` ends the chain.
    """

    async def on_send(self, message: Any, ctx: MessageContext, recipient: AgentId) -> Any:
        """A direct request is about to be delivered to `recipient`."""
        return message

    async def on_publish(self, message: Any, ctx: MessageContext) -> Any:
        """A message is about to be published on `ctx.topic_id`."""
        return message

    async def on_response(self, message: Any, ctx: MessageContext, responder: AgentId) -> Any:
        """`responder` answered the direct request `ctx`; `message` is its result."""
        return message
