"""Translate between cantata messages and options and Anthropic's Messages wire format.

Two things differ from Chat Completions and are kept here: the thread must alternate user
and assistant turns (tool results are user content, system text is a request field), and
an assistant's extended-thinking blocks, which cantata keeps in the message's metadata
(`THINKING_KEY`), must go back on that message, signature and all, where they stood.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any, Literal

from ..core import (
    Content,
    DataContent,
    FunctionCallContent,
    FunctionResultContent,
    InvalidMessageError,
    Message,
    TextContent,
    Usage,
)
from ._openai_mapping import result_text
from .types import ChatOptions, ResponseFormat, ToolSpec, response_format_schema

THINKING_KEY = "cantata.models.anthropic.thinking"
"""Metadata key of an assistant message's thinking blocks: a list of the blocks as the API
sent them (``thinking`` with its ``signature``, or ``redacted_thinking`` with its ``data``),
each with ``at``, the number of the message's other contents before it."""

ANSWER_TOOL = "final_answer"
"""The tool a structured answer is given through in the ``tool`` structured-output mode."""

StructuredMode = Literal["tool", "native"]
_EPHEMERAL = {"type": "ephemeral"}
_DOCUMENT_TYPES = frozenset({"application/pdf", "text/plain"})
_STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
    "pause_turn": "stop",
}


def finish_reason(stop_reason: str | None) -> str | None:
    """cantata's finish reason for Anthropic's ``stop_reason`` (unknown ones as they are)."""
    if stop_reason is None:
        return None
    return _STOP_REASONS.get(stop_reason, stop_reason)


def usage_from(usage: Any) -> Usage | None:
    """A cantata `Usage`: `input_tokens` counts cached prompt tokens too (Anthropic's own
    ``input_tokens`` counts only those after the last cache breakpoint)."""
    if usage is None:
        return None
    read = int(getattr(usage, "cache_read_input_tokens", 0) or 0)
    wrote = int(getattr(usage, "cache_creation_input_tokens", 0) or 0)
    fresh = int(getattr(usage, "input_tokens", 0) or 0)
    return Usage(fresh + read + wrote, int(getattr(usage, "output_tokens", 0) or 0), read, wrote)


def request_params(
    messages: Sequence[Message],
    options: ChatOptions,
    *,
    model: str,
    max_tokens: int,
    prompt_caching: bool,
    structured: StructuredMode,
    parallel_tool_calls: bool,
    thinking_budget: int | None,
) -> dict[str, Any]:
    """Keyword arguments for ``messages.create`` (without ``stream``)."""
    system, wire = to_anthropic_messages(messages)
    params: dict[str, Any] = {
        "model": options.model or model,
        "max_tokens": options.max_tokens or max_tokens,
        "messages": wire,
    }
    extra = dict(options.extra)
    thinking = extra.pop("thinking", None)
    if thinking is None and thinking_budget is not None:
        thinking = {"type": "enabled", "budget_tokens": thinking_budget}
    if thinking is not None:
        params["thinking"] = thinking
    thinks = isinstance(thinking, dict) and thinking.get("type") == "enabled"
    tools = list(options.tools or ())
    fmt = options.response_format
    if fmt is not None and structured == "tool":
        tools.append(_answer_tool(fmt))
    elif fmt is not None:
        schema = response_format_schema(fmt)[1]
        config = dict(extra.pop("output_config", None) or {})
        params["output_config"] = {**config, "format": {"type": "json_schema", "schema": schema}}
    if system:
        params["system"] = system
    for key in ("temperature", "top_p"):
        value = getattr(options, key)
        if value is not None:  # not parameters of the SDK's create() any more: sent as given
            extra.setdefault(key, value)
    if options.stop:
        params["stop_sequences"] = list(options.stop)
    if tools:
        params["tools"] = [_tool(t) for t in tools]
        choice = _tool_choice(options, fmt is not None and structured == "tool", thinks)
        if choice is not None:
            if not parallel_tool_calls and choice["type"] != "none":
                choice["disable_parallel_tool_use"] = True
            params["tool_choice"] = choice
    if prompt_caching:
        _cache_prefix(params)
    if extra:
        params["extra_body"] = extra
    return params


def _tool(spec: ToolSpec) -> dict[str, Any]:
    return {"name": spec.name, "description": spec.description, "input_schema": spec.parameters}


def _answer_tool(fmt: ResponseFormat) -> ToolSpec:
    name, schema = response_format_schema(fmt)
    if schema.get("type") != "object":  # a tool's input is an object: wrap anything else
        schema = {"type": "object", "properties": {"value": schema}, "required": ["value"]}
    return ToolSpec(ANSWER_TOOL, f"Give the final answer ({name}) through this tool.", schema)


def _tool_choice(options: ChatOptions, answer_tool: bool, thinks: bool) -> dict[str, Any] | None:
    choice = options.tool_choice
    if thinks:  # with extended thinking the API takes only auto and none
        return {"type": "none"} if choice == "none" else {"type": "auto"}
    if answer_tool and choice in (None, "auto", "none"):
        # the answer comes through its tool: the only one, or one of those that may be called
        if not options.tools or choice == "none":
            return {"type": "tool", "name": ANSWER_TOOL}
        return {"type": "any"}
    if choice is None:
        return None
    if choice == "auto":
        return {"type": "auto"}
    if choice == "none":
        return {"type": "none"}
    if choice == "required":
        return {"type": "any"}
    return {"type": "tool", "name": choice}


