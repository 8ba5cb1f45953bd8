"""Reading OpenAI request bodies: JSON within bounds, fields checked, messages converted.

Every check raises `RequestError` (400) naming the field, so bad input is always a typed
4xx. OpenAI chat messages and Responses input items become cantata `Message`s; an
assistant's answer becomes the text the client reads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from starlette.requests import Request

from ..agents import AgentResponse
from ..core import (
    Content,
    DataContent,
    FunctionApprovalResponseContent,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    SerializationError,
    TextContent,
    loads_json,
    short_repr,
)
from .errors import RequestError
from .served import Served, ServedSet

__all__ = [
    "answer_text",
    "chat_messages",
    "optional_bool",
    "optional_str",
    "read_body",
    "referenced_items",
    "require_served",
    "response_input",
    "sampling_options",
]

_MAX_MESSAGES = 10_000
_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}


async def read_body(request: Request) -> dict[str, Any]:
    """The request's JSON object (bounded depth, UTF-8), or a 400 saying what is wrong."""
    raw = await request.body()
    if not raw.strip():
        raise RequestError("the request body is empty; send a JSON object")
    try:
        data = loads_json(raw)
    except SerializationError as exc:
        raise RequestError(f"the request body is not valid JSON: {exc}") from None
    if type(data) is not dict:
        raise RequestError(f"the request body must be a JSON object, got {_kind(data)}")
    return data


def require_served(served: ServedSet, body: dict[str, Any]) -> Served:
    """The served object named by the body's ``model``; a 404 lists what is served."""
    name = body.get("model")
    if type(name) is not str or not name:
        raise RequestError(
            f"'model' must name a served object ({_names(served)}), got {_kind(name)}",
            param="model",
        )
    entry = served.get(name)
    if entry is None:
        raise RequestError(
            f"model {short_repr(name)} is not served here; served: {_names(served)}",
            status=404,
            param="model",
            code="model_not_found",
        )
    return entry


def optional_bool(body: dict[str, Any], name: str, default: bool) -> bool:
    value = body.get(name, default)
    if value is None:
        return default
    if type(value) is not bool:
        raise RequestError(f"'{name}' must be true or false, got {_kind(value)}", param=name)
    return value


def optional_str(body: dict[str, Any], name: str) -> str | None:
    value = body.get(name)
    if value is not None and type(value) is not str:
        raise RequestError(f"'{name}' must be a string, got {_kind(value)}", param=name)
    return value


_TOKENS_FIELDS = ("max_tokens", "max_completion_tokens", "max_output_tokens")
_RANGES = {"temperature": 2.0, "top_p": 1.0}


def sampling_options(body: dict[str, Any], entry: Served) -> dict[str, Any]:
    """The request's sampling fields as an agent's chat option keywords (they override the
        agent's own for this request; a team's participants take them for every turn). Workflows
    take none: their agents decide."""
    out: dict[str, Any] = {}
    for name, top in _RANGES.items():
        value = body.get(name)
        if value is None:
            continue
        if type(value) not in (int, float) or not 0 <= value <= top:
            raise RequestError(f"'{name}' must be a number from 0 to {top:g}", param=name)
        out[name] = float(value)
    for name in _TOKENS_FIELDS:
        value = body.get(name)
        if value is None:
            continue
        if type(value) is not int or not 1 <= value <= 1_000_000:
            raise RequestError(f"'{name}' must be a whole number from 1 to 1000000", param=name)
        out["max_tokens"] = value
    stop = body.get("stop")
    if stop is not None:
        stops = [stop] if type(stop) is str else stop
        if (
            type(stops) is not list
            or not 0 < len(stops) <= 4
            or any(type(x) is not str for x in stops)
        ):
            raise RequestError("'stop' must be a string or a list of 1 to 4 strings", param="stop")
        out["stop"] = stops
    seed = body.get("seed")
    if seed is not None:
        if type(seed) is not int or abs(seed) >= 2**63:
            raise RequestError("'seed' must be a whole number", param="seed")
        out["seed"] = seed
    if out and entry.kind == "workflow":
        raise RequestError(
            f"{', '.join(sorted(out))} apply to agents; {entry.name!r} is a workflow, whose "
            "agents use their own settings (a team's participants take them): leave them out",
            param=sorted(out)[0],
        )
    return out


