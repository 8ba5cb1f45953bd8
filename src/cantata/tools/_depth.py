"""How deep the JSON of tool calls and results may nest, so what the loop keeps can be kept.

A model may send arguments nested hundreds of levels deep (by mistake or on purpose). The
call is part of the conversation, and the conversation is stored: a message, a thread and
a checkpoint each wrap it in more levels, and every store refuses data deeper than
`cantata.core.MAX_JSON_DEPTH`. So a call (or a tool's result) deeper than `TOOL_JSON_DEPTH`
is not kept as it came: its arguments are replaced by a short note, and the model gets an
error result saying why, so the run goes on and the thread stays storable.
"""

from __future__ import annotations

import json
from typing import Any

from ..core import (
    MAX_JSON_DEPTH,
    FunctionCallContent,
    Message,
    SerializationError,
    check_json_depth,
)
from ..models import ChatResponse
from ._approvals import holds

TOOL_JSON_DEPTH = MAX_JSON_DEPTH - 36
"""Deepest nesting of a tool call's arguments or a tool's result the loop keeps; the rest of
`MAX_JSON_DEPTH` is left for the message, thread and checkpoint around them."""

DROPPED_ARGUMENTS = (
    f"(arguments dropped: nested deeper than {TOOL_JSON_DEPTH} levels, more than any tool takes)"
)
TOO_DEEP_TEXT = (
    f"not run: the arguments are nested deeper than {TOOL_JSON_DEPTH} levels; call the tool "
    "again with flatter arguments"
)


def too_deep(value: Any) -> bool:
    """Whether `value` nests deeper than `TOOL_JSON_DEPTH` (without recursing)."""
    try:
        check_json_depth(value, max_depth=TOOL_JSON_DEPTH)
    except SerializationError:
        return True
    return False


def _unkeepable(content: object) -> bool:
    if type(content) is not FunctionCallContent:
        return False
    arguments = content.arguments
    return not isinstance(arguments, dict | str) or too_deep(arguments)


def _keepable(call: FunctionCallContent, dropped: set[str]) -> FunctionCallContent:
    arguments: Any = call.arguments
    if isinstance(arguments, dict | str):  # nested too deep
        dropped.add(call.call_id)
        return FunctionCallContent(call.call_id, call.name, DROPPED_ARGUMENTS)
    # null, a number, a list...: kept as their JSON text, which the loop then answers with
    # "must be a JSON object" (stored as they were, the thread could not be read back)
    try:
        text = json.dumps(arguments, allow_nan=False)
    except (TypeError, ValueError):
        text = f"(arguments of type {type(arguments).__name__}, not JSON)"
    return FunctionCallContent(call.call_id, call.name, text)


def bound_calls(response: ChatResponse, dropped: set[str]) -> ChatResponse:
    """The response with every call the conversation could not keep made keepable: its
    arguments nested too deep replaced by `DROPPED_ARGUMENTS` (its id added to `dropped`),
    or arguments that are no object nor text replaced by their JSON text; the same call id
    and name, so its error result still answers it. `response` itself when there is none."""
    if not holds(response.messages, (FunctionCallContent,)):
        return response  # the usual case: no call at all
    messages: list[Message] | None = None
    for index, message in enumerate(response.messages):
        contents = message.contents
        if not any(_unkeepable(c) for c in contents):
            if messages is not None:
                messages.append(message)
            continue
        if messages is None:
            messages = response.messages[:index]
        kept = [
            _keepable(c, dropped) if type(c) is FunctionCallContent and _unkeepable(c) else c
            for c in contents
        ]
        messages.append(message.copy(contents=kept))
    if messages is None:
        return response
    return ChatResponse(
        messages,
        usage=response.usage,
        finish_reason=response.finish_reason,
        model=response.model,
        response_id=response.response_id,
        value=response.value,
    )