def _cache_prefix(params: dict[str, Any]) -> None:
    """Cache breakpoints at the end of the stable prefix: the tools, then the instructions
    (the API caches tools, system and messages in that order, each up to its breakpoint)."""
    tools = params.get("tools")
    if tools:
        tools[-1] = {**tools[-1], "cache_control": _EPHEMERAL}
    system = params.get("system")
    if system:
        system[-1] = {**system[-1], "cache_control": _EPHEMERAL}


def to_anthropic_messages(
    messages: Sequence[Message],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(system blocks, alternating user/assistant messages) for a request."""
    system: list[dict[str, Any]] = []
    wire: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            system.extend({"type": "text", "text": c.text} for c in _texts(message))
            continue
        role = "assistant" if message.role == "assistant" else "user"
        blocks = _assistant_blocks(message) if role == "assistant" else _user_blocks(message)
        if not blocks:
            continue
        if wire and wire[-1]["role"] == role:  # tool results then user text: one user turn
            wire[-1]["content"].extend(blocks)
        else:
            wire.append({"role": role, "content": blocks})
    return system, wire


def _texts(message: Message) -> list[TextContent]:
    return [c for c in message.contents if type(c) is TextContent and c.text]


def _user_blocks(message: Message) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    for content in message.contents:
        if type(content) is FunctionResultContent:
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": content.call_id,
                "content": result_text(content) or "(no output)",
            }
            if content.is_error:
                block["is_error"] = True
            results.append(block)
        elif type(content) is DataContent and results and message.role == "tool":
            # data a tool returned beside its result goes inside that result
            last = results[-1]
            if isinstance(last["content"], str):
                last["content"] = [{"type": "text", "text": last["content"]}]
            last["content"].append(_data_block(content, message))
        elif type(content) is DataContent:
            blocks.append(_data_block(content, message))
        elif type(content) is TextContent and content.text:
            blocks.append({"type": "text", "text": content.text})
    return results + blocks  # tool results must open the user turn that answers the calls


def _data_block(content: DataContent, message: Message) -> dict[str, Any]:
    kind = "image" if content.is_image else "document"
    if kind == "document" and content.media_type not in _DOCUMENT_TYPES:
        raise InvalidMessageError(
            f"message {message.message_id!r} has data of type {content.media_type!r}, which "
            "the Messages API cannot take; send images, PDF or plain text"
        )
    if content.data is not None:
        if content.media_type == "text/plain":
            text = content.data.decode("utf-8", errors="replace")
            source = {"type": "text", "media_type": "text/plain", "data": text}
        else:
            data = base64.b64encode(content.data).decode("ascii")
            source = {"type": "base64", "media_type": content.media_type, "data": data}
    elif content.uri is not None and content.uri.startswith("data:"):
        data = content.uri.partition(",")[2]
        source = {"type": "base64", "media_type": content.media_type, "data": data}
    else:
        source = {"type": "url", "url": str(content.uri)}
    return {"type": kind, "source": source}


def _assistant_blocks(message: Message) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for content in message.contents:
        if type(content) is TextContent and content.text:
            blocks.append({"type": "text", "text": content.text})
        elif type(content) is FunctionCallContent:
            arguments = content.arguments
            if isinstance(arguments, str):  # malformed JSON the model wrote: the loop said so
                try:
                    arguments = content.parse_arguments()
                except InvalidMessageError:
                    arguments = {}
            blocks.append(
                {
                    "type": "tool_use",
                    "id": content.call_id,
                    "name": content.name,
                    "input": arguments,
                }
            )
    thinking = message.metadata.get(THINKING_KEY)
    if isinstance(thinking, list) and thinking:
        return _with_thinking(blocks, message, thinking)
    return blocks


def _with_thinking(
    blocks: list[dict[str, Any]], message: Message, thinking: list[Any]
) -> list[dict[str, Any]]:
    """Put the thinking blocks back where they stood among the message's other contents."""
    kept = [c for c in message.contents if _is_block(c)]
    if len(kept) != len(blocks):  # an empty text was dropped: positions count blocks sent
        kept = kept[: len(blocks)]
    out: list[dict[str, Any]] = []
    pending = sorted(
        (b for b in thinking if isinstance(b, dict) and b.get("type") in _THINKING_TYPES),
        key=lambda b: int(b.get("at", 0)),
    )
    for position in range(len(blocks) + 1):
        while pending and int(pending[0].get("at", 0)) <= position:
            out.append({k: v for k, v in pending.pop(0).items() if k != "at"})
        if position < len(blocks):
            out.append(blocks[position])
    return out


_THINKING_TYPES = frozenset({"thinking", "redacted_thinking"})


def _is_block(content: Content) -> bool:
    return (type(content) is TextContent and bool(content.text)) or type(
        content
    ) is FunctionCallContent


def answer_text(call_input: Any, fmt: ResponseFormat | None) -> str:
    """The JSON text of a structured answer given through `ANSWER_TOOL`."""
    if fmt is not None:
        schema = response_format_schema(fmt)[1]
        if schema.get("type") != "object" and isinstance(call_input, dict):
            call_input = call_input.get("value")
    return json.dumps(call_input, ensure_ascii=False)
