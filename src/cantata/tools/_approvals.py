"""Approval bookkeeping: what the model may see, and which answered requests to run.

Models know nothing of approval requests and responses, so they are removed from the
messages a model is sent; the results of approved calls are placed right after the
assistant message that asked for those calls, where every chat API expects them.

Security: approvals cannot change what runs. A response is honoured only against the
request the loop issued (same ``request_id``, in an assistant message), and what runs is
the request's call; see `pending_approvals`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import NamedTuple

from ..core import (
    FunctionApprovalRequestContent,
    FunctionApprovalResponseContent,
    FunctionCallContent,
    FunctionResultContent,
    InvalidMessageError,
    Message,
)

_log = logging.getLogger("cantata.tools")

_APPROVAL_TYPES = (FunctionApprovalRequestContent, FunctionApprovalResponseContent)


def holds(messages: Sequence[Message], kinds: tuple[type, ...]) -> bool:
    """Whether any message holds a content of one of `kinds` (plain loops: this runs on
    every turn, and a generator per message cost more than the scan)."""
    for message in messages:
        for content in message.contents:
            if type(content) in kinds:
                return True
    return False


def model_view(messages: list[Message]) -> list[Message]:
    """The messages without approval contents; messages left empty are dropped. `messages`
    itself when it holds none (no copy)."""
    if not holds(messages, _APPROVAL_TYPES):
        return messages  # the usual case, found in one pass
    out: list[Message] | None = None
    for index, message in enumerate(messages):
        contents = message.contents
        if not any(type(c) in _APPROVAL_TYPES for c in contents):
            if out is not None:
                out.append(message)
            continue
        if out is None:
            out = messages[:index]
        kept = [c for c in contents if type(c) not in _APPROVAL_TYPES]
        if kept:
            out.append(message.copy(contents=kept))
    return messages if out is None else out


UNANSWERED_TEXT = (
    "not run: this call got no result (its run ended before it ran, or its approval was "
    "never answered)"
)


_NONE: frozenset[str] = frozenset()


class Closed(NamedTuple):
    view: list[Message]
    closed: frozenset[str]
    """Ids of the calls given a "not run" result."""
    held: frozenset[str]
    """Ids of calls without a result left open because they are pending."""


def close_open_calls(view: list[Message], pending: AbstractSet[str]) -> Closed:
    """The view with an error result for every call that has none and will get none in this
    run (`pending`: the ids of calls a person just answered), with the ids of the calls
    closed and of those left open; `view` itself when none is closed (no copy).

    A call without a result happens when a run ended early (a middleware terminated it, the
    caller did not answer a call it declared, a person typed a new message instead of
    answering an approval request). Every chat API refuses a request holding such a call,
    so one early end would break every later request; the model is told the call did not
    run instead. Only the model's view changes, never the caller's messages.
    """
    if not holds(view, (FunctionCallContent,)):
        return Closed(view, _NONE, _NONE)  # the usual case, found in one pass
    result_at: dict[str, int] = {}
    for index, message in enumerate(view):
        for result in message.function_results:
            result_at[result.call_id] = index
    out: list[Message] = []
    closed: set[str] = set()
    held: set[str] = set()
    index, count = 0, len(view)
    while index < count:
        message = view[index]
        out.append(message)
        index += 1
        open_calls = []
        for c in message.function_calls:
            if result_at.get(c.call_id, -1) >= index:
                continue
            if c.call_id in pending:
                held.add(c.call_id)
            else:
                open_calls.append(c)
        if not open_calls:
            continue
        while index < count and view[index].role == "tool":
            out.append(view[index])
            index += 1
        closed.update(c.call_id for c in open_calls)
        out.append(
            Message(
                "tool",
                [FunctionResultContent(c.call_id, error=UNANSWERED_TEXT) for c in open_calls],
            )
        )
    return Closed(out if closed else view, frozenset(closed), frozenset(held))


NO_REQUEST_TEXT = (
    "not run: no approval request was issued for this call, so an approval cannot run it; "
    "approve a request the run issued"
)
MISMATCH_TEXT = (
    "not run: the approval does not match the call it was asked for (an approval cannot "
    "change a call's tool or arguments); answer the request as it was issued"
)


@dataclass(slots=True, frozen=True)
class Verdict:
    """What one approval answer decides for `call` (always the call the loop asked about):
    run it (`approved` and no `error`), or give it an error result (`error`, or the
    rejection text when not approved)."""

    call: FunctionCallContent
    approved: bool
    error: str | None = None


def pending_approvals(messages: Sequence[Message]) -> list[Verdict]:
    """The verdicts of the approval responses in a trailing user message.

    Security: an approval cannot change what runs. A response counts only when an
    assistant message before it holds the `FunctionApprovalRequestContent` with its
    `request_id` (the loop issues those); the call that runs is the request's, and a
    response naming another tool or other arguments runs nothing and gets an error result.
    A response with no such request gets an error result on the open call of the same id,
    or is ignored (logged) when there is no such call to attach a result to: a client that
    can write user messages must not be able to run approval-gated tools. A request whose
    call has a result already (answered in an earlier turn, or twice in this message) runs
    no more. The history before the user message is trusted: it is what the loop produced.

    Cost: nothing unless the last message is a user message holding responses; then the
    history is read backwards only as far as the requests it answers.
    """
    if not messages or messages[-1].role != "user":
        return []
    responses = [c for c in messages[-1].contents if type(c) is FunctionApprovalResponseContent]
    if not responses:
        return []
    requests, calls = _find_requests(messages, responses)
    out: list[Verdict] = []
    seen_requests: set[str] = set()
    decided: set[str] = set()
    for response in responses:
        if response.request_id in seen_requests:
            continue  # the first answer to a request is the one that counts
        seen_requests.add(response.request_id)
        found = requests.get(response.request_id)
        if found is None:
            open_call = calls.get(response.function_call.call_id)
            if open_call is None or open_call.call_id in decided:
                _log.warning(
                    "ignored an approval response for request %r: the run issued no such "
                    "request and no call %r waits for a result",
                    response.request_id,
                    response.function_call.call_id,
                )
                continue
            decided.add(open_call.call_id)
            out.append(Verdict(open_call, False, NO_REQUEST_TEXT))
            continue
        request, answered = found
        call = request.function_call
        if answered or call.call_id in decided:
            continue  # its call has a result already: it never runs twice
        decided.add(call.call_id)
        if same_call(response.function_call, call):
            out.append(Verdict(call, response.approved))
        else:
            out.append(Verdict(call, False, MISMATCH_TEXT))
    return out


def _find_requests(
    messages: Sequence[Message], responses: Sequence[FunctionApprovalResponseContent]
) -> tuple[dict[str, tuple[FunctionApprovalRequestContent, bool]], dict[str, FunctionCallContent]]:
    """Reading backwards from before the last message until every response's request is
    found: each request (the latest with its id, in an assistant message) with whether its
    call has a result after it, and, for responses without a request, the latest call of
    the response's call id that has no result after it."""
    wanted = {r.request_id for r in responses}
    call_ids = {r.function_call.call_id for r in responses}
    requests: dict[str, tuple[FunctionApprovalRequestContent, bool]] = {}
    calls: dict[str, FunctionCallContent] = {}
    seen_calls: set[str] = set()
    results_after: set[str] = set()
    for index in range(len(messages) - 2, -1, -1):
        if len(requests) == len(wanted):
            break
        message = messages[index]
        if message.role == "assistant":
            for c in message.contents:
                if type(c) is FunctionApprovalRequestContent:
                    if c.request_id in wanted and c.request_id not in requests:
                        requests[c.request_id] = (c, c.function_call.call_id in results_after)
                elif type(c) is FunctionCallContent and c.call_id in call_ids:
                    if c.call_id not in seen_calls and c.call_id not in results_after:
                        calls[c.call_id] = c
                    seen_calls.add(c.call_id)
        for c in message.contents:
            if type(c) is FunctionResultContent:
                results_after.add(c.call_id)
    return requests, calls


def same_call(given: FunctionCallContent, asked: FunctionCallContent) -> bool:
    """Whether an approval's call is the one the request asked about (arguments compared as
    JSON, so a client that sends them as text instead of an object still matches)."""
    if given.call_id != asked.call_id or given.name != asked.name:
        return False
    try:
        return given.arguments == asked.arguments or (
            given.parse_arguments() == asked.parse_arguments()
        )
    except (InvalidMessageError, RecursionError):
        return False


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
    view: Sequence[Message], calls: Sequence[FunctionCallContent]
) -> Message | None:
    """An assistant message with the approved calls (from their requests) the view lacks,
    if any (a reducer may have cut the message that made them); results need it before
    them. Reads backwards only until every call is found."""
    wanted = {c.call_id for c in calls}
    for index in range(len(view) - 1, -1, -1):
        if not wanted:
            return None
        message = view[index]
        if message.role == "assistant":
            wanted.difference_update(c.call_id for c in message.function_calls)
    missing = [c for c in calls if c.call_id in wanted]
    return Message("assistant", list(missing)) if missing else None
