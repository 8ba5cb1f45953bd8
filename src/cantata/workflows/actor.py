"""How one executor runs its share of a superstep.

An `Invocation` is an executor's work in one superstep of one run (its messages and the
answers to its requests, with read-only views of the committed state); `execute` runs it
and returns a `StepResult` that the runner commits at the boundary. Invocations are run by
the actors of `placement.py`, never by the caller directly.

Live events. A handler's events (an agent's streamed chunks, outputs, requests) must reach
`run_stream` while the handler is still running, not at the end of the superstep. The
invocation carries a `sink`: in process, the run's own sink, handed over as it is (an
in-process runtime that does not copy messages takes the `Invocation` itself: the fast
path). A runtime that moves messages to another process cannot carry a callable, a token
or the runner: there the runner sends an `ExecutorTask` (values only) and the actor's sink
is a `Publisher` that publishes each event to ``TopicId(EVENTS_TOPIC, stream)``, where the
runner's local subscriber (`AgentRuntime.add_local_subscriber`) takes them; cancellation
comes with the delivery (the send's cancellation token), not in the message. Executors and
the context do not change between the two.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..core import (
    CancellationToken,
    SerializationError,
    from_json,
    register,
    registry,
    to_json,
    tracing,
)
from ..core.durable import effect_scope
from ..core.ids import new_id
from ..core.retry import NeedsPerson, classify
from ..runtime import TopicId
from .context import PendingRequest, StepResult, WorkflowContext, private_copy
from .events import (
    AgentResponseEvent,
    AgentUpdateEvent,
    ExecutorCompletedEvent,
    ExecutorFailedEvent,
    ExecutorInvokedEvent,
    OutputEvent,
    RequestInfoEvent,
    WarningEvent,
    WorkflowEvent,
)
from .executor import Executor, NeedsPersonRequest
from .journal import EffectJournal, InvocationEffects

_log = logging.getLogger("cantata.workflows")

__all__ = [
    "EVENTS_TOPIC",
    "ExecutorTask",
    "Invocation",
    "PublishedEvent",
    "Publisher",
    "Wiring",
    "execute",
    "execute_task",
    "to_task",
]

EVENTS_TOPIC = "cantata.workflow.events"


@dataclass(frozen=True, slots=True)
class Wiring:
    """Where an executor sits in one workflow: what its edges reach, and whether what it
    yields (and, for an agent executor, its response) counts as a workflow output."""

    targets: frozenset[str] = frozenset()
    yields: bool = True
    """False when the builder's ``output_from=`` leaves the executor out."""
    answer_is_output: bool = False
    """True when an agent executor's response is an output by default (no out-edges, or
    named by ``output_from=``)."""


_UNWIRED = Wiring()


@dataclass(slots=True)
class Invocation:
    """One executor's work in one superstep of one run."""

    run_id: str
    executor_id: str
    items: list[tuple[Any, list[str]]]
    """Messages with the ids of the executors that sent them, in arrival order."""
    answers: list[tuple[PendingRequest, Any]] = field(default_factory=list)
    state: Mapping[str, Any] = field(default_factory=dict)
    executor_state: Any = None
    logs: Mapping[str, list[Any]] = field(default_factory=dict)
    """The run's committed logs by key (read-only here; appends go into the result)."""
    wiring: Wiring = field(default_factory=lambda: _UNWIRED)
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    streaming: bool = False
    sink: Callable[[WorkflowEvent], None] = field(default=lambda e: None)
    cancellation_token: CancellationToken = field(default_factory=CancellationToken)
    observed: bool = True
    """Whether someone consumes the run's events: when not, executor events are not made
    (nor are the copies of messages they carry)."""
    superstep: int = 0
    journal: EffectJournal | None = None
    """Where `ctx.effect` journals results (None: the run has no checkpoint store)."""
    effects: InvocationEffects | None = None
    """The effect scope of this invocation (made by `execute` in a durable run, else on
    the first `ctx.effect`)."""


def execute(executor: Executor, inv: Invocation) -> Coroutine[Any, Any, StepResult]:
    """Run an invocation: answers first, then messages, one at a time, in order.

    In a durable run (one with a journal) the handlers run within the invocation's effect
    scope, so model calls and effect tools inside them are journaled too; an executor with
    a retry policy is tried again on a failure it retries. A plain run gets the loop's own
    coroutine (no layer more per invocation)."""
    if inv.journal is None and executor.retry_policy is None and not tracing.enabled():
        return _execute(executor, inv)
    return _traced(executor, inv)


