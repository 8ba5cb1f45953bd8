"""The envelope every message travels in, and the handler's view of it.

A handler gets a `MessageContext`: who sent the message, on which topic, its ids and a
cancellation token. While a handler runs, its context is also in a contextvar, so a
message it sends or publishes carries its message id as causation id and inherits its
correlation id without the handler passing anything along.

The envelope also carries the sender's trace context (`trace_context`, a W3C traceparent
string set only while tracing is on), so a handler's ``process`` span joins the sender's
trace on any runtime, in this process or across processes (see `cantata.core.tracing`).
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import Context, ContextVar
from typing import Any

from ..core import CancellationToken, tracing
from .ids import AgentId, TopicId

__all__ = ["MessageContext", "current_context"]


class MessageContext:
    """The envelope of one delivery: ids, sender, topic, time and a cancellation token.

    - `message_id`: unique per message; a redelivery keeps it (see `is_redelivery`).
    - `correlation_id`: shared by every message caused, directly or not, by one root message.
    - `causation_id`: the message id of the handler that sent this one (None for a root).
    - `topic_id`: the topic of a published message; None for a direct request.
    - `is_rpc`: True for `send_message` (the sender waits for the result).
    - `is_redelivery`: the recipient already handled this message id (within its window).
    - `trace_context`: the W3C traceparent of the sender's ``send``/``publish`` span, or
      None (tracing off at the sender): plain text, so any runtime's envelope carries it.
    """

    __slots__ = (
        "_caller",
        "_context",
        "_done",
        "_message",
        "cancellation_token",
        "causation_id",
        "correlation_id",
        "is_redelivery",
        "is_rpc",
        "message_id",
        "recipient",
        "sender",
        "timestamp",
        "topic_id",
        "trace_context",
    )

    def __init__(
        self,
        *,
        message_id: str,
        correlation_id: str,
        causation_id: str | None,
        sender: AgentId | None,
        recipient: AgentId | None,
        topic_id: TopicId | None,
        timestamp: float,
        cancellation_token: CancellationToken,
        is_rpc: bool,
        is_redelivery: bool = False,
        caller: MessageContext | None = None,
        trace_context: str | None = None,
    ) -> None:
        self.message_id = message_id
        self.correlation_id = correlation_id
        self.causation_id = causation_id
        self.sender = sender
        self.recipient = recipient
        self.topic_id = topic_id
        self.timestamp = timestamp
        self.cancellation_token = cancellation_token
        self.is_rpc = is_rpc
        self.is_redelivery = is_redelivery
        self.trace_context = trace_context
        # The context of the handler awaiting this direct request, if any: the runtime
        # walks this chain to let a call come back to an agent that is waiting on it.
        self._caller = caller
        # The publisher's contextvars, for the handlers of a broadcast event: each runs in
        # its own copy, as a direct request's handler runs in a copy of its sender's.
        self._context: Context | None = None
        # Set on a publication waiting in mailboxes: the message it carries (see `Cell`).
        self._message: Any = None
        # Set on a publication whose sender waits until every subscriber has handled it
        # (a Ray host's reply to its router): called once per delivery, after the handler.
        self._done: Callable[[], object] | None = None

    def _copy_for(self, recipient: AgentId) -> MessageContext:
        # One copy per delivery of a broadcast, made when its handler is about to run (so
        # that a backlog holds one publication, not one context per subscriber); slot by
        # slot is cheaper than __init__.
        copy = _new_context(MessageContext)
        copy.message_id = self.message_id
        copy.correlation_id = self.correlation_id
        copy.causation_id = self.causation_id
        copy.sender = self.sender
        copy.recipient = recipient
        copy.topic_id = self.topic_id
        copy.timestamp = self.timestamp
        copy.cancellation_token = self.cancellation_token
        copy.is_rpc = self.is_rpc
        copy.is_redelivery = False
        copy.trace_context = self.trace_context
        copy._caller = None
        copy._context = self._context
        copy._done = None
        return copy

    def to_dict(self) -> dict[str, Any]:
        """The envelope's fields as plain values (for logs and traces)."""
        return {
            "message_id": self.message_id,
            "correlation_id": self.correlation_id,
            "causation_id": self.causation_id,
            "sender": None if self.sender is None else str(self.sender),
            "recipient": None if self.recipient is None else str(self.recipient),
            "topic_id": None if self.topic_id is None else str(self.topic_id),
            "timestamp": self.timestamp,
            "is_rpc": self.is_rpc,
            "is_redelivery": self.is_redelivery,
            "trace_context": self.trace_context,
        }

    def __repr__(self) -> str:
        return f"MessageContext({self.to_dict()!r})"


_new_context = object.__new__

_current: ContextVar[MessageContext | None] = ContextVar("cantata_message_context", default=None)


def current_context() -> MessageContext | None:
    """The context of the handler running in this task, or None outside any handler."""
    return _current.get()


# -- spans of messages (used only while tracing is on) ---------------------------------


def _message_attributes(ctx: MessageContext, message: Any, operation: str) -> dict[str, Any]:
    """Messaging semantic-convention attributes plus cantata's ids (None values dropped)."""
    return {
        "messaging.system": "cantata",
        "messaging.operation.name": operation,
        "messaging.operation.type": "process" if operation == "process" else "send",
        "messaging.destination.name": _destination(ctx),
        "messaging.message.id": ctx.message_id,
        "messaging.message.conversation_id": ctx.correlation_id,
        "cantata.message.id": ctx.message_id,
        "cantata.message.type": type(message).__qualname__,
        "cantata.correlation_id": ctx.correlation_id,
        "cantata.causation_id": ctx.causation_id,
        "cantata.sender": None if ctx.sender is None else str(ctx.sender),
        "cantata.recipient": None if ctx.recipient is None else str(ctx.recipient),
        "cantata.topic": None if ctx.topic_id is None else str(ctx.topic_id),
    }


def _destination(ctx: MessageContext) -> str:
    if ctx.topic_id is not None:
        return ctx.topic_id.type
    return "" if ctx.recipient is None else ctx.recipient.type


def _start_send(ctx: MessageContext, message: Any) -> Any:
    """Start the sender's span for `ctx` (``send {agent type}`` for a direct request,
    ``publish {topic type}`` for an event; a child of the current span) and put its
    traceparent in the envelope. None while tracing is off."""
    publish = ctx.topic_id is not None and not ctx.is_rpc
    operation = "publish" if publish else "send"
    span = tracing.start_span(
        f"{operation} {_destination(ctx)}",
        _message_attributes(ctx, message, operation),
        kind="producer",
    )
    ctx.trace_context = tracing.traceparent(span) if span is not None else None
    return span


def _start_process(ctx: MessageContext, message: Any) -> Any:
    """Start the handler's ``process {agent type}`` span: a child of the sender's span
    named in the envelope, and for a published event also linked to it (the messaging
    conventions' link to the context the message was created in). None while off."""
    carried = ctx.trace_context
    return tracing.start_span(
        f"process {'' if ctx.recipient is None else ctx.recipient.type}",
        _message_attributes(ctx, message, "process"),
        kind="consumer",
        parent=carried,
        links=() if ctx.is_rpc or carried is None else (carried,),
    )
