"""Messages and their contents: the one data model every layer speaks.

A `Message` has a role, a list of contents, an author name, a message id and free
metadata. Contents are small slotted classes; each has a hand-written JSON codec in the
type registry, because threads of many thousands of messages are serialized often and a
generic codec would dominate that cost. Inside a message, a text content is written as a
bare string (the tagged ``{"$type": "text", ...}`` form is read too).
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias, cast, get_args

from .bounded_json import loads_json, short_repr
from .errors import InvalidMessageError, SerializationError
from .ids import new_id
from .serialization import TYPE_KEY, registry

__all__ = [
    "Content",
    "DataContent",
    "FunctionApprovalRequestContent",
    "FunctionApprovalResponseContent",
    "FunctionCallContent",
    "FunctionResultContent",
    "Message",
    "Role",
    "TextContent",
    "Usage",
    "UsageContent",
]

Role: TypeAlias = Literal["system", "user", "assistant", "tool"]
_ROLES: frozenset[str] = frozenset(get_args(Role))


@dataclass(slots=True)
class Usage:
    """Token counts of one or more model calls; `+` adds them up.

    `input_tokens` counts every prompt token, cached or not; `cached_input_tokens` and
    `cache_write_tokens` are the parts of it read from and written to the provider's prompt
    cache (Anthropic reports both, OpenAI the reads), 0 where the provider says nothing.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    """Of `input_tokens`, those the server read from its prompt cache (priced apart)."""
    cache_write_tokens: int = 0
    """Of `input_tokens`, those written to the prompt cache (Anthropic reports them)."""

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cached_input_tokens + other.cached_input_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )


@dataclass(slots=True)
class TextContent:
    """Plain text."""

    text: str


@dataclass(slots=True)
class FunctionCallContent:
    """The model asks for a tool call. `arguments` is the parsed object, or the raw text the
    model produced when it was not valid JSON (the loop reports that back to the model)."""

    call_id: str
    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)

    def parse_arguments(self) -> dict[str, Any]:
        """The arguments as a dict; raises `InvalidMessageError` when they are not a JSON object.

        Text nested deeper than `cantata.core.MAX_JSON_DEPTH` is refused like malformed text.
        """
        args = self.arguments
        if isinstance(args, str):
            if not args.strip():
                return {}
            try:
                args = loads_json(args)
            except SerializationError as exc:
                raise InvalidMessageError(
                    f"arguments of call {short_repr(self.call_id)} to {short_repr(self.name)} "
                    f"are not valid JSON: {exc}"
                ) from exc
        if not isinstance(args, dict):
            raise InvalidMessageError(
                f"arguments of call {short_repr(self.call_id)} to {short_repr(self.name)} must "
                f"be a JSON object, got {type(args).__name__}"
            )
        return args


@dataclass(slots=True)
class FunctionResultContent:
    """The result of a tool call: a JSON-able `result`, or an `error` text for the model."""

    call_id: str
    result: Any = None
    error: str | None = None

    @property
    def is_error(self) -> bool:
        return self.error is not None


@dataclass(slots=True)
class DataContent:
    """Binary data (an image, audio, a file) inline as bytes or by URI, with its media type."""

    media_type: str
    data: bytes | None = None
    uri: str | None = None

    def __post_init__(self) -> None:
        if (self.data is None) == (self.uri is None):
            raise InvalidMessageError("DataContent needs exactly one of data= or uri=")

    @property
    def is_image(self) -> bool:
        return self.media_type.startswith("image/")

    def to_data_uri(self) -> str:
        """A ``data:`` URI for inline data, or the URI itself."""
        if self.uri is not None:
            return self.uri
        assert self.data is not None  # guaranteed by __post_init__
        return f"data:{self.media_type};base64,{base64.b64encode(self.data).decode('ascii')}"


@dataclass(slots=True)
class UsageContent:
    """Token usage reported by a model for the message that carries it."""

    usage: Usage


