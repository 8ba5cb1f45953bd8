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

import asyncio
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ..agents import LocalThread
from ..agents.remote_a2a import A2A_INPUT_KEY, whole_numbers
from ..core import (
    AlreadyAnsweredError,
    FunctionApprovalRequestContent,
    FunctionApprovalResponseContent,
    FunctionCallContent,
    FunctionResultContent,
    InvalidMessageError,
    Message,
    TextContent,
    short_repr,
)
from ..stores import StateStore, held_claim, settle_claim, take_claim
from ..workflows.as_agent import RUN_KEY
from .errors import RequestError
from .limits import DEFAULT_ABANDON_AFTER
from .owned_store import owned_key

if TYPE_CHECKING:
    from a2a.types.a2a_pb2 import Part
    from prometheus_client import Counter

__all__ = [
    "CLAIM_SLACK",
    "INPUT_KEY",
    "MAX_WAITING",
    "AnswerClaim",
    "InputRequest",
    "WaitingThreads",
    "answer_messages",
    "input_requests",
    "needs_held_run",
    "read_answers",
    "request_parts",
    "response_answers",
    "typed_answer",
    "yes_or_no",
]

INPUT_KEY = A2A_INPUT_KEY
"""The key of the data part that lists a task's waiting requests (`A2AThread` reads it)."""
_REQUEST_INFO = "request_info"  # the call name a WorkflowAgent uses (workflows.REQUEST_INFO)
_YES = frozenset({"yes", "y", "approve", "approved", "true", "ok", "allow"})
_NO = frozenset({"no", "n", "deny", "denied", "reject", "rejected", "false"})
_MAX_REQUESTS = 100
_log = logging.getLogger("cantata.serve")

CLAIM_SLACK = 60.0
"""Seconds past a run's time limit after which the claim of an answer whose process died
(it never finished) is taken over by another answer."""

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


def yes_or_no(text: str) -> bool | None:
    """A person's approval typed as text (``yes``, ``no``, ``approve``, ``deny``, ...; case
    and a final full stop do not matter), or None when the text is not one of those."""
    word = text.strip().lower().rstrip(".!")
    if word in _YES:
        return True
    return False if word in _NO else None


def response_answers(
    incoming: list[Message],
    history: Sequence[Message],
    previous_id: str | None,
    *,
    held: bool,
) -> list[Message]:
    """The input of a Responses request continuing `previous_id` (whose thread is
    `history`), with its answers to what that response waits for checked and made into the
    messages the run takes; `incoming` itself when it answers nothing.

    Answers are ``mcp_approval_response`` items (approval responses) and
    ``function_call_output`` items for ``request_info`` calls; with one approval waiting, an
    input of just ``yes`` or ``no`` is its answer. Any other input to a response whose
    approvals wait is refused (409, code ``input_required``) with the items to send: a
    pending approval is never dropped by a message that passes it by. An answer to a
    response that waits for nothing is a 409 too (``already_answered`` when the conversation
    asked that request earlier)."""
    waiting = input_requests(history)
    ids = {r.request_id for r in waiting}
    answers: dict[str, Any] = {}
    rest: list[Message] = []
    for message in incoming:
        kept = []
        for c in message.contents:
            if type(c) is FunctionApprovalResponseContent:
                answers[c.request_id] = c.approved
            elif type(c) is FunctionResultContent and c.call_id in ids:
                answers[c.call_id] = c.result
            else:
                kept.append(c)
        if len(kept) == len(message.contents):
            rest.append(message)
        elif kept:
            rest.append(Message(message.role, kept, author_name=message.author_name))
    if not answers:
        if not any(r.kind == "approval" for r in waiting):
            return incoming
        text = _typed_answer(incoming, waiting)
        if text is None:
            raise RequestError(_pending(waiting, previous_id), status=409, code="input_required")
        answers, rest = {waiting[0].request_id: text}, []
    if not waiting:
        raise _not_waiting(answers, history, previous_id)
    try:
        checked = read_answers(waiting, "", [{"answers": answers}])
    except RequestError as exc:
        raise RequestError(str(exc), status=exc.status, param="input") from None
    if needs_held_run(waiting) and not held:
        raise RequestError(
            "the workflow run that asked is no longer held by this server (it restarted, or "
            "more runs waited than it keeps); send the input again without "
            "previous_response_id to start over",
            status=409,
            param="previous_response_id",
        )
    return [*answer_messages(waiting, checked), *rest]


