"""A person's input over A2A and the Responses API: a run that stops for it leaves its A2A
task ``input-required`` (its Responses answer holds approval requests and ``request_info``
calls), and the next message on that task (the next request after that response) answers it.
One mechanism serves both: the requests are read from the thread, the answers checked and
turned into the messages the run takes; only the wire forms differ. A waiting run lives in
the server's store (its checkpoint, named by the thread's last message), so any server
process over that store answers it, after a restart too; `WaitingThreads` keeps the thread
object as well, so the process that asked skips the restore.

A run stops for a person in two ways, both visible in the messages it leaves on the thread:
a tool that needs approval (an assistant message of `FunctionApprovalRequestContent`, finish
reason ``approval_required``) and a workflow's ``ctx.request_info`` (its agent view answers
with ``request_info`` function calls, see `WorkflowAgent`). `input_requests` reads both from
the trailing assistant messages, so the requests waiting on a context are read again from
its thread (the server's store) when the answer comes: what may be answered is what the run
asked, never what a client claims it asked.

The task's status message carries each request twice: as text a person reads, and as a data
part ``{"cantata_input": [{"request_id", "kind", "name", "arguments"}]}`` a program reads.
The answer is a message with the same task id (and context id):

- a data part ``{"answers": {"<request_id>": <answer>, ...}}`` answers requests by id;
- with one request waiting, the message's text (or a data part holding any other value) is
  the answer.

Every waiting request is answered in one message. An approval's answer is true or false
(or ``yes``/``no``, ``approve``/``deny``); a workflow's answer is the text, or the JSON value
of a data part (whole numbers come back as ``int``). An answer that does not fit is refused
with a typed error (`RequestError`; the A2A handler sends it as ``InvalidParams``) and the
task keeps waiting.
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ..agents import LocalThread
from ..agents.remote_a2a import whole_numbers
from ..core import (
    FunctionApprovalRequestContent,
    FunctionApprovalResponseContent,
    FunctionCallContent,
    FunctionResultContent,
    InvalidMessageError,
    Message,
    short_repr,
)
from ..workflows.as_agent import RUN_KEY
from .errors import RequestError

if TYPE_CHECKING:
    from a2a.types.a2a_pb2 import Part

__all__ = [
    "INPUT_KEY",
    "MAX_WAITING",
    "InputRequest",
    "WaitingThreads",
    "answer_messages",
    "input_requests",
    "needs_held_run",
    "read_answers",
    "request_parts",
]

INPUT_KEY = "cantata_input"
"""The key of the data part that lists a task's waiting requests."""
_REQUEST_INFO = "request_info"  # the call name a WorkflowAgent uses (workflows.REQUEST_INFO)
_YES = frozenset({"yes", "y", "approve", "approved", "true", "ok", "allow"})
_NO = frozenset({"no", "n", "deny", "denied", "reject", "rejected", "false"})
_MAX_REQUESTS = 100
_log = logging.getLogger("cantata.serve")

MAX_WAITING = 1000
"""Waiting workflow runs a `WaitingThreads` keeps; past it the oldest is dropped."""


@dataclass(frozen=True, slots=True)
class InputRequest:
    """One thing a run waits for: an approval of a tool call, or an answer to a workflow's
    request (`call` is the tool call, or the ``request_info`` call and its data)."""

    request_id: str
    kind: Literal["approval", "request_info"]
    call: FunctionCallContent
    stored: bool = False
    """The waiting run is in the store (its message names a checkpoint): any process can
    answer it."""

    def to_json(self) -> dict[str, Any]:
        """The request as the status message's data part lists it."""
        return {
            "request_id": self.request_id,
            "kind": self.kind,
            "name": self.call.name,
            "arguments": _arguments(self.call),
        }

    def describe(self) -> str:
        """One line a person reads."""
        args = json.dumps(_arguments(self.call), ensure_ascii=False, default=str)
        if self.kind == "approval":
            return (
                f"approve the call of `{self.call.name}` with {args:.500}? answer yes or no "
                f"(request {self.request_id})"
            )
        data = _arguments(self.call)
        shown = data.get("data", data) if isinstance(data, dict) else data
        text = shown if isinstance(shown, str) else json.dumps(shown, default=str)
        return f"the workflow asks: {text:.500} (request {self.request_id})"


def _arguments(call: FunctionCallContent) -> Any:
    try:
        return call.parse_arguments()
    except InvalidMessageError:
        return call.arguments


def input_requests(messages: Sequence[Message]) -> list[InputRequest]:
    """The requests the trailing assistant messages wait on (none when the run ended with
    an answer, or when a user or tool message came after them)."""
    out: list[InputRequest] = []
    for message in reversed(messages):
        if message.role != "assistant":
            break
        found: list[InputRequest] = []
        stored = type(message.metadata.get(RUN_KEY)) is str
        for c in message.contents:
            if type(c) is FunctionApprovalRequestContent:
                found.append(InputRequest(c.request_id, "approval", c.function_call))
            elif type(c) is FunctionCallContent and c.name == _REQUEST_INFO:
                found.append(InputRequest(c.call_id, "request_info", c, stored))
        out[:0] = found
    return out


