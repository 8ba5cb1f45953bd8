"""Where executors run: on actors of an `AgentRuntime`, never called directly.

Two placements, both through the runtime contract:

- ``"run"`` (the default): one actor per run (type per workflow, key = run id). Each call
  that drives the run (`run`, `send_responses`, `resume`) is one message to it: the actor
  runs the supersteps, its executors concurrently within each, commits and checkpoints.
  Runs are the unit a runtime spreads out, and a superstep costs no message at all.
- ``"executor"``: each executor of a run is its own actor (type per workflow and executor,
  key = run id; on Ray an actor is an agent on the pool's hosts, not a process, so a run's
  actors cost a few hundred bytes of a host's memory while the call runs). The runner, in the
  caller, sends each superstep's work to the executors that have some, one message each;
  a runtime may then spread one run's fan-out over machines, at the price of a message
  per executor per superstep. This is the placement
  that runs unchanged on a runtime that moves messages between processes (Ray); the run
  placement's message is the live runner, so it is refused there with a clear error.

With ``"executor"``, a runtime that copies messages (any but an in-process `LocalRuntime`
that does not serialize them) gets only values: an `ExecutorTask` out, a `StepResult` back,
the handler's events published live to ``TopicId(EVENTS_TOPIC, stream)`` (a topic of the
call's own), where a local subscriber of the runtime (its callback runs in this process,
wherever the executors run) hands them to the call's sink (see `actor.py`). In process,
the `Invocation` itself goes, with the run's sink and token: nothing is copied. Both go
through one dispatch (`_dispatch`) and one execution path (`actor.execute`).

Actors keep no state of their own: the run's committed state travels with the message, so
a run can move to a fresh runtime between calls and a runtime may evict its actors freely.
So each call that drives a run releases its actors when it returns, however it ends (done,
failed, cancelled, or waiting for a person: `AgentRuntime.release_agents`), and the next
call (an answer, a resume from a checkpoint) activates them afresh: a runtime that serves
many runs holds only the actors of the calls under way. Without an explicit runtime, each
call gets its own in-process `LocalRuntime`, closed when the call returns.
"""

from __future__ import annotations

import asyncio
import logging
import math
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from ..core import CancellationToken, WorkflowError, new_id
from ..runtime import AgentId, AgentRuntime, BaseAgent, LocalRuntime, MessageContext, TopicId
from ._eager import gather_eager
from .actor import (
    EVENTS_TOPIC,
    ExecutorTask,
    Invocation,
    PublishedEvent,
    Wiring,
    execute,
    execute_task,
    to_task,
)
from .context import StepResult
from .events import ExecutorFailedEvent, RequestInfoEvent, RunStatus, WorkflowEvent
from .executor import Executor
from .graph import Placement
from .journal import JournalCall, RemoteJournal, serve_journal

if TYPE_CHECKING:
    from .graph import WorkflowGraph
    from .runner import Runner

__all__ = ["DriveRun", "ExecutorActor", "Placement", "RunActor", "drive_placed"]

_log = logging.getLogger("cantata.workflows")
Outcome: TypeAlias = "StepResult | BaseException"
Dispatch = Callable[[list[Invocation]], Awaitable[list[Outcome]]]


@dataclass(slots=True)
class DriveRun:
    """The message a run actor takes: drive this run until it is idle."""

    runner: Runner
    sink: Callable[[WorkflowEvent], None]
    resumed_from: str | None


async def run_invocations(
    executors: dict[str, Executor] | Any, invocations: list[Invocation]
) -> list[Outcome]:
    """Execute a superstep's invocations concurrently; failures are returned, not raised."""
    if len(invocations) == 1:
        inv = invocations[0]
        try:
            return [await execute(executors[inv.executor_id], inv)]
        except Exception as exc:
            return [exc]
    coros: list[tuple[Coroutine[Any, Any, Any], bool]] = []
    for inv in invocations:
        ex = executors[inv.executor_id]
        coros.append((execute(ex, inv), ex._synchronous))
    return await gather_eager(coros)