async def _traced(executor: Executor, inv: Invocation) -> StepResult:
    if tracing.enabled():
        attributes = {
            "cantata.executor.id": inv.executor_id,
            "cantata.run_id": inv.run_id,
            "cantata.superstep": inv.superstep,
        }
        with tracing.span(f"executor {inv.executor_id}", attributes):
            return await _attempts(executor, inv)
    return await _attempts(executor, inv)


async def _attempts(executor: Executor, inv: Invocation) -> StepResult:
    """The invocation, tried again by the executor's retry policy; the pause between two
    attempts ends at once when the run is cancelled."""
    policy = executor.retry_policy
    if policy is None:
        return await _scoped(executor, inv, ask=True)
    retries_person = "needs_person" in policy.retry_on
    attempt = 1
    while True:
        try:
            # a needs-a-person failure becomes a request unless this policy retries it first
            ask = not retries_person or attempt >= policy.attempts
            return await _scoped(executor, inv, ask=ask)
        except Exception as exc:
            if not policy.should_retry(exc, attempt):
                raise
            pause = policy.pause(attempt, exc)
            _log.warning(
                "workflow run %r: executor %r failed (%s: %s), attempt %d of %d; retrying in "
                "%.2f s",
                inv.run_id,
                inv.executor_id,
                type(exc).__name__,
                exc,
                attempt,
                policy.attempts,
                pause,
            )
            await policy.wait(pause, inv.cancellation_token)
            attempt += 1


async def _scoped(executor: Executor, inv: Invocation, *, ask: bool) -> StepResult:
    """One attempt; in a durable run, within a fresh effect scope (a retry finds what the
    failed attempt journaled)."""
    if inv.journal is None:
        inv.effects = None
        return await _execute(executor, inv, ask=ask)
    inv.effects = InvocationEffects(inv.journal, inv.run_id, inv.executor_id, inv.superstep)
    token = effect_scope.set(inv.effects)
    try:
        return await _execute(executor, inv, ask=ask)
    finally:
        effect_scope.reset(token)


async def _execute(
    executor: Executor, inv: Invocation, into: StepResult | None = None, *, ask: bool = True
) -> StepResult:
    """Answers first, then messages, into `into` (a new result when None). With `ask`, a
    needs-a-person failure becomes the invocation's only result: a request for input."""
    result = StepResult(executor.id) if into is None else into
    sink = inv.sink
    eid = executor.id
    observed = inv.observed
    marks = (0, 0)
    inline = type(executor)._execute is Executor._execute  # else: the override runs
    try:
        for request, answer in inv.answers:
            data = request.data
            if type(data) is NeedsPersonRequest and not executor._takes_person_answers():
                await _run_again(executor, inv, data, result)
                continue
            ctx = WorkflowContext(executor, inv, result, [])
            ctx.request_id = request.request_id
            if observed:
                marks = _invoked(sink, eid, answer, result)
            try:
                await executor._execute_response(data, answer, ctx)
            except BaseException as exc:
                sink(ExecutorFailedEvent(eid, exc))
                raise
            if observed:
                _completed(sink, eid, result, marks)
        for message, sources in inv.items:
            inv.cancellation_token.raise_if_cancelled()
            ctx = WorkflowContext(executor, inv, result, sources)
            if observed:
                marks = _invoked(sink, eid, message, result)
            try:
                if inline:  # Executor._execute, inlined: two coroutines fewer per message
                    h = executor._exact.get(type(message)) or executor._handler_for(message)
                    returned = executor._invoke(h, (message, ctx) if h.takes_ctx else (message,))
                    if h.is_async:
                        returned = await returned
                    if returned is not None:
                        ctx.send_message(returned)
                else:
                    await executor._execute(message, ctx)
            except BaseException as exc:
                sink(ExecutorFailedEvent(eid, exc))
                raise
            if observed:
                _completed(sink, eid, result, marks)
    except Exception as exc:
        if not ask or classify(exc) != "needs_person":
            raise
        return _person_needed(executor, inv, exc)
    return result


