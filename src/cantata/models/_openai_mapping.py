"""Translate between cantata messages and options and the Chat Completions wire format."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from typing import Any, Literal

from ..core import (
    Content,
    DataContent,
    FunctionCallContent,
    FunctionResultContent,
    InvalidMessageError,
    Message,
    SerializationError,
    TextContent,
    UnknownTypeError,
    Usage,
    check_json_depth,
    loads_json,
    to_json,
)
from .types import ChatOptions, ResponseFormat, ToolChoice, ToolSpec, response_format_schema

_AUDIO_FORMATS = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/mpeg": "mp3", "audio/mp3": "mp3"}
_NAME_PATTERN = re.compile(r"[^a-zA-Z0-9_-]")


def to_openai_messages(
    messages: Sequence[Message], *, author_names: bool = True
) -> list[dict[str, Any]]:
    """Wire messages for a request: tool results become one ``role: tool`` message each, and
    author names go in ``name`` (so a model in a group chat can tell the speakers apart).
    Data a tool returned beside its result (an image) follows the tool messages as a user
    message, since a ``role: tool`` message carries text only."""
    out: list[dict[str, Any]] = []
    attached: list[dict[str, Any]] = []
    for message in messages:
        if attached and message.role != "tool":
            out.append(_attachments_message(attached))
            attached = []
        start = len(out)
        _append_message(out, message)
        if message.role == "tool":
            attached.extend(_part(c, message) for c in message.contents if type(c) is DataContent)
        if author_names and message.author_name:
            name = _NAME_PATTERN.sub("_", message.author_name)[:64]
            for wire in out[start:]:
                if wire["role"] != "tool":
                    wire["name"] = name
    if attached:
        out.append(_attachments_message(attached))
    return out


def _attachments_message(parts: list[dict[str, Any]]) -> dict[str, Any]:
    said = {"type": "text", "text": "What the tool calls above returned besides their results:"}
    return {"role": "user", "content": [said, *parts]}


def _append_message(out: list[dict[str, Any]], message: Message) -> None:
    results = message.function_results
    if message.role != "tool" and not results:
        out.append(_plain_message(message))
        return
    out.extend(_tool_message(r) for r in results)
    rest = [c for c in message.contents if type(c) is not FunctionResultContent]
    if message.role != "tool" and any(_is_sent(c) for c in rest):
        out.append(_plain_message(message.copy(contents=rest)))


def _is_sent(content: Content) -> bool:
    return type(content) in (TextContent, DataContent, FunctionCallContent)


def _plain_message(message: Message) -> dict[str, Any]:
    if message.role == "assistant":
        return _assistant_message(message)
    parts = [_part(c, message) for c in message.contents if type(c) in (TextContent, DataContent)]
    if message.role == "system" or all(p["type"] == "text" for p in parts):
        return {"role": message.role, "content": "".join(p["text"] for p in parts)}
    return {"role": message.role, "content": parts}


def _part(content: Content, message: Message) -> dict[str, Any]:
    if type(content) is TextContent:
        return {"type": "text", "text": content.text}
    if type(content) is not DataContent:
        raise InvalidMessageError(f"cannot send {type(content).__name__} as a message part")
    if content.is_image:
        return {"type": "image_url", "image_url": {"url": content.to_data_uri()}}
    audio = _AUDIO_FORMATS.get(content.media_type)
    if audio is not None and content.data is not None:
        data = base64.b64encode(content.data).decode("ascii")
        return {"type": "input_audio", "input_audio": {"data": data, "format": audio}}
    raise InvalidMessageError(
        f"message {message.message_id!r} has data of type {content.media_type!r}, which the "
        "Chat Completions API cannot take; send images, or wav/mp3 audio as inline bytes"
    )


def _assistant_message(message: Message) -> dict[str, Any]:
    # Content is a string even beside tool calls: strict servers (llama.cpp's) refuse null.
    out: dict[str, Any] = {"role": "assistant", "content": message.text}
    calls = message.function_calls
    if calls:
        out["tool_calls"] = [
            {
                "id": c.call_id,
                "type": "function",
                "function": {"name": c.name, "arguments": _arguments_text(c.arguments)},
            }
            for c in calls
        ]
    return out


def _arguments_text(arguments: dict[str, Any] | str) -> str:
    if isinstance(arguments, str):
        return arguments
    check_json_depth(arguments)  # a SerializationError, not a RecursionError from json.dumps
    return json.dumps(arguments)


def _tool_message(result: FunctionResultContent) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": result.call_id, "content": result_text(result)}


def result_text(result: FunctionResultContent) -> str:
    """A tool result as the text a model reads: the value (JSON when not a string) or the error."""
    if result.error is not None:
        return f"Error: {result.error}"
    value = result.result
    if isinstance(value, str):
        return value
    try:
        return json.dumps(to_json(value), ensure_ascii=False)
    except (UnknownTypeError, TypeError, ValueError):
        return str(value)


def tool_params(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """Tool specs as Chat Completions ``tools``."""
    return [
        {
            "type": "function",
            "function": {
                "name": t.name,
                "description": t.description,
                "parameters": t.parameters,
            },
        }
        for t in tools
    ]


Feature = Literal["tool_choice", "tool_stream", "json_schema", "json_object"]
"""A request feature some servers lack: a forced tool choice (``required`` or a named tool),
a streamed answer that may call tools, ``response_format`` of type ``json_schema``,
``response_format`` of type ``json_object``."""

FEATURE_FALLBACKS: dict[Feature, str] = {
    "tool_choice": "tool_choice 'auto' and an instruction to call a tool",
    "tool_stream": "a request that is not streamed, its answer then streamed whole",
    "json_schema": "response_format json_object and the schema in the prompt",
    "json_object": "the schema in the prompt only",
}
"""What a request uses instead of a feature the server refused."""

_STRUCTURED_MODES = ("json_schema", "json_object", "prompt")


def tool_choice_param(choice: ToolChoice) -> Any:
    """``auto``/``none``/``required`` as they are; a tool name as a named function choice."""
    if choice in ("auto", "none", "required"):
        return choice
    return {"type": "function", "function": {"name": choice}}


def response_format_param(fmt: ResponseFormat, *, mode: str) -> dict[str, Any]:
    """``json_schema`` (OpenAI, vLLM, Ollama) or ``json_object`` with a schema (llama.cpp)."""
    name, schema = response_format_schema(fmt)
    if mode == "json_object":
        return {"type": "json_object", "schema": schema}
    safe = _NAME_PATTERN.sub("_", name)[:64] or "response"
    return {"type": "json_schema", "json_schema": {"name": safe, "schema": schema}}


def effective_structured_mode(configured: str, refused: AbstractSet[str]) -> str:
    """The first of json_schema, json_object, prompt, from `configured` on, not refused."""
    modes = _STRUCTURED_MODES[_STRUCTURED_MODES.index(configured) :]
    return next((m for m in modes if m not in refused), "prompt")


def request_params(
    messages: Sequence[Message],
    options: ChatOptions,
    *,
    model: str,
    structured_mode: str,
    author_names: bool = True,
    max_tokens_field: str = "max_tokens",
    refused: AbstractSet[str] = frozenset(),
) -> dict[str, Any]:
    """Keyword arguments for ``chat.completions.create`` (without ``stream``); a feature in
    `refused` is replaced by its fallback (see `FEATURE_FALLBACKS`)."""
    params: dict[str, Any] = {"model": options.model or model}
    wire = to_openai_messages(messages, author_names=author_names)
    params["messages"] = wire
    for key in ("temperature", "top_p", "seed"):
        value = getattr(options, key)
        if value is not None:
            params[key] = value
    if options.max_tokens is not None:
        params[max_tokens_field] = options.max_tokens
    if options.stop:
        params["stop"] = list(options.stop)
    if options.tools:
        params["tools"] = tool_params(options.tools)
        _set_tool_choice(params, options, refused)
    if options.response_format is not None:
        _set_response_format(params, options.response_format, structured_mode, refused)
    if options.extra:
        params["extra_body"] = dict(options.extra)
    return params


def _set_tool_choice(
    params: dict[str, Any], options: ChatOptions, refused: AbstractSet[str]
) -> None:
    # "auto" is sent even when not asked for: it is OpenAI's default with tools, and
    # llama.cpp's server ignores the tools without it.
    choice = options.tool_choice or "auto"
    if choice in ("auto", "none") or "tool_choice" not in refused:
        params["tool_choice"] = tool_choice_param(choice)
        return
    params["tool_choice"] = "auto"
    names = [t.name for t in options.tools or ()]
    target = (
        f"the tool `{choice}`"
        if choice != "required"
        else "one of the tools " + ", ".join(f"`{n}`" for n in names)
    )
    add_instruction(params["messages"], f"Answer only by calling {target}, not with text.")


def _set_response_format(
    params: dict[str, Any], fmt: ResponseFormat, configured: str, refused: AbstractSet[str]
) -> None:
    mode = effective_structured_mode(configured, refused)
    if mode != "prompt":
        params["response_format"] = response_format_param(fmt, mode=mode)
    if mode != "json_schema":
        # json_object alone does not say which object (and OpenAI's needs "JSON" in a message)
        schema = json.dumps(response_format_schema(fmt)[1], ensure_ascii=False)
        add_instruction(
            params["messages"],
            "Answer with one JSON object, and nothing else, that fits this JSON schema: " + schema,
        )


def add_instruction(wire: list[dict[str, Any]], text: str) -> None:
    """Add `text` to the first system message of a request (or a new one at the start)."""
    first = wire[0] if wire else None
    if first is not None and first["role"] == "system" and isinstance(first["content"], str):
        first["content"] = f"{first['content']}\n\n{text}" if first["content"] else text
    else:
        wire.insert(0, {"role": "system", "content": text})


def features_used(params: dict[str, Any]) -> list[Feature]:
    """The features of a request a server may refuse, in the order they are given up when
    its error names none."""
    # A forced tool choice first: servers refuse it with the barest errors (llama.cpp's is
    # an empty 500), while a refused response format is usually named in the error.
    used: list[Feature] = []
    if params.get("tool_choice") not in (None, "auto", "none"):
        used.append("tool_choice")
    if params.get("stream") and params.get("tools") and params.get("tool_choice") != "none":
        used.append("tool_stream")
    response_format = params.get("response_format")
    if response_format is not None and response_format["type"] in ("json_schema", "json_object"):
        used.append(response_format["type"])
    return used


def parse_arguments(raw: str | None) -> dict[str, Any] | str:
    """Tool-call arguments as a dict, or the raw text when it is not a JSON object (malformed,
    or nested deeper than `MAX_JSON_DEPTH`): the tool loop answers that call with an error."""
    if not raw or not raw.strip():
        return {}
    try:
        value = loads_json(raw)
    except SerializationError:
        return raw
    return value if isinstance(value, dict) else raw


def usage_from(usage: Any) -> Usage | None:
    """A cantata `Usage` from an SDK usage object (or None)."""
    if usage is None:
        return None
    details = getattr(usage, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) if details is not None else None
    return Usage(int(usage.prompt_tokens or 0), int(usage.completion_tokens or 0), int(cached or 0))