async def typed_answer(
    store: StateStore,
    key: str,
    what: str,
    history: Sequence[Message],
    text: str,
    *,
    lease: float,
) -> tuple[str | list[Message], AnswerClaim | None]:
    """What a chat runs for `text` typed on a thread whose conversation is `history`: the
    text itself when no approval waits; with one waiting, ``yes`` or ``no`` is its answer,
    claimed once in `store` (under `key` and the waiting message's id), and any other text
    is refused (409, ``input_required``) rather than passing the approval by."""
    waiting = input_requests(history)
    if not any(r.kind == "approval" for r in waiting):
        if await _being_answered(store, key, history):
            raise AlreadyAnsweredError(
                f"what {what} waited for is being answered by another request (its run is "
                "still going); send this once it has answered"
            )
        return text, None
    approved = yes_or_no(text) if len(waiting) == 1 else None
    if approved is None:
        said = "; ".join(r.describe() for r in waiting)[:600]
        raise RequestError(
            f"{what} waits for a person ({said}): answer yes or no before anything else",
            status=409,
            code="input_required",
            param="message",
        )
    claim = await AnswerClaim.take(
        store, f"answer:{key}:{history[-1].message_id}", what, lease=lease
    )
    return answer_messages(waiting, {waiting[0].request_id: approved}), claim


async def _being_answered(store: StateStore, key: str, history: Sequence[Message]) -> bool:
    """Whether the thread ends with an answer to approvals whose run is still going (its
    claim is held, within its lease): the answer is in the thread before the run's reply."""
    if len(history) < 2 or history[-1].role != "user":
        return False
    if not any(type(c) is FunctionApprovalResponseContent for c in history[-1].contents):
        return False
    held = await store.get(f"answer:{key}:{history[-2].message_id}")
    until = held.get("until") if isinstance(held, dict) else None
    return isinstance(until, int | float) and until > time.time()


def _typed_answer(incoming: list[Message], waiting: list[InputRequest]) -> bool | None:
    """The approval a lone ``yes`` or ``no`` gives, when it is all the input and one
    approval is all that waits."""
    if len(waiting) != 1 or len(incoming) != 1:
        return None
    message = incoming[0]
    if message.role != "user" or any(type(c) is not TextContent for c in message.contents):
        return None
    return yes_or_no(message.text)


def _pending(waiting: list[InputRequest], previous_id: str | None) -> str:
    """Why an input that answers nothing is refused, and the items that answer."""
    items = []
    for r in waiting:
        if r.kind == "approval":
            items.append(
                f'{{"type": "mcp_approval_response", "approval_request_id": "{r.request_id}", '
                '"approve": true}'
            )
        else:
            items.append(
                f'{{"type": "function_call_output", "call_id": "{r.request_id}", "output": ...}}'
            )
    said = "; ".join(r.describe() for r in waiting)[:600]
    typed = ' or the text "yes" or "no"' if len(waiting) == 1 else ""
    return (
        f"response {previous_id} waits for a person ({said}), so this input would pass it "
        f"by: answer first, with previous_response_id {previous_id} and the input "
        f"[{', '.join(items)[:900]}]{typed}"
    )