def chat_messages(body: dict[str, Any]) -> list[Message]:
    """The ``messages`` of a chat completions request as cantata messages."""
    items = body.get("messages")
    if type(items) is not list or not items:
        raise RequestError(
            f"'messages' must be a non-empty list of messages, got {_kind(items)}",
            param="messages",
        )
    if len(items) > _MAX_MESSAGES:
        raise RequestError(f"at most {_MAX_MESSAGES} messages per request", param="messages")
    return [_chat_message(item, f"messages[{i}]") for i, item in enumerate(items)]


def _chat_message(item: Any, where: str) -> Message:
    if type(item) is not dict:
        raise RequestError(f"{where} must be an object, got {_kind(item)}", param=where)
    role = item.get("role")
    name = item.get("name")
    if name is not None and type(name) is not str:
        raise RequestError(f"{where}.name must be a string", param=f"{where}.name")
    if role == "tool":
        call_id = item.get("tool_call_id")
        if type(call_id) is not str or not call_id:
            raise RequestError(
                f"{where} is a tool message: it needs a string 'tool_call_id'",
                param=f"{where}.tool_call_id",
            )
        text = "".join(
            c.text for c in _contents(item.get("content"), where) if type(c) is TextContent
        )
        return Message("tool", [FunctionResultContent(call_id, result=text)])
    if type(role) is not str or role not in _ROLES:
        raise RequestError(
            f"{where}.role must be one of system, developer, user, assistant, tool; got "
            f"{short_repr(role)}",
            param=f"{where}.role",
        )
    contents = _contents(item.get("content"), where, optional=role == "assistant")
    if role == "assistant":
        contents.extend(_tool_calls(item.get("tool_calls"), where))
    return Message(_ROLES[role], contents, author_name=name)  # type: ignore[arg-type]


def _contents(content: Any, where: str, *, optional: bool = False) -> list[Content]:
    if content is None and optional:
        return []
    if type(content) is str:
        return [TextContent(content)]
    if type(content) is not list:
        raise RequestError(
            f"{where}.content must be a string or a list of parts, got {_kind(content)}",
            param=f"{where}.content",
        )
    return [_part(part, f"{where}.content[{i}]") for i, part in enumerate(content)]


def _part(part: Any, where: str) -> Content:
    if type(part) is not dict:
        raise RequestError(f"{where} must be an object, got {_kind(part)}", param=where)
    kind = part.get("type")
    if kind in ("text", "input_text", "output_text"):
        text = part.get("text")
        if type(text) is not str:
            raise RequestError(f"{where}.text must be a string", param=f"{where}.text")
        return TextContent(text)
    if kind in ("image_url", "input_image"):
        image = part.get("image_url")
        url = image.get("url") if type(image) is dict else image
        if type(url) is not str or not url:
            raise RequestError(f"{where} needs an image URL string", param=f"{where}.image_url")
        media = url[5 : url.index(";")] if url.startswith("data:") and ";" in url else "image/*"
        return DataContent(media, uri=url)
    raise RequestError(
        f"{where}.type {short_repr(kind)} is not supported; use text or image_url parts",
        param=f"{where}.type",
    )


def _tool_calls(calls: Any, where: str) -> list[Content]:
    if calls is None:
        return []
    if type(calls) is not list:
        raise RequestError(f"{where}.tool_calls must be a list", param=f"{where}.tool_calls")
    out: list[Content] = []
    for i, call in enumerate(calls):
        at = f"{where}.tool_calls[{i}]"
        function = call.get("function") if type(call) is dict else None
        call_id = call.get("id") if type(call) is dict else None
        if type(function) is not dict or type(call_id) is not str:
            raise RequestError(f"{at} needs a string 'id' and a 'function' object", param=at)
        name, arguments = function.get("name"), function.get("arguments", "")
        if type(name) is not str or type(arguments) is not str:
            raise RequestError(f"{at}.function needs string 'name' and 'arguments'", param=at)
        out.append(FunctionCallContent(call_id, name, arguments))
    return out


def referenced_items(body: dict[str, Any]) -> list[str]:
    """The ids the ``input`` of a Responses request names in ``item_reference`` items (the
    route looks them up among the stored responses before `response_input` reads them)."""
    value = body.get("input")
    if type(value) is not list:
        return []
    ids: list[str] = []
    for i, item in enumerate(value[:_MAX_MESSAGES]):
        if type(item) is dict and item.get("type") == "item_reference":
            ref = item.get("id")
            if type(ref) is not str or not ref:
                raise RequestError(
                    f"input[{i}] is an item_reference: it needs a string 'id'",
                    param=f"input[{i}].id",
                )
            ids.append(ref)
    return ids


