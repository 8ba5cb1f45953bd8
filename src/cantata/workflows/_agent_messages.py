"""The messages agent executors exchange, registered for checkpoints, and two helpers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..agents import AgentResponse
from ..core import (
    FunctionApprovalRequestContent,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    SerializationError,
    TextContent,
    Usage,
    from_json,
    register,
    to_json,
)

__all__ = [
    "CONVERSATION",
    "AgentExecutorRequest",
    "AgentExecutorResponse",
    "TurnToken",
    "as_user_messages",
    "open_requests",
]


CONVERSATION = "conversation"
"""Name of an agent executor's conversation log (what it received, then its replies)."""


@register(name="cantata.workflows.AgentExecutorRequest")
@dataclass(slots=True)
class AgentExecutorRequest:
    """Messages for an agent executor; with ``should_respond=False`` they are only cached."""

    messages: list[Message] = field(default_factory=list)
    should_respond: bool = True


@register(name="cantata.workflows.TurnToken")
@dataclass(slots=True)
class TurnToken:
    """Tells an agent executor in turn-token mode to run now; it passes the token on.

    ``stream=True`` makes the agent stream (agent-update events) even in a `run()`;
    ``stream=False`` stops it streaming in `run_stream()`; None follows the run.
    """

    stream: bool | None = None


@dataclass(slots=True)
class AgentExecutorResponse:
    """What an agent executor sends downstream after its agent ran."""

    executor_id: str
    agent_response: AgentResponse
    full_conversation: list[Message]
    """The conversation so far as the executor saw it: what it received, then its replies."""


def _encode_response(r: AgentExecutorResponse) -> dict[str, Any]:
    a = r.agent_response
    return {
        "executor_id": r.executor_id,
        "messages": [to_json(m) for m in a.messages],
        "usage": to_json(a.usage),
        "value": to_json(a.value),
        "agent_id": a.agent_id,
        "finish_reason": a.finish_reason,
        "response_id": a.response_id,
        "full_conversation": [to_json(m) for m in r.full_conversation],
    }


def _messages(data: Any, key: str) -> list[Message]:
    items = from_json(data.get(key))
    if not isinstance(items, list) or not all(isinstance(m, Message) for m in items):
        raise SerializationError(f"field {key!r} must be a list of messages")
    return items


def _decode_response(d: dict[str, Any]) -> AgentExecutorResponse:
    executor_id = d.get("executor_id")
    if not isinstance(executor_id, str):
        raise SerializationError("field 'executor_id' must be a string")
    usage = from_json(d.get("usage"))
    if usage is not None and not isinstance(usage, Usage):
        raise SerializationError("field 'usage' must be a usage object or null")
    response = AgentResponse(
        _messages(d, "messages"),
        usage=usage,
        value=from_json(d.get("value")),
        agent_id=d.get("agent_id"),
        finish_reason=d.get("finish_reason"),
        response_id=d.get("response_id"),
    )
    return AgentExecutorResponse(executor_id, response, _messages(d, "full_conversation"))


register(
    AgentExecutorResponse,
    name="cantata.workflows.AgentExecutorResponse",
    encode=_encode_response,
    decode=_decode_response,
)


def as_user_messages(messages: list[Message], own_name: str) -> list[Message]:
    """Other agents' replies as user messages (their text only), so this agent's model
    reads them as input rather than as something it said itself. Messages without an author
    (the caller's, answers to this agent's requests) stay as they are."""
    out: list[Message] = []
    for m in messages:
        foreign = m.role in ("assistant", "tool") and m.author_name not in (None, own_name)
        if not foreign:
            out.append(m)
            continue
        texts = [c for c in m.contents if type(c) is TextContent]
        if texts:
            out.append(m.copy(role="user", contents=texts))
    return out


def open_requests(
    messages: list[Message],
) -> list[FunctionApprovalRequestContent | FunctionCallContent]:
    """Approval requests, and function calls that no result or approval request covers."""
    answered = {c.call_id for m in messages for c in m.contents if type(c) is FunctionResultContent}
    answered.update(
        c.function_call.call_id
        for m in messages
        for c in m.contents
        if type(c) is FunctionApprovalRequestContent
    )
    out: list[FunctionApprovalRequestContent | FunctionCallContent] = []
    for m in messages:
        for c in m.contents:
            if type(c) is FunctionApprovalRequestContent or (
                type(c) is FunctionCallContent and c.call_id not in answered
            ):
                out.append(c)
    return out
