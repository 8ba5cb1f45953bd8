"""The superstep runner: the one loop every workflow run goes through.

In a superstep, every executor with pending messages (or answers) runs concurrently, each
through its actor (see `actor.py`). At the boundary the runner commits what they did, in a
fixed order: shared state and executor state, log entries, outputs, requests for input,
then routes what they sent over the edges into the next superstep's deliveries (fan-in
buffers fill and fire here). Then it checkpoints, when a store is configured.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import types
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..core import CancellationToken, CancelledError, RunStopped, WorkflowError, new_id, tracing
from ._typing import type_name
from .actor import Invocation
from .context import UNSET, PendingRequest, StepResult
from .edges import EdgeGroup
from .events import (
    RunStatus,
    StatusEvent,
    SuperstepCompletedEvent,
    SuperstepStartedEvent,
    WarningEvent,
    WorkflowEvent,
    WorkflowFailedEvent,
    WorkflowStartedEvent,
)
from .journal import EffectJournal, journal_of

if TYPE_CHECKING:
    from .checkpoint_store import CheckpointStore
    from .graph import WorkflowGraph

__all__ = ["Delivery", "RunState", "Runner"]

_log = logging.getLogger("cantata.workflows")

Dispatch = Callable[[list[Invocation]], Awaitable[list["StepResult | BaseException"]]]
Sink = Callable[[WorkflowEvent], None]


@dataclass(slots=True)
class Delivery:
    """A message on its way to an executor, delivered in the next superstep."""

    target: str
    message: Any
    sources: list[str]


@dataclass
class RunState:
    """Everything a run has committed; what a checkpoint saves and a resume restores."""

    run_id: str
    state: dict[str, Any] = field(default_factory=dict)
    executor_states: dict[str, Any] = field(default_factory=dict)
    logs: dict[str, list[Any]] = field(default_factory=dict)
    """Append-only logs by ``"<executor id>/<name>"`` (``"*/<name>"`` for shared ones)."""
    outputs: list[Any] = field(default_factory=list)
    pending: list[Delivery] = field(default_factory=list)
    fan_in: dict[str, dict[str, list[Any]]] = field(default_factory=dict)
    requests: dict[str, PendingRequest] = field(default_factory=dict)
    answers: list[tuple[PendingRequest, Any]] = field(default_factory=list)
    superstep: int = 0
    status: RunStatus = "idle"
    # bookkeeping for incremental checkpoints (see checkpointing.py)
    checkpoint_id: str | None = None
    branch: str = field(default_factory=lambda: new_id()[:12])
    dirty_state: set[str] = field(default_factory=set)
    dirty_executors: set[str] = field(default_factory=set)
    state_refs: dict[str, str] = field(default_factory=dict)
    executor_refs: dict[str, str] = field(default_factory=dict)
    segments: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    saved: dict[str, int] = field(default_factory=dict)


class Runner:
    """Drives one run of a workflow from its pending work until it is idle."""

    def __init__(
        self,
        workflow: WorkflowGraph,
        run: RunState,
        *,
        dispatch: Dispatch | None,
        store: CheckpointStore | None,
        kwargs: Mapping[str, Mapping[str, Any]],
        streaming: bool,
        cancellation_token: CancellationToken,
        observed: bool = True,
        journal: EffectJournal | None = None,
    ) -> None:
        self.workflow = workflow
        self.run = run
        self.dispatch = dispatch
        """How a superstep's invocations reach the executors; set by the host (placement)."""
        self._store = store
        self._journal = journal if journal is not None else journal_of(store)
        """Where effects and model answers are journaled (a replay gives its own)."""
        self._kwargs = kwargs
        self._streaming = streaming
        self._token = cancellation_token
        self._observed = observed
        """Whether the sink consumes events: when not, superstep and executor events are
        not made at all (a result needs only outputs, status, requests and a failure)."""
        self._direct: dict[tuple[str, str], EdgeGroup | None] = {}
        """By (source, target): the one edge a message sent to that target can take, when
        it is a plain single edge (None: route through every group of the source)."""

    async def drive(self, sink: Sink, *, resumed_from: str | None = None) -> RunStatus:
        """Run supersteps until nothing is pending (see `_drive`), in a span when traced."""
        attributes = {
            "cantata.workflow.name": self.workflow.name,
            "cantata.run_id": self.run.run_id,
            "cantata.resumed_from": resumed_from,
        }
        with tracing.span(f"workflow {self.workflow.name}", attributes):
            return await self._drive(sink, resumed_from=resumed_from)

    async def _drive(self, sink: Sink, *, resumed_from: str | None = None) -> RunStatus:
        """Run supersteps until nothing is pending; return the final status.

        `max_supersteps` bounds each call (a run that waits for people may take many calls).

        A failed executor fails the run: a `WorkflowFailedEvent` is emitted and a
        `WorkflowError` naming the executor is raised. Other errors (a checkpoint that cannot
        be written, say) are raised as they are.
        """
        run = self.run
        sink(WorkflowStartedEvent(run.run_id, resumed_from))
        run.status = "in_progress"
        sink(StatusEvent("in_progress"))
        steps = 0
        _log.debug(
            "workflow %r run %r: driving from superstep %d (resumed from %s)",
            self.workflow.name,
            run.run_id,
            run.superstep,
            resumed_from,
        )
        try:
            if run.superstep == 0 and self.workflow._seeders:
                await self._seed_logs()
            if run.superstep == 0 and run.checkpoint_id is None and self._store is not None:
                await self._entry_checkpoint(self._store)
            while run.pending or run.answers:
                self._token.raise_if_cancelled()
                if steps >= self.workflow.max_supersteps:
                    raise WorkflowError(self._no_convergence())
                steps += 1
                if tracing.enabled():
                    with tracing.span(
                        f"superstep {run.superstep + 1}",
                        {"cantata.run_id": run.run_id, "cantata.superstep": run.superstep + 1},
                    ):
                        await self._superstep(sink)
                else:
                    await self._superstep(sink)
        except (CancelledError, asyncio.CancelledError):
            run.status = "cancelled"
            sink(StatusEvent("cancelled"))
            if not self._token.is_cancelled:
                raise
            return run.status
        except BaseException as exc:
            run.status = "failed"
            from_executor = getattr(exc, "__cantata_executor__", None) is not None
            # a check that stopped the run on purpose (a guardrail, a usage limit) reaches
            # the caller as itself, as it does from an agent
            kept = isinstance(exc, (WorkflowError, RunStopped))
            error = _wrap(exc) if from_executor and not kept else exc
            where = getattr(error, "executor_id", None) or getattr(
                exc, "__cantata_executor__", None
            )
            sink(WorkflowFailedEvent(error, where))
            sink(StatusEvent("failed"))
            _log.debug("workflow %r run %r failed: %s", self.workflow.name, run.run_id, error)
            if error is exc:
                raise
            raise error from exc
        run.status = "idle_with_pending_requests" if run.requests else "idle"
        sink(StatusEvent(run.status))
        _log.debug(
            "workflow %r run %r: %s after superstep %d (%d outputs, %d requests pending)",
            self.workflow.name,
            run.run_id,
            run.status,
            run.superstep,
            len(run.outputs),
            len(run.requests),
        )
        return run.status

    async def _entry_checkpoint(self, store: CheckpointStore) -> None:
        """Save a new run before its first superstep, input included, so that it can be
        replayed from its raw input (lineage: entry, then one per superstep)."""
        from .checkpointing import save_checkpoint

        checkpoint_id = await save_checkpoint(self.workflow, self.run, store)
        _log.debug("workflow run %r: entry checkpoint %s", self.run.run_id, checkpoint_id)

    async def _seed_logs(self) -> None:
        """Start a new run's logs with what its executors seed (the first one wins)."""
        logs = self.run.logs
        for ex in self.workflow._seeders:
            for key, entries in (await ex._initial_logs()).items():
                if key not in logs:
                    logs[key] = list(entries)

    def _no_convergence(self) -> str:
        targets = sorted({d.target for d in self.run.pending})
        return (
            f"workflow {self.workflow.name!r} did not converge within "
            f"{self.workflow.max_supersteps} supersteps (executors {targets} still had "
            "messages); check the cycle's exit condition or raise max_supersteps"
        )

    # -- one superstep -----------------------------------------------------------------

    def _superstep(self, sink: Sink) -> Awaitable[None]:
        """The next superstep: its invocations, then `_execute` them. A plain function: in a
        run nobody observes and nothing checkpoints, the superstep is that one coroutine,
        without the `_step` around it (which has nothing to do then)."""
        run = self.run
        run.superstep += 1
        batches: dict[str, Invocation] = {}
        pending = run.pending
        if len(pending) == 1 and not run.answers:  # a chain or a turn token: one executor
            d = pending[0]
            inv = self._invocation(batches, d.target, sink)
            inv.items.append((d.message, d.sources))
            invocations = [inv]
        else:
            for request, answer in run.answers:
                inv = self._invocation(batches, request.executor_id, sink)
                inv.answers.append((request, answer))
            get = batches.get
            for d in pending:  # one per delivery: a fan-out of a hundred makes a hundred
                found = get(d.target)
                if found is None:
                    found = self._invocation(batches, d.target, sink)
                found.items.append((d.message, d.sources))
            run.answers = []
            invocations = list(batches.values())
        run.pending = []
        if not self._observed and self._store is None:
            return self._execute(invocations, sink)
        return self._step(invocations, sink)

    async def _step(self, invocations: list[Invocation], sink: Sink) -> None:
        """A superstep someone observes or a store checkpoints: its events around
        `_execute`, and the checkpoint after it."""
        run = self.run
        if self._observed:
            sink(SuperstepStartedEvent(run.superstep, [inv.executor_id for inv in invocations]))
        await self._execute(invocations, sink)
        checkpoint_id = None
        if self._store is not None:
            from .checkpointing import save_checkpoint

            checkpoint_id = await save_checkpoint(self.workflow, run, self._store)
            _log.debug("workflow run %r: checkpoint %s", run.run_id, checkpoint_id)
        if self._observed:
            sink(SuperstepCompletedEvent(run.superstep, checkpoint_id))

    async def _execute(self, invocations: list[Invocation], sink: Sink) -> None:
        """Execute a superstep's invocations and commit what they did: the one step path of
        every run, whichever placement dispatches them (in process or copied as values)."""
        run = self.run
        debug = _log.isEnabledFor(logging.DEBUG)
        if debug:
            _log.debug(
                "workflow run %r: superstep %d starts, executors %s",
                run.run_id,
                run.superstep,
                [inv.executor_id for inv in invocations],
            )
        assert self.dispatch is not None, "the placement sets dispatch before driving"
        try:
            outcomes = await self.dispatch(invocations)
            if len(outcomes) != 1 or type(outcomes[0]) is not StepResult:
                failure = _first_failure(invocations, outcomes)
                if failure is not None:
                    raise failure
            self._commit(outcomes, sink)  # type: ignore[arg-type]  # no exception among them
        except BaseException:
            # Nothing of a failed or cancelled superstep is committed, so the run stays as it
            # was at the boundary (as its last checkpoint has it): its messages can be
            # delivered again (`continue_run`) and its answered requests answered again.
            # (Rebuilt from the invocations: holding the old list through the superstep
            # would keep garbage alive and make the collector work harder on every run.)
            run.superstep -= 1
            run.pending = [
                Delivery(inv.executor_id, message, sources)
                for inv in invocations
                for message, sources in inv.items
            ]
            for inv in invocations:
                for request, _ in inv.answers:
                    run.requests[request.request_id] = request
            raise
        if debug:
            _log.debug(
                "workflow run %r: superstep %d committed (%d deliveries next)",
                run.run_id,
                run.superstep,
                len(run.pending),
            )

    def _invocation(self, batches: dict[str, Invocation], target: str, sink: Sink) -> Invocation:
        inv = batches.get(target)
        if inv is None:
            run = self.run
            inv = Invocation(  # positional: one per executor per superstep
                run.run_id,
                target,
                [],
                [],
                run.state,
                run.executor_states.get(target),
                run.logs,
                self.workflow._wiring[target],
                self._kwargs.get(target, _EMPTY),
                self._streaming,
                sink,
                self._token,
                self._observed,
                run.superstep,
                self._journal,
            )
            batches[target] = inv
        return inv

    # -- the boundary ------------------------------------------------------------------

    def _commit(self, results: list[StepResult], sink: Sink) -> None:
        run = self.run
        # Route first: an edge condition or selection may raise, and then nothing of the
        # superstep may be committed. What follows the routing cannot fail.
        routed: list[Delivery] = []
        buffered: list[tuple[str, str, Any]] = []
        warnings: list[WarningEvent] = []
        for res in results:
            for message, target_id in res.sent:
                self._route(res.executor_id, message, target_id, routed, buffered, warnings)
        for res in results:
            eid = res.executor_id
            if res.state_writes:
                run.state.update(res.state_writes)
                run.dirty_state.update(res.state_writes)
            if res.executor_state is not UNSET:  # replaced by the handler
                run.executor_states[eid] = res.executor_state
                run.dirty_executors.add(eid)
            if res.log_appends:
                for key, entries in res.log_appends.items():
                    if entries:
                        run.logs.setdefault(key, []).extend(entries)
            if res.outputs:
                run.outputs.extend(res.outputs)
            for request in res.requests:
                run.requests[request.request_id] = request
        run.pending.extend(routed)
        for group_id, source, message in buffered:
            run.fan_in.setdefault(group_id, {}).setdefault(source, []).append(message)
        for warning in warnings:
            _log.warning("workflow run %r: %s", run.run_id, warning.message)
            sink(warning)
        if self.workflow._fan_ins:
            self._fire_fan_ins(sink)

    def _route(
        self,
        source: str,
        message: Any,
        target_id: str | None,
        routed: list[Delivery],
        buffered: list[tuple[str, str, Any]],
        warnings: list[WarningEvent],
    ) -> None:
        wf = self.workflow
        if target_id is not None:  # a star sends to one of its targets: one edge to take
            key = (source, target_id)
            direct = self._direct.get(key, _UNKNOWN)
            if direct is _UNKNOWN:
                direct = self._direct[key] = _direct_edge(wf._out_groups.get(source, ()), target_id)
            if direct is not None:
                ex = wf._by_id[target_id]
                if type(message) in ex._exact or ex.can_handle(message):
                    routed.append(Delivery(target_id, message, [source]))
                    return
        groups = wf._out_groups.get(source, ())
        if not groups and target_id is None:
            # a terminal executor (an agent whose answer is the run's output) sends by habit
            _log.debug(
                "workflow run %r: a %s sent by %r is dropped: %r has no out-edges",
                self.run.run_id,
                type_name(type(message)),
                source,
                source,
            )
            return
        delivered = False
        for group in groups:
            kind = group.kind
            if kind == "single" and target_id is not None and target_id != group.targets[0]:
                continue  # what `route` answers, without the call (a star sends one of many)
            if kind == "fan_in":
                if target_id is None or target_id == group.targets[0]:
                    buffered.append((group.id, source, message))
                    delivered = True
                continue
            try:
                targets = group.route(message, target_id)
            except WorkflowError:
                raise
            except Exception as exc:
                raise WorkflowError(
                    f"the {_edge_name(group)} raised {type(exc).__name__}: {exc} on a "
                    f"{type_name(type(message))} sent by {source!r}; nothing of the superstep "
                    "was committed: fix the function (it must return for every message)"
                ) from exc
            for target in targets:
                ex = wf._by_id[target]
                if type(message) in ex._exact or ex.can_handle(message):
                    routed.append(Delivery(target, message, [source]))
                    delivered = True
        if not delivered:
            where = f"to {target_id!r}" if target_id else "on any out-edge"
            warnings.append(
                WarningEvent(
                    f"a {type_name(type(message))} sent by {source!r} was not delivered "
                    f"{where}: no condition matched or no target takes that type",
                    source,
                )
            )

    def _fire_fan_ins(self, sink: Sink) -> None:
        wf = self.workflow
        for group in wf._fan_ins:
            buffers = self.run.fan_in.get(group.id)
            if not buffers or any(s not in buffers for s in group.sources):
                continue
            collected = [m for s in group.sources for m in buffers[s]]
            del self.run.fan_in[group.id]
            # build() checked that the target takes a list; its handler is chosen on delivery
            self.run.pending.append(Delivery(group.targets[0], collected, list(group.sources)))