async def _run_again(
    executor: Executor, inv: Invocation, data: NeedsPersonRequest, result: StepResult
) -> None:
    """A person answered a `NeedsPersonRequest`: handle its messages and answers again, in
    the effect scope of the superstep that failed (what it journaled is not repeated)."""
    again = Invocation(
        inv.run_id,
        inv.executor_id,
        [(message, list(sources)) for message, sources in data.messages],
        [(request, answer) for request, answer in data.answers],
        inv.state,
        inv.executor_state,
        inv.logs,
        inv.wiring,
        inv.kwargs,
        inv.streaming,
        inv.sink,
        inv.cancellation_token,
        inv.observed,
        data.superstep,
        inv.journal,
    )
    if inv.journal is None:
        await _execute(executor, again, result, ask=False)
        return
    again.effects = InvocationEffects(inv.journal, inv.run_id, inv.executor_id, data.superstep)
    token = effect_scope.set(again.effects)
    try:
        await _execute(executor, again, result, ask=False)
    finally:
        effect_scope.reset(token)


def _person_needed(executor: Executor, inv: Invocation, exc: Exception) -> StepResult:
    """The invocation failed with `NeedsPerson`: nothing of it is committed but a request
    for input that, once answered, runs it again (see `NeedsPersonRequest`)."""
    cause = _needs_person_in(exc)
    data = NeedsPersonRequest(
        inv.executor_id,
        str(cause),
        type(cause).__name__,
        getattr(cause, "details", None),
        inv.superstep,
        list(inv.items),
        list(inv.answers),
    )
    if not inv.items and len(inv.answers) == 1:
        earlier = inv.answers[0][0].data
        if type(earlier) is NeedsPersonRequest and not executor._takes_person_answers():
            # asked again while running again: ask for the same work, not one around it
            data.superstep, data.messages, data.answers = (
                earlier.superstep,
                earlier.messages,
                earlier.answers,
            )
    rtype = executor._response_type_for(data) if executor._takes_person_answers() else str
    request_id = new_id()
    result = StepResult(executor.id)
    result.requests = [PendingRequest(request_id, inv.executor_id, data, rtype)]
    _log.warning(
        "workflow run %r: executor %r needs a person (%s: %s); request %s waits for an answer",
        inv.run_id,
        inv.executor_id,
        data.error_type,
        data.error,
        request_id,
    )
    inv.sink(RequestInfoEvent(inv.executor_id, request_id, data, rtype))
    return result


def _needs_person_in(exc: BaseException) -> BaseException:
    """The `NeedsPerson` a failure stands for (itself, or the cause it wraps)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, NeedsPerson):
            return current
        current = current.__cause__
    return exc


def _invoked(
    sink: Callable[[WorkflowEvent], None], eid: str, message: Any, result: StepResult
) -> tuple[int, int]:
    """Report a message taken (a copy: the handler may change its own); returns where the
    handler's sends and yields start, for the completed event."""
    sink(ExecutorInvokedEvent(eid, type(message).__qualname__, private_copy(message)))
    return len(result.sent), len(result.outputs)


def _completed(
    sink: Callable[[WorkflowEvent], None], eid: str, result: StepResult, marks: tuple[int, int]
) -> None:
    sent = [message for message, _ in result.sent[marks[0] :]]
    sink(ExecutorCompletedEvent(eid, sent, result.outputs[marks[1] :]))


# -- the wire: what crosses a process boundary ------------------------------------------
#
# A runtime that moves messages between processes (Ray; `LocalRuntime(serialize_messages=
# True)` in tests) cannot carry the sink, the token or the runner. There the runner sends
# an `ExecutorTask` (values only), the actor rebuilds the `Invocation` from it and from the
# workflow definition it was registered with, publishes the handler's events one by one to
# ``TopicId(EVENTS_TOPIC, stream)``, and returns the `StepResult` (values only) with the
# number of events it published, so the runner can wait for the last of them before it
# commits the boundary: events keep their order relative to the superstep's own.

_BUILTIN_TYPES: dict[str, type] = {
    t.__name__: t
    for t in (bool, int, float, str, bytes, list, dict, tuple, set, frozenset, type(None))
}


def type_ref(rtype: Any) -> str | None:
    """A response type as a name (a builtin or registered class), else None: the receiver
    then falls back to the type the executor's response handler declares."""
    if isinstance(rtype, type):
        if _BUILTIN_TYPES.get(rtype.__name__) is rtype:
            return rtype.__name__
        if registry.is_registered(rtype):
            return registry.name_of(rtype)
    return None


