"""Prompts and output schemas that make a small local model call tools reliably.

The model is told about the tools in the system message, and its output is constrained
by a JSON-schema grammar to either ``{"tool": <name>, "arguments": {...}}`` for one of the
tools (with that tool's own argument schema) or ``{"answer": ...}``. The grammar makes a
malformed call impossible, whatever the size of the model.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..core import (
    ConfigurationError,
    DataContent,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    ModelOutputError,
    TextContent,
    new_id,
)
from ._openai_mapping import result_text
from .types import ChatOptions, ResponseFormat, ToolSpec, response_format_schema

TOOL_KEY = "tool"
ARGUMENTS_KEY = "arguments"
ANSWER_KEY = "answer"


@dataclass(slots=True)
class LocalPlan:
    """What one request asks of the local model: its messages and, if any, an output schema."""

    messages: list[dict[str, Any]]
    schema: dict[str, Any] | None
    tools_mode: bool
    """True when the output is the tool-or-answer envelope, False for plain or structured text."""


def plan_request(messages: Sequence[Message], options: ChatOptions) -> LocalPlan:
    """Render messages for llama.cpp and choose the grammar for tools and structured output."""
    rendered = render_messages(messages)
    tools = _active_tools(options)
    fmt = options.response_format
    if tools:
        must_call = options.tool_choice not in (None, "auto")
        _add_system(rendered, _tools_prompt(tools, answer=not must_call, fmt=fmt))
        return LocalPlan(rendered, tool_envelope_schema(tools, must_call=must_call, fmt=fmt), True)
    if fmt is not None:
        name, schema = response_format_schema(fmt)
        _add_system(
            rendered,
            f"Answer with one JSON value of the schema {name!r}: {json.dumps(schema)}",
        )
        return LocalPlan(rendered, schema, False)
    return LocalPlan(rendered, None, False)


def _active_tools(options: ChatOptions) -> list[ToolSpec]:
    tools = list(options.tools or [])
    choice = options.tool_choice
    if not tools or choice == "none":
        return []
    if choice in (None, "auto", "required"):
        return tools
    chosen = [t for t in tools if t.name == choice]
    if not chosen:
        names = ", ".join(repr(t.name) for t in tools)
        raise ConfigurationError(
            f"tool_choice names the tool {choice!r}, which is not among the tools "
            f"offered ({names}); pass one of them, or 'auto', 'none' or 'required'"
        )
    return chosen


def _tools_prompt(tools: Sequence[ToolSpec], *, answer: bool, fmt: ResponseFormat | None) -> str:
    lines = ["You can call these tools:"]
    for t in tools:
        lines.append(f"- {t.name}: {t.description} Arguments: {json.dumps(t.parameters)}")
    lines.append(
        f'To call a tool, reply with {{"{TOOL_KEY}": "<tool name>", '
        f'"{ARGUMENTS_KEY}": {{<arguments>}}}}.'
    )
    if answer:
        what = "<your answer>" if fmt is None else "<a JSON value of the answer schema>"
        lines.append(
            "If no tool is needed, or a tool already gave the result, reply with "
            f'{{"{ANSWER_KEY}": "{what}"}}.'
        )
    return "\n".join(lines)


def tool_envelope_schema(
    tools: Sequence[ToolSpec], *, must_call: bool, fmt: ResponseFormat | None
) -> dict[str, Any]:
    """The JSON schema of one reply: a call of one of `tools`, or (unless `must_call`) an answer."""
    defs: dict[str, Any] = {}
    alternatives: list[dict[str, Any]] = []
    for i, t in enumerate(tools):
        params = _hoist_defs(t.parameters or {"type": "object"}, f"t{i}_", defs)
        alternatives.append(
            {
                "type": "object",
                "properties": {TOOL_KEY: {"const": t.name}, ARGUMENTS_KEY: params},
                "required": [TOOL_KEY, ARGUMENTS_KEY],
            }
        )
    if not must_call:
        answer: dict[str, Any] = {"type": "string"}
        if fmt is not None:
            answer = _hoist_defs(response_format_schema(fmt)[1], "answer_", defs)
        alternatives.append(
            {"type": "object", "properties": {ANSWER_KEY: answer}, "required": [ANSWER_KEY]}
        )
    schema: dict[str, Any] = alternatives[0] if len(alternatives) == 1 else {"anyOf": alternatives}
    if defs:
        schema = {**schema, "$defs": defs}
    return schema


def _hoist_defs(schema: dict[str, Any], prefix: str, defs: dict[str, Any]) -> dict[str, Any]:
    """Move ``$defs`` to the root under prefixed names, rewriting the ``$ref``s that use them."""
    local = {**schema.get("$defs", {}), **schema.get("definitions", {})}

    def rewrite(node: Any) -> Any:
        if isinstance(node, dict):
            out = {k: rewrite(v) for k, v in node.items() if k not in ("$defs", "definitions")}
            ref = out.get("$ref")
            if isinstance(ref, str):
                for root in ("#/$defs/", "#/definitions/"):
                    if ref.startswith(root):
                        out["$ref"] = "#/$defs/" + prefix + ref[len(root) :]
            return out
        if isinstance(node, list):
            return [rewrite(v) for v in node]
        return node

    for name, sub in local.items():
        defs[prefix + name] = rewrite(sub)
    result: dict[str, Any] = rewrite(schema)
    return result


def render_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Messages as llama.cpp chat dicts; tool calls and results are written as the model reads
    them (the JSON envelope, and a user turn with the result), since small chat templates know
    only system, user and assistant."""
    names = {c.call_id: c.name for m in messages for c in m.function_calls}
    out: list[dict[str, Any]] = []
    for m in messages:
        parts: list[str] = []
        for c in m.contents:
            if type(c) is TextContent:
                parts.append(c.text)
            elif type(c) is FunctionCallContent:
                parts.append(json.dumps({TOOL_KEY: c.name, ARGUMENTS_KEY: c.arguments}))
            elif type(c) is FunctionResultContent:
                name = names.get(c.call_id, "the tool")
                parts.append(f"Result of {name} (call {c.call_id}): {result_text(c)}")
            elif type(c) is DataContent and m.role == "tool":  # its result names it
                continue
            elif type(c) is DataContent:
                raise ConfigurationError(
                    f"message {m.message_id!r} holds {c.media_type!r} data, but LocalChatClient "
                    "reads text only; use a multimodal model through OpenAIChatClient"
                )
        if not parts:
            continue
        role = "user" if m.role == "tool" or m.function_results else m.role
        out.append({"role": role, "content": "\n".join(parts)})
    return out


def _add_system(rendered: list[dict[str, Any]], text: str) -> None:
    if rendered and rendered[0]["role"] == "system":
        rendered[0] = {"role": "system", "content": rendered[0]["content"] + "\n\n" + text}
    else:
        rendered.insert(0, {"role": "system", "content": text})


def parse_envelope(text: str, *, finish_reason: str | None) -> tuple[str | None, Any]:
    """Read a tool-mode reply: ``(tool name, arguments)`` for a call, ``(None, answer)`` else."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        hint = " (the answer was cut at max_tokens; raise it)" if finish_reason == "length" else ""
        raise ModelOutputError(
            f"the local model's tool-mode reply is not complete JSON{hint}: {text[:200]!r}"
        ) from exc
    if isinstance(data, dict) and isinstance(data.get(TOOL_KEY), str):
        return data[TOOL_KEY], data.get(ARGUMENTS_KEY, {})
    if isinstance(data, dict) and ANSWER_KEY in data:
        return None, data[ANSWER_KEY]
    raise ModelOutputError(
        f"the local model's reply is neither a tool call nor an answer: {text[:200]!r}"
    )


def new_call_id() -> str:
    """A fresh tool-call id in the shape OpenAI uses."""
    return f"call_{new_id()[:24]}"
