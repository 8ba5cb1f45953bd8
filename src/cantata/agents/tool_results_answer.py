"""Ending a turn with the tool results instead of asking the model again.

``ChatAgent(..., answer_with_tool_results=True)``: after a model answer that called tools
and the tools ran, the turn ends with one assistant message that sums up their results
(one line per call, written by `tool_results_format`), where the agent would otherwise ask
the model again to reflect on them. AutoGen's assistant does this unless asked to reflect
on tool use; in a team it saves a model call per tool turn.

It is a chat middleware, outermost in the agent's function loop: a model call whose request
ends with tool results is answered by the summary, without the model (so no other chat
middleware sees it, as no model call happens). The loop then records and streams the
summary as it would the model's answer, and the run finishes with ``"stop"``.
"""

from __future__ import annotations

import json
from typing import Any

from ..core import ConfigurationError, FunctionCallContent, FunctionResultContent, Message
from ..core.serialization import to_json
from ..models import ChatResponse
from ..tools import ChatContext, ChatMiddleware, ChatNext

__all__ = ["DEFAULT_TOOL_RESULTS_FORMAT", "TOOL_RESULTS_KEY", "format_tool_results"]

DEFAULT_TOOL_RESULTS_FORMAT = "{result}"
"""One line per call; the placeholders are ``{tool_name}``, ``{arguments}`` (JSON),
``{result}`` (the value as text, JSON when not a string, or the error) and ``{is_error}``."""

TOOL_RESULTS_KEY = "cantata.tool_results"
"""Metadata key set to True on a summary message (it holds no model's words)."""

_SAMPLE = {"tool_name": "t", "arguments": "{}", "result": "r", "is_error": False}


def check_format(template: Any, *, owner: str) -> str:
    """`template` when it is a format string the summary can fill; a clear error otherwise."""
    if not isinstance(template, str):
        raise ConfigurationError(
            f"agent `{owner}`: tool_results_format must be a str, got {type(template).__name__}"
        )
    try:
        template.format(**_SAMPLE)
    except (KeyError, IndexError, ValueError) as exc:
        raise ConfigurationError(
            f"agent `{owner}`: tool_results_format {template!r} cannot be filled ({exc!r}); "
            "use the placeholders {tool_name}, {arguments}, {result} and {is_error}"
        ) from exc
    return template


def format_tool_results(
    messages: list[Message], template: str = DEFAULT_TOOL_RESULTS_FORMAT
) -> str:
    """The trailing tool results of `messages` (the last tool messages, with the calls they
    answer found in the assistant messages before them), one `template` line per result."""
    end = len(messages)
    start = end
    while start > 0 and messages[start - 1].role == "tool":
        start -= 1
    calls: dict[str, FunctionCallContent] = {}
    for message in messages[:start]:
        if message.role == "assistant":
            for call in message.function_calls:
                calls[call.call_id] = call
    lines = []
    for message in messages[start:end]:
        for result in message.contents:
            if isinstance(result, FunctionResultContent):
                made = calls.get(result.call_id)
                lines.append(
                    template.format(
                        tool_name=made.name if made is not None else "",
                        arguments=_arguments(made),
                        result=_result_text(result),
                        is_error=result.is_error,
                    )
                )
    return "\n".join(lines)


class AnswerWithToolResults(ChatMiddleware):
    """Answers a model call that follows tool results with their summary (see the module)."""

    def __init__(self, template: str, *, author_name: str) -> None:
        self._template = template
        self._author = author_name

    async def process(self, context: ChatContext, call_next: ChatNext) -> None:
        messages = context.messages
        if not messages or messages[-1].role != "tool":
            await call_next()
            return
        summary = Message(
            "assistant",
            format_tool_results(list(messages), self._template),
            author_name=self._author,
            metadata={TOOL_RESULTS_KEY: True},
        )
        context.response = ChatResponse([summary], finish_reason="stop")


def _arguments(call: FunctionCallContent | None) -> str:
    if call is None:
        return "{}"
    if isinstance(call.arguments, str):
        return call.arguments
    return json.dumps(call.arguments, ensure_ascii=False, default=str)


def _result_text(result: FunctionResultContent) -> str:
    if result.error is not None:
        return result.error
    if isinstance(result.result, str):
        return result.result
    try:
        return json.dumps(to_json(result.result), ensure_ascii=False)
    except Exception:  # an odd value still reads as text
        return str(result.result)
