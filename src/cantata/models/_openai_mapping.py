"""Translate between cantata messages and options and the Chat Completions wire format."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Sequence
from typing import Any

from ..core import (
    Content,
    DataContent,
    FunctionCallContent,
    FunctionResultContent,
    InvalidMessageError,
    Message,
    TextContent,
    UnknownTypeError,
    Usage,
    to_json,
)
from .types import ChatOptions, ResponseFormat, ToolChoice, ToolSpec, response_format_schema

_AUDIO_FORMATS = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/mpeg": "mp3", "audio/mp3": "mp3"}
_NAME_PATTERN = re.compile(r"[^a-zA-Z0-9_-]")


def to_openai_messages(
    messages: Sequence[Message], *, author_names: bool = True
) -> list[dict[str, Any]]:
    """Wire messages for a request: tool results become one ``role: tool`` message each, and
    author names go in ``name`` (so a model in a group chat can tell the speakers apart)."""
    out: list[dict[str, Any]] = []
    for message in messages:
        start = len(out)
        _append_message(out, message)
        if author_names and message.author_name:
            name = _NAME_PATTERN.sub("_", message.author_name)[:64]
            for wire in out[start:]:
                if wire["role"] != "tool":
                    wire["name"] = name
    return out


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
    text = message.text
    out: dict[str, Any] = {"role": "assistant", "content": text or None}
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
    elif not text:
        out["content"] = ""
    return out


def _arguments_text(arguments: dict[str, Any] | str) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


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


def request_params(
    messages: Sequence[Message],
    options: ChatOptions,
    *,
    model: str,
    structured_mode: str,
    author_names: bool = True,
    max_tokens_field: str = "max_tokens",
) -> dict[str, Any]:
    """Keyword arguments for ``chat.completions.create`` (without ``stream``)."""
    params: dict[str, Any] = {"model": options.model or model}
    params["messages"] = to_openai_messages(messages, author_names=author_names)
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
        if options.tool_choice is not None:
            params["tool_choice"] = tool_choice_param(options.tool_choice)
    if options.response_format is not None:
        params["response_format"] = response_format_param(
            options.response_format, mode=structured_mode
        )
    if options.extra:
        params["extra_body"] = dict(options.extra)
    return params


def parse_arguments(raw: str | None) -> dict[str, Any] | str:
    """Tool-call arguments as a dict, or the raw text when it is not a JSON object."""
    if not raw or not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return raw
    return value if isinstance(value, dict) else raw


def usage_from(usage: Any) -> Usage | None:
    """A cantata `Usage` from an SDK usage object (or None)."""
    if usage is None:
        return None
    return Usage(int(usage.prompt_tokens or 0), int(usage.completion_tokens or 0))