class RunActor(BaseAgent):
    """Hosts one run of a workflow: drives its supersteps and runs its executors."""

    __slots__ = ("executors",)

    def __init__(self, executors: Any) -> None:
        self.executors = executors

    async def on_message(self, message: Any, ctx: MessageContext) -> RunStatus:
        """Drive the run of a `DriveRun` with this actor's executors."""
        executors = self.executors

        async def local(invocations: list[Invocation]) -> list[Outcome]:
            return await run_invocations(executors, invocations)

        runner: Runner = message.runner
        runner.dispatch = local
        return await runner.drive(message.sink, resumed_from=message.resumed_from)


class ExecutorActor(BaseAgent):
    """Hosts one executor of one run; one message per superstep in which it has work.

    The executor comes from the workflow definition the actor's factory was registered
    with (factories are code, registered in each process), never from the message.
    """

    __slots__ = ("executor", "wiring")

    def __init__(self, executor: Executor, wiring: Wiring) -> None:
        self.executor = executor
        self.wiring = wiring

    async def on_message(self, message: Any, ctx: MessageContext) -> StepResult:
        """Execute one `Invocation` (in process) or `ExecutorTask` (values only)."""
        if type(message) is ExecutorTask:
            endpoint = message.journal
            journal = (
                None if endpoint is None else RemoteJournal(self.runtime, AgentId.parse(endpoint))
            )
            return await execute_task(
                self.executor, self.wiring, message, self.runtime, ctx.cancellation_token, journal
            )
        return await execute(self.executor, message)


class RunEvents:
    """The receiving end of one call's events topic: puts each invocation's events in
    order and hands them to the call's sink as they come; the runner waits on `drained`."""

    __slots__ = (
        "_closed",
        "_held",
        "_next",
        "_waiters",
        "run_id",
        "sink",
        "stream",
        "workflow",
    )

    def __init__(
        self,
        sink: Callable[[WorkflowEvent], None],
        workflow: WorkflowGraph,
        run_id: str,
        stream: str,
    ) -> None:
        self.sink = sink
        self.workflow = workflow
        self.run_id = run_id
        self.stream = stream
        """The source of the call's events topic: unique to the call."""
        self._next: dict[tuple[str, int], int] = {}
        self._held: dict[tuple[str, int, int], Any] = {}
        self._waiters: dict[tuple[str, int], tuple[int, asyncio.Future[None]]] = {}
        self._closed: set[tuple[str, int]] = set()

    def deliver(self, envelope: PublishedEvent) -> None:
        """Take one published event: pass it on in its invocation's order, or hold it."""
        key = (envelope.executor_id, envelope.superstep)
        if key in self._closed:
            return  # late: its invocation was cancelled or already accounted for
        n = self._next.get(key, 0)
        if envelope.seq != n:
            self._held[(*key, envelope.seq)] = envelope.event
            return
        self._emit(envelope.event)
        n += 1
        while (*key, n) in self._held:
            self._emit(self._held.pop((*key, n)))
            n += 1
        self._next[key] = n
        waiter = self._waiters.get(key)
        if waiter is not None and n >= waiter[0] and not waiter[1].done():
            waiter[1].set_result(None)

    def _emit(self, event: Any) -> None:
        if type(event) is RequestInfoEvent and event.response_type is None:
            executor = self.workflow.executors[event.executor_id]
            event.response_type = executor._response_type_for(event.data)
        self.sink(event)

    async def drained(self, executor_id: str, superstep: int, count: int) -> None:
        """Wait until `count` events of that invocation were passed on; then close it.

        Bounded by the workflow's `event_timeout`: the events were all published before
        the result was sent, so one that has not come by then was lost on the way (a
        runtime or an intervention dropped it), and the run fails rather than hang.
        """
        key = (executor_id, superstep)
        try:
            if self._next.get(key, 0) < count:
                future = asyncio.get_running_loop().create_future()
                self._waiters[key] = (count, future)
                timeout = self.workflow.event_timeout
                try:
                    async with asyncio.timeout(timeout):
                        await future
                except TimeoutError:
                    got = self._next.get(key, 0)
                    raise WorkflowError(
                        f"run {self.run_id!r}: executor {executor_id!r} published {count} "
                        f"events in superstep {superstep}, but only {got} arrived within "
                        f"{timeout}s of its result; the runtime lost the others (an "
                        "intervention that drops publishes?). Resume the run from its last "
                        "checkpoint, or raise event_timeout= on the WorkflowBuilder"
                    ) from None
        finally:
            self.close(key)

    def close(self, key: tuple[str, int]) -> None:
        """Pass on nothing more of that invocation."""
        self._closed.add(key)
        self._next.pop(key, None)
        self._waiters.pop(key, None)


