"""Approval bookkeeping: what the model may see, and which answered requests to run.

Models know nothing of approval requests and responses, so they are removed from the
messages a model is sent; the results of approved calls are placed right after the
assistant message that asked for those calls, where every chat API expects them.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..core import (
    FunctionApprovalRequestContent,
    FunctionApprovalResponseContent,
    FunctionCallContent,
    FunctionResultContent,
    Message,
)

_APPROVAL_TYPES = (FunctionApprovalRequestContent, FunctionApprovalResponseContent)


def model_view(messages: Sequence[Message]) -> list[Message]:
    """The messages without approval contents; messages left empty are dropped."""
    out: list[Message] = []
    for message in messages:
        if not any(type(c) in _APPROVAL_TYPES for c in message.contents):
            out.append(message)
            continue
        kept = [c for c in message.contents if type(c) not in _APPROVAL_TYPES]
        if kept:
            out.append(message.copy(contents=kept))
    return out


UNANSWERED_TEXT = (
    "not run: this call got no result (its run ended before it ran, or its approval was "
    "never answered)"
)


def close_open_calls(view: list[Message], pending: set[str]) -> list[Message]:
    """The view with an error result for every call that has none and will get none in this
    run (`pending`: the ids of calls a person just answered).

    A call without a result happens when a run ended early (a middleware terminated it, the
    caller did not answer a call it declared, a person typed a new message instead of
    answering an approval request). Every chat API refuses a request holding such a call,
    so one early end would break every later request; the model is told the call did not
    run instead. Only the model's view changes, never the caller's messages.
    """
    result_at: dict[str, int] = {}
    for index, message in enumerate(view):
        for result in message.function_results:
            result_at[result.call_id] = index
    out: list[Message] = []
    index, count = 0, len(view)
    while index < count:
        message = view[index]
        out.append(message)
        index += 1
        open_calls = [
            c
            for c in message.function_calls
            if result_at.get(c.call_id, -1) < index and c.call_id not in pending
        ]
        if not open_calls:
            continue
        while index < count and view[index].role == "tool":
            out.append(view[index])
            index += 1
        out.append(
            Message(
                "tool",
                [FunctionResultContent(c.call_id, error=UNANSWERED_TEXT) for c in open_calls],
            )
        )
    return out


def pending_responses(messages: Sequence[Message]) -> list[FunctionApprovalResponseContent]:
    """The approval responses in a trailing user message whose calls have no result yet.

    A result answers a call only if it comes after the last message that made a call with
    that id: servers that number call ids per response reuse them across turns.
    """
    if not messages or messages[-1].role != "user":
        return []
    made_at: dict[str, int] = {}
    result_at: dict[str, int] = {}
    for index, message in enumerate(messages):
        for c in message.contents:
            if type(c) is FunctionCallContent:
                made_at[c.call_id] = index
            elif type(c) is FunctionResultContent:
                result_at[c.call_id] = index
    answered = {cid for cid, index in result_at.items() if index > made_at.get(cid, -1)}
    out: list[FunctionApprovalResponseContent] = []
    for content in messages[-1].contents:
        if type(content) is not FunctionApprovalResponseContent:
            continue
        call_id = content.function_call.call_id
        if call_id not in answered:
            answered.add(call_id)
            out.append(content)
    return out


def insert_results(view: list[Message], tool_message: Message) -> None:
    """Put `tool_message` after the assistant message holding its calls (and the tool
    messages that already follow it); add that assistant message if the view lacks it."""
    ids = {c.call_id for c in tool_message.function_results}
    for index in range(len(view) - 1, -1, -1):
        message = view[index]
        if message.role == "assistant" and any(c.call_id in ids for c in message.function_calls):
            end = index + 1
            while end < len(view) and view[end].role == "tool":
                end += 1
            view.insert(end, tool_message)
            return
    view.append(tool_message)


def missing_call_message(
    view: Sequence[Message], responses: Sequence[FunctionApprovalResponseContent]
) -> Message | None:
    """An assistant message with the approved calls the view does not contain, if any."""
    present = {c.call_id for m in view for c in m.function_calls}
    missing = [r.function_call for r in responses if r.function_call.call_id not in present]
    return Message("assistant", list(missing)) if missing else None
