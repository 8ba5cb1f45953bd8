"""`WorkflowGraph`: a workflow's checked, immutable graph, below the modules that run it.

The runner, placement, checkpointing and drawing modules read a workflow's graph (its
executors, edges, wiring, name) and nothing of the ways to run it, which `Workflow` (a
`WorkflowGraph`) adds on top and which import those modules. Holding the graph here lets
every arrow among them point one way (tests/test_layers.py counts every import, typing
ones included, when it looks for circles).
"""

from __future__ import annotations

import hashlib
import re
import types
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from ..core import ConfigurationError, new_id
from .actor import Wiring
from .edges import EdgeGroup
from .executor import Executor

if TYPE_CHECKING:
    from .checkpoint_store import CheckpointStore

__all__ = ["Placement", "WorkflowGraph"]

Placement: TypeAlias = Literal["run", "executor"]
"""Where a workflow's executors run: one actor per run, or one per executor (placement.py)."""

_SAFE = re.compile(r"[^\w\-.]")


def _wiring(
    executor: Executor, targets: frozenset[str], output_from: frozenset[str] | None
) -> Wiring:
    """An executor's place in the graph, with the output rules of `WorkflowBuilder`."""
    if output_from is None:
        answers = executor._answers_as_output() and not targets
        return Wiring(targets, True, answers)
    chosen = executor.id in output_from
    return Wiring(targets, chosen, chosen and executor._answers_as_output())


def _actor_types(name: str, uid: str, executors: Mapping[str, Executor]) -> dict[str, str]:
    base = f"wf.{_SAFE.sub('_', name)[:40]}.{uid}"
    found = {"": f"{base}.run"}
    found.update({eid: f"{base}.{i}" for i, eid in enumerate(executors)})
    return found


class WorkflowGraph:
    """A checked, immutable graph of executors: what a run reads of its workflow.

    `Workflow` is this graph with the ways to run it; the runner, placement, checkpointing
    and drawing modules take the graph, so they import nothing that runs a workflow.
    """

    def __init__(
        self,
        *,
        executors: dict[str, Executor],
        groups: tuple[EdgeGroup, ...],
        start_id: str,
        name: str,
        description: str = "",
        max_supersteps: int = 100,
        checkpoint_store: CheckpointStore | None = None,
        placement: Placement = "run",
        output_from: frozenset[str] | None = None,
        event_timeout: float = 30.0,
    ) -> None:
        self.placement: Placement = placement
        self.event_timeout = event_timeout
        """Seconds a run waits for an executor's published events after its result."""
        self.output_from = output_from
        """Ids of the executors whose outputs are the workflow's (None: the default, see
        `WorkflowBuilder`)."""
        self._by_id: dict[str, Executor] = dict(executors)
        """The executors by id, as a plain dict: the runner's lookups, one per delivery."""
        self.executors: Mapping[str, Executor] = types.MappingProxyType(self._by_id)
        self.edge_groups = groups
        self.start_id = start_id
        self.name = name
        self.description = description
        self.max_supersteps = max_supersteps
        self.checkpoint_store = checkpoint_store
        self.uid = new_id()[:12]
        out: dict[str, list[EdgeGroup]] = {}
        targets: dict[str, set[str]] = {eid: set() for eid in executors}
        for group in groups:
            for source in group.sources:
                out.setdefault(source, []).append(group)
                targets[source].update(group.targets)
        self._out_groups: Mapping[str, tuple[EdgeGroup, ...]] = {
            k: tuple(v) for k, v in out.items()
        }
        self._wiring: Mapping[str, Wiring] = {
            eid: _wiring(ex, frozenset(targets[eid]), output_from) for eid, ex in executors.items()
        }
        self._fan_ins = tuple(g for g in groups if g.kind == "fan_in")
        wiring = ";".join(
            f"{g.id}:{g.kind}:{','.join(g.sources)}>{','.join(g.targets)}" for g in groups
        )
        self._graph = hashlib.sha256(wiring.encode()).hexdigest()[:16]
        """A fingerprint of the edges: a checkpoint resumes only a workflow wired the same."""
        self._seeders = tuple(
            ex for ex in executors.values() if type(ex)._initial_logs is not Executor._initial_logs
        )
        self._actor_types = _actor_types(self.name, self.uid, executors)
        """Actor types (placement.py): ``""`` for the run actor, executor ids for the others."""
        self._frozen = True

    def __setattr__(self, name: str, value: Any) -> None:
        if getattr(self, "_frozen", False):
            raise ConfigurationError(
                f"workflow {self.name!r} is an immutable definition: build a new one with "
                f"WorkflowBuilder instead of setting {name!r}"
            )
        object.__setattr__(self, name, value)

    @property
    def start_executor(self) -> Executor:
        """The executor that takes the run's input."""
        return self.executors[self.start_id]

    @property
    def input_types(self) -> list[Any]:
        """What `run()` accepts: the start executor's input types."""
        return self.start_executor.input_types

    @property
    def output_types(self) -> list[Any]:
        """The types executors declare they yield as workflow outputs."""
        seen: list[Any] = []
        for ex in self.executors.values():
            seen.extend(t for t in ex.workflow_output_types if t not in seen)
        return seen

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, executors={list(self.executors)})"