def type_of(name: Any) -> Any:
    """The type a `type_ref` names (None stays None)."""
    if name is None:
        return None
    if not isinstance(name, str):
        raise SerializationError(f"a response type must be a type name, not {name!r}")
    return _BUILTIN_TYPES.get(name) or registry.type_named(name)


def _enc_request(r: PendingRequest) -> dict[str, Any]:
    return {
        "request_id": r.request_id,
        "executor_id": r.executor_id,
        "data": to_json(r.data),
        "response_type": type_ref(r.response_type),
    }


def _dec_request(d: dict[str, Any]) -> PendingRequest:
    return PendingRequest(
        d["request_id"], d["executor_id"], from_json(d["data"]), type_of(d.get("response_type"))
    )


def _enc_result(r: StepResult) -> dict[str, Any]:
    data = {
        "executor_id": r.executor_id,
        "sent": to_json(list(r.sent)),
        "outputs": to_json(list(r.outputs)),
        "state_writes": to_json(dict(r.state_writes)),
        "log_appends": to_json(dict(r.log_appends)),
        "requests": to_json(list(r.requests)),
        "published": r.published,
    }
    if r.executor_state_changed:
        data["executor_state"] = to_json(r.executor_state)
    return data


def _dec_result(d: dict[str, Any]) -> StepResult:
    result = StepResult(
        d["executor_id"],
        sent=from_json(d["sent"]),
        outputs=from_json(d["outputs"]),
        state_writes=from_json(d["state_writes"]),
        log_appends=from_json(d["log_appends"]),
        requests=from_json(d["requests"]),
        published=d["published"],
    )
    if "executor_state" in d:
        result.executor_state = from_json(d["executor_state"])
    return result


def _enc_request_event(e: RequestInfoEvent) -> dict[str, Any]:
    return {
        "executor_id": e.executor_id,
        "request_id": e.request_id,
        "data": to_json(e.data),
        "response_type": type_ref(e.response_type),
    }


def _dec_request_event(d: dict[str, Any]) -> RequestInfoEvent:
    return RequestInfoEvent(
        d["executor_id"], d["request_id"], from_json(d["data"]), type_of(d.get("response_type"))
    )


register(
    PendingRequest,
    name="cantata.workflows.PendingRequest",
    encode=_enc_request,
    decode=_dec_request,
)
register(StepResult, name="cantata.workflows.StepResult", encode=_enc_result, decode=_dec_result)
register(
    RequestInfoEvent,
    name="cantata.workflows.RequestInfoEvent",
    encode=_enc_request_event,
    decode=_dec_request_event,
)
# The events a handler emits (ExecutorFailedEvent is not one: an error is no value, so the
# runner reports a failure itself, with the error the runtime raised).
for _event in (
    ExecutorInvokedEvent,
    ExecutorCompletedEvent,
    OutputEvent,
    AgentUpdateEvent,
    AgentResponseEvent,
    WarningEvent,
):
    register(_event, name=f"cantata.workflows.{_event.__name__}")


@register(name="cantata.workflows.ExecutorTask")
@dataclass(slots=True)
class ExecutorTask:
    """An `Invocation` as values: what an executor actor gets from another process."""

    run_id: str
    executor_id: str
    superstep: int
    stream: str
    """The source of the call's events topic (unique to the call that sent the task)."""
    items: list[tuple[Any, list[str]]]
    answers: list[tuple[PendingRequest, Any]]
    state: dict[str, Any]
    executor_state: Any
    logs: dict[str, list[Any]]
    """Only the logs this executor can read: its own and the shared ones."""
    kwargs: dict[str, Any]
    streaming: bool
    observed: bool = True
    """Whether the caller consumes events: when not, the actor publishes none."""
    journal: str | None = None
    """The run's journal endpoint (an AgentId string: a process-local subscriber of the
    runner) when the run is durable: effects are journaled there before the handler goes on."""


@register(name="cantata.workflows.PublishedEvent")
@dataclass(slots=True)
class PublishedEvent:
    """One event of an executor, published live to the run's events topic.

    `seq` numbers the events of one invocation (executor, superstep), so the receiver puts
    them back in order should a runtime deliver them out of it.
    """

    stream: str
    executor_id: str
    superstep: int
    seq: int
    event: Any