async def _register_all(runtime: AgentRuntime, workflow: WorkflowGraph) -> None:
    if workflow.placement == "run":
        executors = workflow._by_id
        await runtime.register_factory(workflow._actor_types[""], lambda: RunActor(executors))
        return
    for eid, agent_type in workflow._actor_types.items():
        if eid:
            await runtime.register_factory(agent_type, _factory(workflow, eid))


def _factory(workflow: WorkflowGraph, eid: str) -> Callable[[], BaseAgent]:
    executor, wiring = workflow.executors[eid], workflow._wiring[eid]
    return lambda: ExecutorActor(executor, wiring)


def _copies_messages(runtime: AgentRuntime) -> bool:
    """Whether messages to `runtime` may leave this process (or are copied as if they did)."""
    return not isinstance(runtime, LocalRuntime) or runtime._serialize


_registered: weakref.WeakKeyDictionary[Any, dict[str, asyncio.Future[None]]] = (
    weakref.WeakKeyDictionary()
)


async def _register_once(runtime: AgentRuntime, workflow: WorkflowGraph) -> None:
    """Register a workflow's actor factories on a shared runtime once, even under races."""
    known = _registered.setdefault(runtime, {})
    pending = known.get(workflow.uid)
    if pending is not None:
        # Cannot hang: the first caller settles the future in every case (registration is
        # a few in-process calls to the runtime), and an exception is passed on.
        await asyncio.shield(pending)
        return
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    known[workflow.uid] = future
    try:
        await _register_all(runtime, workflow)
    except BaseException as exc:
        del known[workflow.uid]
        future.set_exception(exc)
        future.exception()  # retrieved here; waiters re-raise it
        raise
    future.set_result(None)


def _dispatch(
    runtime: AgentRuntime,
    runner: Runner,
    key: str,
    events: RunEvents | None,
    endpoint: str = "",
) -> Dispatch:
    """Send each invocation to its executor's actor: the `Invocation` itself in process
    (`events` None), else as values (an `ExecutorTask` out, a `StepResult` back, the
    handler's events published to the call's topic and waited for before the boundary;
    effects journaled through `endpoint`, the call's local subscriber, in a durable run)."""
    send = runtime.send_message
    workflow, run = runner.workflow, runner.run
    ids = {eid: AgentId(t, key) for eid, t in workflow._actor_types.items() if eid}

    async def one(inv: Invocation) -> StepResult:
        eid, token = inv.executor_id, inv.cancellation_token
        if events is None:
            done: StepResult = await send(inv, ids[eid], cancellation_token=token)
            return done
        step = run.superstep
        task = to_task(inv, step, events.stream, None if inv.journal is None else endpoint)
        try:
            result: StepResult = await send(task, ids[eid], cancellation_token=token)
        except BaseException as exc:
            count = getattr(exc, "__cantata_published__", None)
            if count is None:  # cancelled, or lost on the way: its events may never come
                events.close((eid, step))
                raise
            await events.drained(eid, step, count)
            events.sink(ExecutorFailedEvent(eid, exc))
            raise
        await events.drained(eid, step, result.published)
        for request in result.requests:
            if request.response_type is None:  # not nameable as a value: the declared one
                request.response_type = workflow.executors[eid]._response_type_for(request.data)
        return result

    async def each(invocations: list[Invocation]) -> list[Outcome]:
        # like the run placement: a failure cancels the invocations still running
        return await gather_eager([(one(inv), False) for inv in invocations])

    return each


async def _drive_executors(
    runtime: AgentRuntime,
    runner: Runner,
    sink: Callable[[WorkflowEvent], None],
    resumed_from: str | None,
) -> RunStatus:
    if not _copies_messages(runtime):
        runner.dispatch = _dispatch(runtime, runner, runner.run.run_id, None)
        return await runner.drive(sink, resumed_from=resumed_from)
    return await _drive_copied(runtime, runner, runner.run.run_id, sink, resumed_from)


