"""What goes into and comes out of a chat client: options, tool specs, responses, updates."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal, TypeAlias

from pydantic import BaseModel, ValidationError

from ..core import (
    Content,
    DataContent,
    FunctionApprovalRequestContent,
    FunctionApprovalResponseContent,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    ModelOutputError,
    Role,
    SerializationError,
    TextContent,
    Usage,
    UsageContent,
    from_json,
    register,
    to_json,
)

__all__ = [
    "ChatOptions",
    "ChatResponse",
    "ChatResponseUpdate",
    "FinishReason",
    "ResponseFormat",
    "ToolChoice",
    "ToolSpec",
    "parse_structured",
    "response_format_schema",
]

FinishReason: TypeAlias = Literal[
    "stop", "length", "tool_calls", "content_filter", "approval_required", "terminated"
]
"""Why an answer ended; the last two come from the function loop, never from a model."""
ToolChoice: TypeAlias = Literal["auto", "none", "required"] | str
"""``"auto"``, ``"none"``, ``"required"``, or the name of the one tool the model must call."""
_CONTENT_TYPES: frozenset[type] = frozenset(
    (
        TextContent,
        FunctionCallContent,
        FunctionResultContent,
        DataContent,
        UsageContent,
        FunctionApprovalRequestContent,
        FunctionApprovalResponseContent,
    )
)
ResponseFormat: TypeAlias = type[BaseModel] | dict[str, Any]
"""A pydantic model class, or a JSON schema (a dict)."""


@dataclass(slots=True, frozen=True)
class ToolSpec:
    """What a model is told about a tool: its name, description and JSON schema of arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(slots=True, kw_only=True)
class ChatOptions:
    """Per-request settings. `None` means "the client's default"; `merge` layers them."""

    model: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    stop: list[str] | None = None
    seed: int | None = None
    tools: Sequence[ToolSpec] | None = None
    tool_choice: ToolChoice | None = None
    response_format: ResponseFormat | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    """Provider-specific request fields, passed through as they are."""

    def merge(self, override: ChatOptions | None) -> ChatOptions:
        """A new `ChatOptions`: `override`'s set fields win; `extra` dicts are merged."""
        if override is None:
            return self
        changes: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(override, f.name)
            if f.name == "extra":
                if value:
                    changes["extra"] = {**self.extra, **value}
            elif value is not None:
                changes[f.name] = value
        return replace(self, **changes) if changes else self


def response_format_schema(fmt: ResponseFormat) -> tuple[str, dict[str, Any]]:
    """The (name, JSON schema) of a response format."""
    if isinstance(fmt, dict):
        return str(fmt.get("title", "response")), fmt
    return fmt.__name__, fmt.model_json_schema()


def parse_structured(text: str, fmt: ResponseFormat) -> Any:
    """Validate a model's text against a response format: a model instance, or parsed JSON."""
    try:
        if isinstance(fmt, dict):
            return json.loads(text)
        return fmt.model_validate_json(text)
    except (ValueError, ValidationError) as exc:
        name = response_format_schema(fmt)[0]
        raise ModelOutputError(
            f"the model's answer does not fit the response format {name!r}: {exc}"
        ) from exc


@dataclass(slots=True)
class ChatResponse:
    """A complete answer: usually one assistant message (text and/or tool calls)."""

    messages: list[Message]
    usage: Usage | None = None
    finish_reason: FinishReason | str | None = None
    model: str | None = None
    response_id: str | None = None
    value: Any = None
    """The validated structured output when the request had a `response_format`."""

    @property
    def text(self) -> str:
        """The text of every message, joined."""
        return "".join(m.text for m in self.messages)

    @property
    def function_calls(self) -> list[FunctionCallContent]:
        """Every tool call the model asked for, in order."""
        return [c for m in self.messages for c in m.function_calls]

    @classmethod
    def from_updates(
        cls, updates: Iterable[ChatResponseUpdate], *, response_format: ResponseFormat | None = None
    ) -> ChatResponse:
        """Fold a stream into the response it stands for; adjacent text chunks are joined."""
        messages: list[Message] = []
        by_id: dict[str, Message] = {}
        usage: Usage | None = None
        finish: str | None = None
        model: str | None = None
        response_id: str | None = None
        for update in updates:
            finish = update.finish_reason or finish
            model = update.model or model
            response_id = update.response_id or response_id
            key = update.message_id or ""
            msg = by_id.get(key)
            if msg is None:
                msg = Message(
                    update.role, [], author_name=update.author_name, message_id=update.message_id
                )
                by_id[key] = msg
                messages.append(msg)
            if update.metadata:
                msg.metadata.update(update.metadata)
            for content in update.contents:
                if type(content) is UsageContent:
                    usage = content.usage if usage is None else usage + content.usage
                elif (
                    type(content) is TextContent
                    and msg.contents
                    and type(msg.contents[-1]) is TextContent
                ):
                    last = msg.contents[-1]
                    msg.contents[-1] = TextContent(last.text + content.text)
                else:
                    msg.contents.append(content)
        messages = [m for m in messages if m.contents]
        response = cls(
            messages, usage=usage, finish_reason=finish, model=model, response_id=response_id
        )
        if response_format is not None and _answers(messages, finish):
            response.value = parse_structured(messages[-1].text, response_format)
        return response


