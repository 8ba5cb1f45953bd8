"""`WorkflowBuilder`: describe the graph, then `build()` an immutable, checked `Workflow`."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..agents import Guardrail
from ..core import ConfigurationError
from ..core.retry import RetryPolicy
from .edges import Case, Condition, Default, EdgeGroup, Selection
from .errors import WorkflowValidationError
from .executor import Executor
from .executor_guard import guard_executor
from .validation import validate

if TYPE_CHECKING:
    from .checkpoint_store import CheckpointStore
    from .placement import Placement
    from .workflow import Workflow

__all__ = ["WorkflowBuilder"]


def _wrap_agent(candidate: Any) -> Executor | None:
    """An `AgentExecutor` for an agent, or None when `candidate` is not an agent."""
    try:
        from ..agents import Agent
    except ImportError:  # pragma: no cover - the agents layer is always installed
        return None
    if isinstance(candidate, Agent):
        from .agent_executor import AgentExecutor

        wrapped: Executor = AgentExecutor(candidate)
        return wrapped
    return None


class WorkflowBuilder:
    """Collects executors and edges; `build()` checks them and returns a `Workflow`.

    Agents may be passed wherever an executor is expected: each is wrapped once in an
    `AgentExecutor` whose id is the agent's name. `placement` says how runs map to actors of
    the runtime (see `cantata.workflows.placement`): one actor per run (``"run"``, fastest)
    or one per executor of a run (``"executor"``, spreads a fan-out). `max_supersteps`
    bounds each call that drives a run (`run`, `send_responses`, `resume`), not the run's
    whole life: a run that waits for people between calls may take any number of steps.

    Outputs: by default, what any executor yields (``ctx.yield_output``) is a workflow
    output, and so is the response of every agent executor without out-edges (the last
    agent of a chain answers the run; pass ``output_response=False`` to its `AgentExecutor`
    to keep it quiet). `output_from` (executors, agents or ids) chooses instead: only those
    executors' yields are outputs, and the agent executors among them output their
    responses.

    `event_timeout` (seconds) bounds how long a run with ``placement="executor"`` on a
    runtime that copies messages waits, once an executor's result is back, for the events
    that executor published: past it, a lost event fails the run instead of hanging it.
    """

    def __init__(
        self,
        start: Executor | Any,
        *,
        name: str | None = None,
        description: str = "",
        max_supersteps: int = 100,
        checkpoint_store: CheckpointStore | None = None,
        placement: Placement = "run",
        output_from: Sequence[Executor | Any] | None = None,
        event_timeout: float = 30.0,
    ) -> None:
        if not event_timeout > 0:
            raise ConfigurationError(
                f"event_timeout must be a positive number of seconds, got {event_timeout!r}"
            )
        self._event_timeout = float(event_timeout)
        if placement not in ("run", "executor"):
            raise ConfigurationError(f"placement must be 'run' or 'executor', not {placement!r}")
        self._placement: Placement = placement
        if max_supersteps < 1:
            raise ConfigurationError(f"max_supersteps must be at least 1, got {max_supersteps}")
        self._executors: dict[str, Executor] = {}
        self._wrapped: dict[int, Executor] = {}
        self._groups: list[EdgeGroup] = []
        self._name = name
        self._description = description
        self._max_supersteps = max_supersteps
        self._checkpoint_store = checkpoint_store
        self._start = self._add(start)
        self._output_from = None if output_from is None else list(output_from)

    def _add(self, candidate: Executor | Any) -> str:
        executor = self._as_executor(candidate)
        known = self._executors.get(executor.id)
        if known is not None and known is not executor:
            raise ConfigurationError(
                f"two different executors share the id {executor.id!r} "
                f"({known!r} and {executor!r}); give each a unique id"
            )
        self._executors[executor.id] = executor
        return executor.id

    def _as_executor(self, candidate: Executor | Any) -> Executor:
        if isinstance(candidate, Executor):
            return candidate
        known = self._wrapped.get(id(candidate))
        if known is not None:
            return known
        wrapped = _wrap_agent(candidate)
        if wrapped is None:
            raise ConfigurationError(
                f"{candidate!r} is neither an Executor nor an Agent; decorate a function with "
                "@executor or subclass Executor"
            )
        self._wrapped[id(candidate)] = wrapped
        return wrapped

    def _group(self, group: EdgeGroup) -> WorkflowBuilder:
        self._groups.append(group)
        return self

    # -- edges -------------------------------------------------------------------------

    def add_edge(
        self, source: Executor | Any, target: Executor | Any, *, condition: Condition | None = None
    ) -> WorkflowBuilder:
        """Connect two executors; with `condition`, only messages it accepts pass."""
        s, t = self._add(source), self._add(target)
        return self._group(EdgeGroup("single", (s,), (t,), condition=condition))

    def add_chain(self, executors: Sequence[Executor | Any]) -> WorkflowBuilder:
        """Connect executors one after another."""
        if len(executors) < 2:
            raise ConfigurationError("add_chain needs at least two executors")
        for a, b in itertools.pairwise(executors):
            self.add_edge(a, b)
        return self

    def add_fan_out_edges(
        self,
        source: Executor | Any,
        targets: Sequence[Executor | Any],
        *,
        selection: Selection | None = None,
    ) -> WorkflowBuilder:
        """Send each message to every target, or to those `selection(message, ids)` returns."""
        if not targets:
            raise ConfigurationError("add_fan_out_edges needs at least one target")
        s = self._add(source)
        ids = tuple(self._add(t) for t in targets)
        return self._group(EdgeGroup("fan_out", (s,), ids, selection=selection))

    def add_fan_in_edges(
        self, sources: Sequence[Executor | Any], target: Executor | Any
    ) -> WorkflowBuilder:
        """Deliver to `target` the list of what every source sent, once all have sent."""
        if not sources:
            raise ConfigurationError("add_fan_in_edges needs at least one source")
        ids = tuple(self._add(s) for s in sources)
        if len(set(ids)) != len(ids):
            twice = sorted({i for i in ids if ids.count(i) > 1})
            raise WorkflowValidationError(
                f"the fan-in sources {list(ids)} name {twice} twice; name each source once",
                problem="duplicate_edge",
                executor_ids=twice,
            )
        t = self._add(target)
        return self._group(EdgeGroup("fan_in", ids, (t,)))

    def add_switch_case_edges(
        self, source: Executor | Any, cases: Sequence[Case | Default]
    ) -> WorkflowBuilder:
        """Route each message to the first `Case` whose condition holds, else to the `Default`."""
        defaults = [c for c in cases if isinstance(c, Default)]
        if len(defaults) != 1 or not isinstance(cases[-1], Default):
            raise ConfigurationError(
                "a switch needs exactly one Default(target), as its last branch"
            )
        s = self._add(source)
        branches = [c for c in cases if isinstance(c, Case)]
        targets = tuple(self._add(t) for t in [*(c.target for c in branches), defaults[0].target])
        conditions: tuple[Callable[[Any], bool], ...] = tuple(c.condition for c in branches)
        return self._group(EdgeGroup("switch", (s,), targets, conditions=conditions))

    # -- build -------------------------------------------------------------------------

    def with_retry(
        self, policy: RetryPolicy, executors: Sequence[Executor | Any] | None = None
    ) -> WorkflowBuilder:
        """Retry the named executors (every one added so far when None) by `policy`: a
        failure of a class it retries (timeouts, rate limits, 5xx, resets by default) runs
        the executor's invocation again within the superstep, after a jittered backoff
        (cancelling the run ends the wait at once); effects it journaled are not repeated.
        A fatal failure fails the run with a `WorkflowError`; a `NeedsPerson` failure (with
        or without a policy) stops the run with a `NeedsPersonRequest` pending."""
        if not isinstance(policy, RetryPolicy):
            raise ConfigurationError(
                f"with_retry takes a cantata.core.retry.RetryPolicy, not {type(policy).__name__}"
            )
        ids = list(self._executors) if executors is None else [self._add(e) for e in executors]
        for eid in ids:
            ex = self._executors[eid]
            ex.retry_policy = policy
            ex._synchronous = False  # a retry waits (its backoff): not in the caller's task
        return self

    def with_guardrails(
        self, guardrails: Sequence[Guardrail], executors: Sequence[Executor | Any]
    ) -> WorkflowBuilder:
        """Check the named executors' input and output with `guardrails` (stages
        ``executor_input`` and ``executor_output``; see `executor_guard`): a replacement is
        what the handler gets or the next executor receives, a tripwire fails the run with
        `GuardrailTripwire`."""
        for eid in [self._add(e) for e in executors]:
            guard_executor(self._executors[eid], guardrails)
        return self

    def build(self) -> Workflow:
        """Check the graph and return the immutable `Workflow`; errors name what is wrong."""
        from .workflow import Workflow

        groups = tuple(
            EdgeGroup(
                g.kind,
                g.sources,
                g.targets,
                condition=g.condition,
                selection=g.selection,
                conditions=g.conditions,
                id=f"g{i}",
            )
            for i, g in enumerate(self._groups)
        )
        output_from = self._output_ids()
        validate(self._executors, groups, self._start, output_from)
        return Workflow(
            executors=dict(self._executors),
            groups=groups,
            start_id=self._start,
            name=self._name or f"workflow-{self._start}",
            description=self._description,
            max_supersteps=self._max_supersteps,
            checkpoint_store=self._checkpoint_store,
            placement=self._placement,
            output_from=output_from,
            event_timeout=self._event_timeout,
        )

    def _output_ids(self) -> frozenset[str] | None:
        """The ids `output_from` names (executors or agents already in the graph, or ids)."""
        if self._output_from is None:
            return None
        ids: list[str] = []
        for item in self._output_from:
            if isinstance(item, str):
                ids.append(item)
            elif isinstance(item, Executor):
                ids.append(item.id)
            elif id(item) in self._wrapped:
                ids.append(self._wrapped[id(item)].id)
            else:
                raise WorkflowValidationError(
                    f"output_from names {item!r}, which is not an executor of this workflow; "
                    "name executors (or agents) that edges connect, or their ids",
                    problem="unknown_output_executor",
                    executor_ids=[str(getattr(item, "name", item))],
                )
        return frozenset(ids)