def _not_waiting(
    answers: Mapping[str, Any], history: Sequence[Message], previous_id: str | None
) -> RequestError:
    """The 409 of answers to a response that waits for nothing."""
    if previous_id is None:
        return RequestError(
            "this input answers requests, but names no response that asked them: set "
            "previous_response_id to the response holding the requests",
            status=409,
            param="previous_response_id",
        )
    asked = {
        c.request_id
        for m in history
        for c in m.contents
        if type(c) is FunctionApprovalRequestContent
    } | {c.call_id for m in history for c in m.contents if type(c) is FunctionCallContent}
    earlier = sorted(set(answers) & asked)
    if earlier:
        return RequestError(
            f"request {short_repr(earlier[0], 60)} was answered earlier in this conversation "
            f"(response {previous_id} waits for nothing); an answer is taken once",
            status=409,
            code="already_answered",
            param="input",
        )
    return RequestError(
        f"response {previous_id} waits for no answer: it asked for no approval or input "
        f"{short_repr(sorted(answers)[0], 60)}",
        status=409,
        param="input",
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
    the process that asked answers without restoring it; at most `limit` of them, each for
    at most `abandon_after` seconds (a timer on the running loop releases the oldest when
    its time is up, so an idle server lets go of them too). One dropped, the oldest past the
    limit or one past its time, is abandoned: the
    log says so, `abandoned` (a counter, labelled ``limit`` or ``timeout``) counts it, and
    its answer then restores the run from the store, when it was checkpointed there, else
    is refused. Keys are the current owner's (`owned_key`): a context id one identity
    chose names nothing another identity holds."""

    def __init__(
        self,
        limit: int = MAX_WAITING,
        *,
        abandon_after: float = DEFAULT_ABANDON_AFTER,
        abandoned: Counter | None = None,
    ) -> None:
        self._threads: OrderedDict[str, tuple[LocalThread, float]] = OrderedDict()
        self._limit = limit
        self._abandon_after = abandon_after
        self._abandoned = abandoned
        self._timer: asyncio.TimerHandle | None = None

    def hold(self, key: str, thread: LocalThread) -> None:
        """Keep `thread` until `take(key)`, or until it is abandoned."""
        self._expire()
        key = owned_key(key)
        self._threads[key] = (thread, time.monotonic())
        self._threads.move_to_end(key)
        while len(self._threads) > self._limit:
            dropped, _ = self._threads.popitem(last=False)
            _log.warning("dropped the waiting run of %s (over %s waiting)", dropped, self._limit)
            self._count("limit")
        self._arm()

    def take(self, key: str) -> LocalThread | None:
        """The thread held for `key`, no longer held."""
        self._expire()
        held = self._threads.pop(owned_key(key), None)
        self._arm()
        return None if held is None else held[0]

    def _arm(self) -> None:
        """Wake when the oldest held run's time is up (none while nothing is held). A timer,
        not a task: it holds no reference the loop's shutdown would wait on."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._threads:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # held outside a loop: looked at on the next hold or take
            return
        _, since = next(iter(self._threads.values()))
        delay = max(0.0, since + self._abandon_after - time.monotonic())
        self._timer = loop.call_later(delay, self._tick)

    def _tick(self) -> None:
        self._timer = None
        self._expire()
        self._arm()

    def _expire(self) -> None:
        """Release the runs that waited longer than `abandon_after` (the oldest come first)."""
        threads = self._threads
        cutoff = time.monotonic() - self._abandon_after
        while threads:
            key, (_, since) = next(iter(threads.items()))
            if since > cutoff:
                return
            del threads[key]
            _log.warning(
                "released the waiting run of %s: not answered within %gs (abandon_after)",
                key,
                self._abandon_after,
            )
            self._count("timeout")

    def _count(self, reason: str) -> None:
        if self._abandoned is not None:
            self._abandoned.labels(reason).inc()

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and owned_key(key) in self._threads


def needs_held_run(requests: Sequence[InputRequest]) -> bool:
    """Whether answering `requests` needs the waiting run of this process (a workflow's,
    when its run was not checkpointed in the store)."""
    return any(r.kind == "request_info" and not r.stored for r in requests)


class AnswerClaim:
    """The one answer to what a point of a conversation waits for (a response's approval
    requests and ``request_info`` calls), claimed in the server's store.

    Whatever the served kind, the first answer takes the claim (atomic across every process
    on the store, `take_claim`) before anything runs; every later answer to the same point,
    at once or long after, from any process and after restarts, is an
    `AlreadyAnsweredError` (HTTP 409, code ``already_answered``) and runs nothing. A claim
    whose run finished is held for good (`answered`), so the tool that was approved runs
    once; so is one whose run failed after taking the answer (`failed`: the call may have
    run). Only an answer refused before its run took it (`release`) can be sent again. A
    claim whose process died mid-run is taken over once its lease (the run's time limit and
    `CLAIM_SLACK`) has passed."""

    def __init__(self, store: StateStore, key: str, what: str) -> None:
        self._store = store
        self._key = key
        self._what = what
        self._open = True

    @classmethod
    async def take(cls, store: StateStore, key: str, what: str, *, lease: float) -> AnswerClaim:
        """The claim of the answer to `what` (a phrase naming the waiting point, e.g.
        ``response 'resp_1'``) at store key `key`; `AlreadyAnsweredError` if another answer
        has it."""
        if await take_claim(store, key, {"answering": True}, lease=lease):
            return cls(store, key, what)
        held = await held_claim(store, key) or {}
        if type(held.get("answered")) is str:
            went = held["answered"]
            said = f"was answered by another request (the conversation went on in {went})"
        elif type(held.get("failed")) is str:
            said = (
                f"was answered by another request whose run failed ({held['failed'][:200]}); "
                "its approved calls may have run, so it is not answered again: send a new "
                "message instead"
            )
        else:
            said = "is being answered by another request (its run is still going)"
        raise AlreadyAnsweredError(
            f"what {what} waits for {said}; an answer is taken once, so this one ran nothing"
        )

    async def answered(self, by: str) -> None:
        """The run that took the answer finished (`by` names where it went on)."""
        await self._settle({"answered": by})

    async def failed(self, why: str) -> None:
        """The run that took the answer failed: the answer stays spent."""
        await self._settle({"failed": why[:500]})

    async def release(self) -> None:
        """The answer was refused before a run took it: another may be sent."""
        if self._open:
            self._open = False
            await self._store.delete(self._key)

    async def _settle(self, value: dict[str, Any]) -> None:
        if self._open:
            self._open = False
            await settle_claim(self._store, self._key, value)