@dataclass(slots=True)
class FunctionApprovalRequestContent:
    """A tool call waiting for a person's approval; answer with `create_response`."""

    request_id: str
    function_call: FunctionCallContent

    def create_response(self, approved: bool) -> FunctionApprovalResponseContent:
        return FunctionApprovalResponseContent(self.request_id, self.function_call, approved)


@dataclass(slots=True)
class FunctionApprovalResponseContent:
    """A person's answer to an approval request; an approved call runs on the next turn."""

    request_id: str
    function_call: FunctionCallContent
    approved: bool


Content: TypeAlias = (
    TextContent
    | FunctionCallContent
    | FunctionResultContent
    | DataContent
    | UsageContent
    | FunctionApprovalRequestContent
    | FunctionApprovalResponseContent
)


class Message:
    """One message of a conversation.

    ``Message("user", "hello")`` is the short form: a string becomes one `TextContent`.
    Every message gets a fresh `message_id` unless one is given; stores and threads use it
    to never record the same message twice.
    """

    __slots__ = ("author_name", "contents", "message_id", "metadata", "role")

    def __init__(
        self,
        role: Role,
        contents: str | Content | Sequence[Content] | None = None,
        *,
        author_name: str | None = None,
        message_id: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        if role not in _ROLES:
            raise InvalidMessageError(
                f"role must be one of {sorted(_ROLES)}, got {short_repr(role)}"
            )
        self.role: Role = role
        if contents is None:
            self.contents: list[Content] = []
        elif isinstance(contents, str):
            self.contents = [TextContent(contents)]
        elif type(contents) is list or isinstance(contents, Sequence):  # list: skip the ABC
            self.contents = list(cast("Sequence[Content]", contents))
        else:
            self.contents = [contents]
        self.author_name = author_name
        self.message_id = message_id or new_id()
        self.metadata: dict[str, Any] = metadata if metadata is not None else {}

    @classmethod
    def _trusted(
        cls,
        role: Role,
        contents: list[Content],
        author_name: str | None,
        message_id: str,
        metadata: dict[str, Any],
    ) -> Message:
        """Build from already-checked parts (the JSON decoder's fast path)."""
        message = cls.__new__(cls)
        message.role = role
        message.contents = contents
        message.author_name = author_name
        message.message_id = message_id
        message.metadata = metadata
        return message

    @property
    def text(self) -> str:
        """The text contents joined; empty when there is none."""
        contents = self.contents
        if len(contents) == 1:  # most messages: read at every turn of a team, so no join
            only = contents[0]
            return only.text if type(only) is TextContent else ""
        return "".join([c.text for c in contents if type(c) is TextContent])

    @property
    def function_calls(self) -> list[FunctionCallContent]:
        return [c for c in self.contents if type(c) is FunctionCallContent]

    @property
    def function_results(self) -> list[FunctionResultContent]:
        return [c for c in self.contents if type(c) is FunctionResultContent]

    def copy(self, **changes: Any) -> Message:
        """A shallow copy with some fields replaced (contents and metadata are new lists/dicts)."""
        return Message(
            changes.get("role", self.role),
            changes.get("contents", list(self.contents)),
            author_name=changes.get("author_name", self.author_name),
            message_id=changes.get("message_id", self.message_id),
            metadata=changes.get("metadata", dict(self.metadata)),
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Message):
            return NotImplemented
        return (
            self.message_id == other.message_id
            and self.role == other.role
            and self.contents == other.contents
            and self.author_name == other.author_name
            and self.metadata == other.metadata
        )

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        who = f", author_name={short_repr(self.author_name)}" if self.author_name else ""
        text = self.text
        body = repr(text if len(text) <= 60 else text[:57] + "...") if text else None
        body = body or short_repr(self.contents, 120)
        return f"Message({self.role!r}, {body}{who}, message_id={short_repr(self.message_id)})"

    @staticmethod
    def coerce(value: str | Message | Iterable[str | Message] | None) -> list[Message]:
        """Normalize run input: None, a string, a `Message` or a list of them; strings are user
        messages."""
        if value is None:
            return []
        if isinstance(value, str):
            return [Message("user", value)]
        if isinstance(value, Message):
            return [value]
        out: list[Message] = []
        for item in value:
            if isinstance(item, str):
                out.append(Message("user", item))
            elif isinstance(item, Message):
                out.append(item)
            else:
                raise InvalidMessageError(
                    f"expected a string or a Message, got {type(item).__name__}"
                )
        return out


# --- JSON codecs (hand-written: threads serialize thousands of these) -----------------

# The registry's inner conversions: the depth of a whole value is checked once, at the
# public `to_json`/`from_json` that started the conversion.
_to, _from = registry._to_json, registry._from_json


def _req(data: dict[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    try:
        value = data[key]
    except KeyError:
        raise SerializationError(f"missing field {key!r}") from None
    if not isinstance(value, kind):
        raise SerializationError(f"field {key!r} has the wrong type {type(value).__name__}")
    return value


def _opt_str(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is not None and type(value) is not str:
        raise SerializationError(f"field {key!r} must be a string or absent")
    return value


def _enc_call(c: FunctionCallContent) -> dict[str, Any]:
    return {"call_id": c.call_id, "name": c.name, "arguments": _to(c.arguments)}


def _dec_call(d: dict[str, Any]) -> FunctionCallContent:
    args = _from(d.get("arguments", {}))
    if not isinstance(args, dict | str):
        raise SerializationError("field 'arguments' must be an object or a string")
    return FunctionCallContent(_req(d, "call_id", str), _req(d, "name", str), args)


def _enc_content(c: Any) -> Any:
    # Text is most of every conversation: inside a message's contents it is written as a
    # bare string (nothing else there is a string), which keeps threads small and fast.
    if type(c) is TextContent:
        return c.text
    return _to(c)


def _enc_message(m: Message) -> dict[str, Any]:
    out: dict[str, Any] = {
        "role": m.role,
        "contents": [_enc_content(c) for c in m.contents],
        "id": m.message_id,
    }
    if m.author_name is not None:
        out["author_name"] = m.author_name
    if m.metadata:
        out["metadata"] = _to(m.metadata)
    return out


def _dec_content(data: Any) -> Content:
    if type(data) is str:
        return TextContent(data)
    if type(data) is dict:
        decode = _CONTENT_DECODERS.get(data.get(TYPE_KEY))  # type: ignore[arg-type]
        if decode is not None:
            try:
                content: Content = decode(data)
            except SerializationError:
                raise
            except Exception as exc:
                raise SerializationError(
                    f"malformed message content: {short_repr(str(exc), 300)}"
                ) from exc
            return content
    value = _from(data)  # raises the registry's own error for unknown tags
    raise SerializationError(f"a message content cannot be a {type(value).__name__}")


def _dec_message(d: dict[str, Any]) -> Message:
    contents = [_dec_content(c) for c in _req(d, "contents", list)]
    raw_metadata = d.get("metadata")
    metadata = {} if raw_metadata is None else _from(raw_metadata)
    if not isinstance(metadata, dict):
        raise SerializationError("field 'metadata' must be an object")
    role = _req(d, "role", str)
    if role not in _ROLES:
        raise SerializationError(f"role must be one of {sorted(_ROLES)}, got {short_repr(role)}")
    return Message._trusted(
        role, contents, _opt_str(d, "author_name"), _req(d, "id", str), metadata
    )


def _dec_data(d: dict[str, Any]) -> DataContent:
    raw = _opt_str(d, "base64")
    try:
        return DataContent(
            _req(d, "media_type", str),
            data=base64.b64decode(raw, validate=True) if raw is not None else None,
            uri=_opt_str(d, "uri"),
        )
    except (InvalidMessageError, ValueError) as exc:
        raise SerializationError(f"malformed DataContent: {exc}") from exc


def _enc_data(c: DataContent) -> dict[str, Any]:
    out: dict[str, Any] = {"media_type": c.media_type}
    if c.data is not None:
        out["base64"] = base64.b64encode(c.data).decode("ascii")
    else:
        out["uri"] = c.uri
    return out


def _dec_result(d: dict[str, Any]) -> FunctionResultContent:
    return FunctionResultContent(
        _req(d, "call_id", str), _from(d.get("result")), _opt_str(d, "error")
    )


def _enc_result(c: FunctionResultContent) -> dict[str, Any]:
    out: dict[str, Any] = {"call_id": c.call_id, "result": _to(c.result)}
    if c.error is not None:
        out["error"] = c.error
    return out


def _dec_usage(d: dict[str, Any]) -> Usage:
    cached = d.get("cached_input_tokens", 0)
    if type(cached) is not int:
        raise SerializationError("field 'cached_input_tokens' must be an int")
    wrote = d.get("cache_write_tokens", 0)
    if type(wrote) is not int:
        raise SerializationError("field 'cache_write_tokens' must be an int")
    return Usage(_req(d, "input_tokens", int), _req(d, "output_tokens", int), cached, wrote)


def _enc_usage(u: Usage) -> dict[str, Any]:
    out = {"input_tokens": u.input_tokens, "output_tokens": u.output_tokens}
    # written only when known: data from before the cache fields reads the same
    if u.cached_input_tokens:
        out["cached_input_tokens"] = u.cached_input_tokens
    if u.cache_write_tokens:
        out["cache_write_tokens"] = u.cache_write_tokens
    return out


def _dec_approval_req(d: dict[str, Any]) -> FunctionApprovalRequestContent:
    call = _from(_req(d, "function_call", dict))
    if type(call) is not FunctionCallContent:
        raise SerializationError("field 'function_call' must be a function call")
    return FunctionApprovalRequestContent(_req(d, "request_id", str), call)


def _dec_approval_resp(d: dict[str, Any]) -> FunctionApprovalResponseContent:
    req = _dec_approval_req(d)
    return FunctionApprovalResponseContent(
        req.request_id, req.function_call, _req(d, "approved", bool)
    )


def _dec_text(d: dict[str, Any]) -> TextContent:
    return TextContent(_req(d, "text", str))


def _dec_usage_content(d: dict[str, Any]) -> UsageContent:
    usage = _from(_req(d, "usage", dict))
    if type(usage) is not Usage:
        raise SerializationError("field 'usage' must be a usage object")
    return UsageContent(usage)


# name -> (type, encode, decode); the same table feeds the registry and the fast path
# that message decoding takes for its contents.
_CONTENT_CODECS: dict[str, tuple[type, Any, Any]] = {
    "text": (TextContent, lambda c: {"text": c.text}, _dec_text),
    "function_call": (FunctionCallContent, _enc_call, _dec_call),
    "function_result": (FunctionResultContent, _enc_result, _dec_result),
    "data": (DataContent, _enc_data, _dec_data),
    "usage_content": (UsageContent, lambda c: {"usage": _to(c.usage)}, _dec_usage_content),
    "approval_request": (
        FunctionApprovalRequestContent,
        lambda c: {"request_id": c.request_id, "function_call": _to(c.function_call)},
        _dec_approval_req,
    ),
    "approval_response": (
        FunctionApprovalResponseContent,
        lambda c: {
            "request_id": c.request_id,
            "function_call": _to(c.function_call),
            "approved": c.approved,
        },
        _dec_approval_resp,
    ),
}
_CONTENT_DECODERS: dict[str, Any] = {name: codec[2] for name, codec in _CONTENT_CODECS.items()}

for _name, (_cls, _encode, _decode) in _CONTENT_CODECS.items():
    registry.register(_cls, name=_name, encode=_encode, decode=_decode)
registry.register(
    Usage,
    name="usage",
    encode=_enc_usage,
    decode=_dec_usage,
)
registry.register(Message, name="message", encode=_enc_message, decode=_dec_message)