_EMPTY: Mapping[str, Any] = types.MappingProxyType({})
_UNKNOWN: Any = object()


def _direct_edge(groups: tuple[EdgeGroup, ...], target_id: str) -> EdgeGroup | None:
    """The edge a message sent to `target_id` takes when routing it through `groups` could
    do nothing else: every group is a single edge or a fan-in into another target (no
    condition, selection or case is called for other targets), and exactly one of them is
    an unconditional single edge to `target_id`. None otherwise."""
    found: EdgeGroup | None = None
    for group in groups:
        if group.kind == "fan_in":
            if group.targets[0] == target_id:
                return None
            continue
        if group.kind != "single":
            return None
        if group.targets[0] == target_id:
            if found is not None or group.condition is not None:
                return None
            found = group
    return found


def _edge_name(group: EdgeGroup) -> str:
    source = group.sources[0]
    if group.kind == "single":
        return f"condition of edge {source!r} -> {group.targets[0]!r}"
    if group.kind == "switch":
        return f"switch from {source!r} to {list(group.targets)} (a case condition)"
    return f"selection of the fan-out from {source!r} to {list(group.targets)}"


def _wrap(exc: BaseException) -> WorkflowError:
    executor_id = getattr(exc, "__cantata_executor__", None)
    where = f"executor {executor_id!r}" if executor_id else "the workflow"
    error = WorkflowError(f"{where} failed: {type(exc).__name__}: {exc}")
    error.executor_id = executor_id  # type: ignore[attr-defined]
    return error


def _first_failure(
    invocations: list[Invocation], outcomes: list[StepResult | BaseException]
) -> BaseException | None:
    """The error to fail the superstep with: the first that is not a cancellation (siblings
    of a failed executor are cancelled, and the run must fail with the cause, not end
    cancelled), else the first cancellation."""
    cancelled: BaseException | None = None
    for inv, outcome in zip(invocations, outcomes, strict=True):
        if isinstance(outcome, BaseException):  # rare: one check for the usual results
            if not isinstance(outcome, _CANCELLED):
                return _tag(outcome, inv.executor_id)
            cancelled = cancelled or outcome
    return cancelled


_CANCELLED = (CancelledError, asyncio.CancelledError)


def _tag(exc: BaseException, executor_id: str) -> BaseException:
    """Remember which executor raised, for the error and the failed event."""
    if isinstance(exc, WorkflowError) and getattr(exc, "executor_id", None) is None:
        exc.executor_id = executor_id  # type: ignore[attr-defined]
    elif not isinstance(exc, CancelledError | asyncio.CancelledError):
        with contextlib.suppress(AttributeError):
            exc.__cantata_executor__ = executor_id  # type: ignore[attr-defined]
    return exc