def response_input(
    body: dict[str, Any], referenced: Mapping[str, dict[str, Any]] | None = None
) -> list[Message]:
    """The ``input`` of a Responses request (text, or a list of items: messages, function
    calls and their outputs, reasoning, approval responses, references to stored items,
    whose items `referenced` holds by id) as cantata messages. A function call joins the
    assistant message before it; reasoning items are left out (their text is the model's
    own, and the model client has no way to send it back)."""
    value = body.get("input")
    if type(value) is str:
        return [Message("user", value)]
    if type(value) is not list or not value:
        raise RequestError(
            f"'input' must be a string or a non-empty list of items, got {_kind(value)}",
            param="input",
        )
    if len(value) > _MAX_MESSAGES:
        raise RequestError(f"at most {_MAX_MESSAGES} input items per request", param="input")
    out: list[Message] = []
    for i, item in enumerate(value):
        where = f"input[{i}]"
        if type(item) is dict and item.get("type") == "item_reference":
            ref = item.get("id")
            found = (referenced or {}).get(ref) if type(ref) is str else None
            if found is None:
                raise RequestError(
                    f"{where} refers to item {short_repr(ref, 60)}, which no response stored "
                    "here holds (it was not stored, was deleted, or is of another server); "
                    "send the item itself",
                    param=where,
                )
            item, where = found, f"{where} (item {ref})"
        message = _input_item(item, where)
        if message is None:
            continue
        previous = out[-1] if out else None
        calls_only = all(type(c) is FunctionCallContent for c in message.contents)
        if message.role == "assistant" and calls_only and previous and previous.role == "assistant":
            out[-1] = previous.copy(contents=[*previous.contents, *message.contents])
        else:
            out.append(message)
    return out


def _input_item(item: Any, where: str) -> Message | None:
    if type(item) is not dict:
        raise RequestError(f"{where} must be an object, got {_kind(item)}", param=where)
    kind = item.get("type", "message")
    if kind == "function_call_output":
        call_id, output = item.get("call_id"), item.get("output")
        if type(output) is list:  # parts: the text of its text parts
            output = "".join(c.text for c in _contents(output, where) if type(c) is TextContent)
        if type(call_id) is not str or type(output) is not str:
            raise RequestError(f"{where} needs string 'call_id' and 'output'", param=where)
        return Message("tool", [FunctionResultContent(call_id, result=output)])
    if kind == "function_call":
        call_id, name, arguments = item.get("call_id"), item.get("name"), item.get("arguments")
        if type(call_id) is not str or type(name) is not str or type(arguments) is not str:
            raise RequestError(
                f"{where} needs string 'call_id', 'name' and 'arguments'", param=where
            )
        return Message("assistant", [FunctionCallContent(call_id, name, arguments)])
    if kind == "reasoning":
        return None
    if kind == "mcp_approval_response":
        request_id, approve = item.get("approval_request_id"), item.get("approve")
        if type(request_id) is not str or type(approve) is not bool:
            raise RequestError(
                f"{where} needs a string 'approval_request_id' and a boolean 'approve'",
                param=where,
            )
        # the call is the one the server asked about: the route fills it in from the thread
        unknown_call = FunctionCallContent(request_id, "")
        return Message("user", [FunctionApprovalResponseContent(request_id, unknown_call, approve)])
    if kind != "message":
        raise RequestError(
            f"{where}.type {short_repr(kind)} is not supported; send message, function_call, "
            "function_call_output, reasoning, item_reference or mcp_approval_response items",
            param=f"{where}.type",
        )
    role = item.get("role")
    if type(role) is not str or role not in _ROLES:
        raise RequestError(
            f"{where}.role must be one of system, developer, user, assistant; got "
            f"{short_repr(role)}",
            param=f"{where}.role",
        )
    return Message(_ROLES[role], _contents(item.get("content"), where))  # type: ignore[arg-type]


def answer_text(response: AgentResponse) -> str:
    """What the client reads: the text of the run's assistant messages, a blank line
    between two messages (a team's speakers, a workflow's outputs)."""
    return "\n\n".join(m.text for m in _answers(response.messages) if m.text)


def _answers(messages: Sequence[Message]) -> list[Message]:
    return [m for m in messages if m.role == "assistant"]


def _names(served: ServedSet) -> str:
    names = list(served)
    shown = ", ".join(repr(n) for n in names[:20])
    return shown + (", ..." if len(names) > 20 else "")


def _kind(value: Any) -> str:
    if value is None:
        return "nothing"
    return f"{type(value).__name__} {short_repr(value, 40)}"
