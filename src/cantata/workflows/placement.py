"""Where executors run: on actors of an `AgentRuntime`, never called directly.

Two placements, both through the runtime contract, so a runtime that places actors on other
machines (Ray) runs any workflow unchanged:

- ``"run"`` (the default): one actor per run (type per workflow, key = run id). Each call
  that drives the run (`run`, `send_responses`, `resume`) is one message to it: the actor
  runs the supersteps, its executors concurrently within each, commits and checkpoints.
  Runs are the unit a runtime spreads out, and a superstep costs no message at all.
- ``"executor"``: each executor of a run is its own actor (type per workflow and executor,
  key = run id). The runner, in the caller, sends each superstep's work to the executors
  that have some, one message each; a runtime may then spread one run's fan-out over
  machines, at the price of a message per executor per superstep.

Actors keep no state of their own: the run's committed state travels with the message, so
a run can move to a fresh runtime between calls and a runtime may evict its actors freely.
Without an explicit runtime, each call that drives a run gets its own in-process
`LocalRuntime`, closed when the call returns, so nothing outlives it.
"""

from __future__ import annotations

import asyncio
import re
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from ..core import CancellationToken
from ..runtime import AgentId, AgentRuntime, BaseAgent, LocalRuntime, MessageContext
from ._eager import gather_eager
from .actor import Invocation, execute
from .context import StepResult
from .events import RunStatus, WorkflowEvent
from .executor import Executor

if TYPE_CHECKING:
    from .runner import Runner
    from .workflow import Workflow

__all__ = ["DriveRun", "ExecutorActor", "Placement", "RunActor", "drive_placed"]

Placement: TypeAlias = Literal["run", "executor"]
Outcome: TypeAlias = "StepResult | BaseException"
Dispatch = Callable[[list[Invocation]], Awaitable[list[Outcome]]]

_SAFE = re.compile(r"[^\w\-.]")


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
    """Hosts one executor of one run; one message per superstep in which it has work."""

    __slots__ = ("executor",)

    def __init__(self, executor: Executor) -> None:
        self.executor = executor

    async def on_message(self, message: Any, ctx: MessageContext) -> StepResult:
        """Execute one `Invocation`."""
        return await execute(self.executor, message)


def actor_types(workflow: Workflow) -> dict[str, str]:
    """Actor types of a workflow: ``""`` for the run actor, executor ids for the others."""
    base = f"wf.{_SAFE.sub('_', workflow.name)[:40]}.{workflow.uid}"
    types = {"": f"{base}.run"}
    types.update({eid: f"{base}.{i}" for i, eid in enumerate(workflow.executors)})
    return types


async def _register_all(runtime: AgentRuntime, workflow: Workflow) -> None:
    if workflow.placement == "run":
        executors = workflow.executors
        await runtime.register_factory(workflow._actor_types[""], lambda: RunActor(executors))
        return
    for eid, agent_type in workflow._actor_types.items():
        if eid:
            await runtime.register_factory(agent_type, _factory(workflow.executors[eid]))


def _factory(executor: Executor) -> Callable[[], BaseAgent]:
    return lambda: ExecutorActor(executor)


_registered: weakref.WeakKeyDictionary[Any, dict[str, asyncio.Future[None]]] = (
    weakref.WeakKeyDictionary()
)


async def _register_once(runtime: AgentRuntime, workflow: Workflow) -> None:
    """Register a workflow's actor factories on a shared runtime once, even under races."""
    known = _registered.setdefault(runtime, {})
    pending = known.get(workflow.uid)
    if pending is not None:
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


def _executor_dispatch(runtime: AgentRuntime, workflow: Workflow, run_id: str) -> Dispatch:
    send = runtime.send_message
    ids = {eid: AgentId(t, run_id) for eid, t in workflow._actor_types.items() if eid}

    async def one(inv: Invocation) -> StepResult:
        result: StepResult = await send(
            inv, ids[inv.executor_id], cancellation_token=inv.cancellation_token
        )
        return result

    async def each(invocations: list[Invocation]) -> list[Outcome]:
        # like the run placement: a failure cancels the invocations still running
        return await gather_eager([(one(inv), False) for inv in invocations])

    return each


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
        status: RunStatus = await runtime.send_message(
            DriveRun(runner, sink, resumed_from),
            AgentId(workflow._actor_types[""], run_id),
            cancellation_token=token,
        )
        return status
    runner.dispatch = _executor_dispatch(runtime, workflow, run_id)
    return await runner.drive(sink, resumed_from=resumed_from)


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
        return await _drive_on(runtime, runner, sink, resumed_from, cancellation_token)
    local = LocalRuntime(dedup_window=0)
    await local.start()
    try:
        await _register_all(local, runner.workflow)
        return await _drive_on(local, runner, sink, resumed_from, cancellation_token)
    finally:
        await local.close()