def read_answers(
    requests: Sequence[InputRequest], texts: str, data: Sequence[Any]
) -> dict[str, Any]:
    """The answer to every request in `requests`, from a message's text and data parts; a
    `RequestError` says what is missing or wrong (nothing is taken then)."""
    if not requests:
        raise RequestError("nothing waits for an answer on this task", status=409)
    by_id = {r.request_id: r for r in requests}
    answers: dict[str, Any] | None = None
    for value in data:
        if isinstance(value, dict) and set(value) == {"answers"}:
            if not isinstance(value["answers"], dict) or len(value["answers"]) > _MAX_REQUESTS:
                raise RequestError("'answers' must map request ids to answers", param="answers")
            answers = dict(value["answers"])
    if answers is None:
        if len(requests) != 1:
            raise RequestError(
                f"{len(requests)} requests wait: answer them by id with a data part "
                f'{{"answers": {{"<request_id>": <answer>}}}}; waiting: {sorted(by_id)}',
                param="answers",
            )
        only = requests[0].request_id
        if data:
            answers = {only: data[0]}
        elif texts.strip():
            answers = {only: texts}
        else:
            raise RequestError(
                f"the message holds no answer to request {only}: send text or a data part",
                param="answers",
            )
    unknown = sorted(set(answers) - set(by_id))
    missing = sorted(set(by_id) - set(answers))
    if unknown or missing:
        raise RequestError(
            f"answer every waiting request, and only those: waiting {sorted(by_id)}"
            f"{f', not waiting {[short_repr(u, 40) for u in unknown]}' if unknown else ''}"
            f"{f', unanswered {missing}' if missing else ''}",
            param="answers",
        )
    return {rid: _answer(by_id[rid], value) for rid, value in answers.items()}


def _answer(request: InputRequest, value: Any) -> Any:
    value = whole_numbers(value)
    if request.kind == "request_info":
        return value
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _YES | _NO:
        return value.strip().lower() in _YES
    raise RequestError(
        f"the answer to approval request {request.request_id} (a call of "
        f"`{request.call.name}`) must be yes or no (or true/false), got {short_repr(value, 60)}",
        param="answers",
    )


def answer_messages(requests: Sequence[InputRequest], answers: Mapping[str, Any]) -> list[Message]:
    """The messages that continue the run: a user message of approval responses, and a tool
    message of results for a workflow's requests."""
    approvals = [
        FunctionApprovalResponseContent(r.request_id, r.call, bool(answers[r.request_id]))
        for r in requests
        if r.kind == "approval"
    ]
    results = [
        FunctionResultContent(r.request_id, result=answers[r.request_id])
        for r in requests
        if r.kind == "request_info"
    ]
    out: list[Message] = []
    if approvals:
        out.append(Message("user", list(approvals)))
    if results:
        out.append(Message("tool", list(results)))
    return out


def request_parts(requests: Sequence[InputRequest], said: str, why: str = "") -> list[Part]:
    """The status message of a task waiting for `requests`: what the run said before it
    stopped, why an earlier answer was refused, each request as a line, and the data part."""
    from a2a.helpers import new_data_part, new_text_part

    lines = [line for line in (said, why) if line]
    lines.extend(r.describe() for r in requests)
    return [
        new_text_part("\n".join(lines)),
        new_data_part({INPUT_KEY: [r.to_json() for r in requests]}),
    ]


class WaitingThreads:
    """Thread objects whose run waits for a person, by the id the answer will name (an A2A
    context id, a response id). An agent view keeps a waiting run with its thread object, so
    the process that asked answers without restoring it; at most `limit` of them (the oldest
    dropped: its answer then restores the run from the store, when it was checkpointed
    there, else is refused)."""

    def __init__(self, limit: int = MAX_WAITING) -> None:
        self._threads: OrderedDict[str, LocalThread] = OrderedDict()
        self._limit = limit

    def hold(self, key: str, thread: LocalThread) -> None:
        """Keep `thread` until `take(key)`."""
        self._threads[key] = thread
        self._threads.move_to_end(key)
        while len(self._threads) > self._limit:
            dropped, _ = self._threads.popitem(last=False)
            _log.warning("dropped the waiting run of %s (over %s waiting)", dropped, self._limit)

    def take(self, key: str) -> LocalThread | None:
        """The thread held for `key`, no longer held."""
        return self._threads.pop(key, None)

    def __contains__(self, key: object) -> bool:
        return key in self._threads


def needs_held_run(requests: Sequence[InputRequest]) -> bool:
    """Whether answering `requests` needs the waiting run of this process (a workflow's,
    when its run was not checkpointed in the store)."""
    return any(r.kind == "request_info" and not r.stored for r in requests)