def _answers(messages: list[Message], finish: str | None) -> bool:
    """Whether the last message is a final answer (not tool calls, not a stopped loop), the
    one a response format describes; earlier messages of a tool loop are not parsed."""
    if not messages or finish in ("tool_calls", "approval_required", "terminated"):
        return False
    last = messages[-1]
    return last.role == "assistant" and not last.function_calls


@dataclass(slots=True)
class ChatResponseUpdate:
    """One chunk of a streamed answer. Text arrives in pieces; a tool call arrives whole,
    once its argument deltas are assembled."""

    contents: list[Content]
    role: Role = "assistant"
    message_id: str | None = None
    author_name: str | None = None
    finish_reason: FinishReason | str | None = None
    model: str | None = None
    response_id: str | None = None
    metadata: dict[str, Any] | None = None
    """Merged into the metadata of the message this update belongs to."""

    @property
    def text(self) -> str:
        """The text pieces of this update, joined."""
        return "".join(c.text for c in self.contents if type(c) is TextContent)


# --- JSON codecs: responses are persisted (cassettes, journals); `value` is recomputed ------


def _enc_response(r: ChatResponse) -> dict[str, Any]:
    return {
        "messages": [to_json(m) for m in r.messages],
        "usage": to_json(r.usage),
        "finish_reason": r.finish_reason,
        "model": r.model,
        "response_id": r.response_id,
    }


def _dec_response(d: dict[str, Any]) -> ChatResponse:
    messages = [from_json(m) for m in _field(d, "messages", list)]
    if not all(isinstance(m, Message) for m in messages):
        raise SerializationError("field 'messages' of a chat response must hold messages")
    usage = from_json(d.get("usage"))
    if usage is not None and not isinstance(usage, Usage):
        raise SerializationError("field 'usage' of a chat response must be a usage object")
    return ChatResponse(
        messages,
        usage=usage,
        finish_reason=_opt(d, "finish_reason"),
        model=_opt(d, "model"),
        response_id=_opt(d, "response_id"),
    )


def _enc_update(u: ChatResponseUpdate) -> dict[str, Any]:
    return {
        "contents": [to_json(c) for c in u.contents],
        "role": u.role,
        "message_id": u.message_id,
        "author_name": u.author_name,
        "finish_reason": u.finish_reason,
        "model": u.model,
        "response_id": u.response_id,
        "metadata": to_json(u.metadata),
    }


def _dec_update(d: dict[str, Any]) -> ChatResponseUpdate:
    contents = [from_json(c) for c in _field(d, "contents", list)]
    if not all(type(c) in _CONTENT_TYPES for c in contents):
        raise SerializationError("field 'contents' of an update must hold message contents")
    role = _field(d, "role", str)
    if role not in ("system", "user", "assistant", "tool"):
        raise SerializationError(f"unknown role {role!r} in a chat response update")
    return ChatResponseUpdate(
        contents,
        role=role,
        message_id=_opt(d, "message_id"),
        author_name=_opt(d, "author_name"),
        finish_reason=_opt(d, "finish_reason"),
        model=_opt(d, "model"),
        response_id=_opt(d, "response_id"),
        metadata=_metadata(from_json(d.get("metadata"))),
    )


def _field(d: dict[str, Any], key: str, kind: type) -> Any:
    value = d.get(key)
    if not isinstance(value, kind):
        raise SerializationError(f"field {key!r} must be a {kind.__name__}")
    return value


def _opt(d: dict[str, Any], key: str) -> str | None:
    value = d.get(key)
    if value is not None and not isinstance(value, str):
        raise SerializationError(f"field {key!r} must be a string or null")
    return value


register(ChatResponse, name="chat_response", encode=_enc_response, decode=_dec_response)


def _metadata(value: Any) -> dict[str, Any] | None:
    if value is not None and not isinstance(value, dict):
        raise SerializationError("field 'metadata' of an update must be an object or null")
    return value


register(ChatResponseUpdate, name="chat_response_update", encode=_enc_update, decode=_dec_update)
register(ToolSpec, name="tool_spec")