async def _drive_copied(
    runtime: AgentRuntime,
    runner: Runner,
    key: str,
    sink: Callable[[WorkflowEvent], None],
    resumed_from: str | None,
) -> RunStatus:
    # Each call listens on a topic of its own (two resumes of one checkpoint must each
    # get only their own events), through a subscriber that lives in this process.
    run_id = runner.run.run_id
    events = RunEvents(sink, runner.workflow, run_id, f"{run_id}.{new_id()[:12]}")

    journal = runner._journal

    async def take(message: Any) -> Any:
        if type(message) is PublishedEvent:
            events.deliver(message)
            return None
        if type(message) is JournalCall and journal is not None:
            return await serve_journal(journal, message)
        raise WorkflowError(
            f"run {run_id!r} got a {type(message).__name__} on its events topic; only "
            "published events and journal calls go there"
        )

    subscriber = await runtime.add_local_subscriber(TopicId(EVENTS_TOPIC, events.stream), take)
    try:
        runner.dispatch = _dispatch(runtime, runner, key, events, str(subscriber.agent_id))
        return await runner.drive(sink, resumed_from=resumed_from)
    finally:
        await runtime.remove_local_subscriber(subscriber)


async def _drive_on(
    runtime: AgentRuntime,
    runner: Runner,
    sink: Callable[[WorkflowEvent], None],
    resumed_from: str | None,
    token: CancellationToken,
) -> RunStatus:
    workflow = runner.workflow
    run_id = runner.run.run_id
    if workflow.placement == "run":
        if _copies_messages(runtime):
            raise WorkflowError(
                f"workflow {workflow.name!r} has placement='run', whose message is the run "
                "itself (a runner, a live sink), which this runtime would have to copy; "
                "build it with placement='executor' to run it on a runtime that moves "
                "messages between processes"
            )
        # No timeout on this one message: it is the whole call, many handler calls long,
        # bounded by max_supersteps and the cancellation token (a runtime's default
        # timeout is meant for one handler: with placement "executor", each is bounded).
        status: RunStatus = await runtime.send_message(
            DriveRun(runner, sink, resumed_from),
            AgentId(workflow._actor_types[""], run_id),
            timeout=math.inf,
            cancellation_token=token,
        )
        return status
    return await _drive_executors(runtime, runner, sink, resumed_from)


async def _release(runtime: AgentRuntime, runner: Runner) -> None:
    """Release the actors a call of this run may have activated (its run actor, or its
    executors'). A release that fails is logged, not raised: the call's outcome stands,
    and what was not released is an idle actor, which a later call of the run reuses."""
    workflow, key = runner.workflow, runner.run.run_id
    if workflow.placement == "run":
        ids = [AgentId(workflow._actor_types[""], key)]
    else:
        ids = [AgentId(t, key) for eid, t in workflow._actor_types.items() if eid]
    try:
        await runtime.release_agents(ids)
    except Exception:
        _log.warning("run %r: releasing its actors failed", key, exc_info=True)


async def drive_placed(
    runner: Runner,
    sink: Callable[[WorkflowEvent], None],
    *,
    runtime: AgentRuntime | None,
    resumed_from: str | None,
    cancellation_token: CancellationToken,
) -> RunStatus:
    """Drive a run on its actors: on `runtime`, or on a `LocalRuntime` made for this call."""
    if runtime is not None:
        await _register_once(runtime, runner.workflow)
        try:
            return await _drive_on(runtime, runner, sink, resumed_from, cancellation_token)
        finally:
            # done, failed, cancelled or waiting for a person: the actors keep nothing the
            # run needs (its state travels with each message), so none outlives the call
            await _release(runtime, runner)
    # The runtime's default timeout bounds each executor's message (placement
    # "executor"); the one message of placement "run" is sent without one (see above).
    local = LocalRuntime(dedup_window=0)
    await local.start()
    try:
        await _register_all(local, runner.workflow)
        return await _drive_on(local, runner, sink, resumed_from, cancellation_token)
    finally:
        await local.close()