def to_task(
    inv: Invocation, superstep: int, stream: str, journal: str | None = None
) -> ExecutorTask:
    """The values of an invocation (the logs cut to what its executor may read)."""
    own = inv.executor_id + "/"
    logs = {k: v for k, v in inv.logs.items() if k.startswith(own) or k.startswith("*/")}
    return ExecutorTask(
        inv.run_id,
        inv.executor_id,
        superstep,
        stream,
        inv.items,
        inv.answers,
        dict(inv.state),
        inv.executor_state,
        logs,
        dict(inv.kwargs),
        inv.streaming,
        inv.observed,
        journal,
    )


class Publisher:
    """The sink of a remote invocation: publishes each event, in order, as it comes.

    A handler's sink is synchronous and publishing is not, so events go into an outbox that
    one task drains; the actor waits for it (`flush`) before it returns. The first event
    that cannot be published (a custom event type that is not registered, say) stops the
    publishing and fails the invocation with that error, once the handler returns.
    """

    __slots__ = (
        "_outbox",
        "_publish",
        "_task",
        "_topic",
        "error",
        "executor_id",
        "sent",
        "seq",
        "stream",
        "superstep",
    )

    def __init__(self, runtime: Any, stream: str, executor_id: str, superstep: int) -> None:
        self._publish = runtime.publish_message
        self._topic = TopicId(EVENTS_TOPIC, stream)
        self._outbox: deque[PublishedEvent] = deque()
        self._task: asyncio.Task[None] | None = None
        self.stream = stream
        self.executor_id = executor_id
        self.superstep = superstep
        self.seq = 0
        self.sent = 0
        self.error: BaseException | None = None

    def __call__(self, event: WorkflowEvent) -> None:
        if self.error is not None or type(event) is ExecutorFailedEvent:
            return
        self._outbox.append(
            PublishedEvent(self.stream, self.executor_id, self.superstep, self.seq, event)
        )
        self.seq += 1
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._pump())

    async def _pump(self) -> None:
        try:
            while self._outbox:
                await self._publish(self._outbox[0], self._topic)
                self._outbox.popleft()
                self.sent += 1
        except Exception as exc:
            self.error = exc
            self._outbox.clear()
        finally:
            self._task = None

    async def flush(self) -> None:
        """Wait until every event is published; raise the error that stopped publishing.

        Bounded by the runtime: each publish is a hand-over to its queues (and the pump
        stops at the first error), so the loop ends once the outbox is empty."""
        while self._task is not None:
            await asyncio.shield(self._task)
        if self.error is not None:
            raise self.error

    def cancel(self) -> None:
        """Drop what is not published yet (the invocation was cancelled)."""
        self._outbox.clear()
        if self._task is not None:
            self._task.cancel()


def _unread(event: WorkflowEvent) -> None:
    """The sink of an invocation whose events nobody reads."""


async def execute_task(
    executor: Executor,
    wiring: Wiring,
    task: ExecutorTask,
    runtime: Any,
    token: CancellationToken,
    journal: EffectJournal | None = None,
) -> StepResult:
    """Run an `ExecutorTask` with a publishing sink and the delivery's cancellation token.

    A handler's error is raised as it is, with the number of events published before it
    (``__cantata_published__``), so the runner still waits for those.
    """
    # nobody reads the events (not observed): publish none, send the result only
    sink = (
        Publisher(runtime, task.stream, task.executor_id, task.superstep) if task.observed else None
    )
    inv = Invocation(
        task.run_id,
        task.executor_id,
        task.items,
        answers=task.answers,
        state=task.state,
        executor_state=task.executor_state,
        logs=task.logs,
        wiring=wiring,
        kwargs=task.kwargs,
        streaming=task.streaming,
        sink=_unread if sink is None else sink,
        cancellation_token=token,
        observed=task.observed,
        superstep=task.superstep,
        journal=journal,
    )
    if sink is None:
        return await execute(executor, inv)
    try:
        result = await execute(executor, inv)
        await sink.flush()
    except asyncio.CancelledError:
        sink.cancel()
        raise
    except BaseException as exc:
        with contextlib.suppress(BaseException):
            await sink.flush()
        with contextlib.suppress(AttributeError):
            exc.__cantata_published__ = sink.sent  # type: ignore[attr-defined]
        raise
    result.published = sink.sent
    return result
