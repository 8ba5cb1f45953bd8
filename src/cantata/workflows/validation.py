"""Checks `build()` runs: type-compatible edges, fan-ins that can take a list, reachability,
no edge drawn twice, outputs chosen from executors the graph has.

An executor that declares no sent types (no ``WorkflowContext[...]`` parameters, no return
annotation) is not checked on its out-edges: nothing is known to contradict. `Any`, unions
and generics are compared generously (see `_typing.could_accept`). Every error is a
`WorkflowValidationError` carrying the executor ids and types involved.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from ._typing import could_accept, names
from .edges import EdgeGroup
from .errors import WorkflowValidationError
from .executor import Executor

__all__ = ["validate"]


def validate(
    executors: Mapping[str, Executor],
    groups: tuple[EdgeGroup, ...],
    start: str,
    output_from: Collection[str] | None = None,
) -> None:
    """Raise `WorkflowValidationError` for a graph that could never run as drawn."""
    for ex in executors.values():
        if not ex.input_types:
            raise WorkflowValidationError(
                f"executor {ex.id!r} ({type(ex).__qualname__}) has no handler; mark a method "
                "with @handler",
                problem="no_handler",
                executor_ids=[ex.id],
            )
    _check_duplicates(groups)
    for group in groups:
        if group.kind == "fan_in":
            _check_fan_in(executors, group)
        else:
            source = executors[group.sources[0]]
            for target in dict.fromkeys(group.targets):
                _check_edge(source, executors[target])
    _check_reachable(executors, groups, start)
    if output_from is not None:
        unknown = sorted(set(output_from) - set(executors))
        if unknown:
            raise WorkflowValidationError(
                f"output_from names executors {unknown} that the workflow does not have; its "
                f"executors are {sorted(executors)}",
                problem="unknown_output_executor",
                executor_ids=unknown,
            )


def _pairs(group: EdgeGroup) -> list[tuple[str, str]]:
    """The (source, target) edges of a group; a switch may name a target in two branches
    (only one branch is taken per message), so its targets count once."""
    if group.kind == "fan_in":
        return [(s, group.targets[0]) for s in group.sources]
    targets = dict.fromkeys(group.targets) if group.kind == "switch" else group.targets
    return [(group.sources[0], t) for t in targets]


def _check_duplicates(groups: tuple[EdgeGroup, ...]) -> None:
    """An edge drawn twice would deliver each message twice: refuse it."""
    seen: dict[tuple[str, str], EdgeGroup] = {}
    for group in groups:
        for pair in _pairs(group):
            first = seen.get(pair)
            if first is not None:
                where = (
                    "twice in one group"
                    if first is group
                    else f"in {first.describe()} and again in {group.describe()}"
                )
                raise WorkflowValidationError(
                    f"the edge {pair[0]!r} -> {pair[1]!r} is drawn {where}; each message "
                    "would be delivered twice: draw it once (combine conditions into one)",
                    problem="duplicate_edge",
                    executor_ids=pair,
                )
            seen[pair] = group


def _check_edge(source: Executor, target: Executor) -> None:
    sent = source.output_types
    if not sent:
        return
    if any(could_accept(t, s) for s in sent for t in target.input_types):
        return
    raise WorkflowValidationError(
        f"edge {source.id!r} -> {target.id!r} can never carry a message: {source.id!r} sends "
        f"{names(sent)} but {target.id!r} takes {names(target.input_types)}; add a handler "
        "for one of the sent types, or change what the source sends",
        problem="incompatible_edge",
        executor_ids=[source.id, target.id],
        types=[*sent, *target.input_types],
    )


def _check_fan_in(executors: Mapping[str, Executor], group: EdgeGroup) -> None:
    target = executors[group.targets[0]]
    sent: list[Any] = []
    for source_id in group.sources:
        sent.extend(executors[source_id].output_types)
    candidates = [list[s] for s in sent] or [list[Any]]  # type: ignore[valid-type]
    if any(could_accept(t, c) for c in candidates for t in target.input_types):
        return
    raise WorkflowValidationError(
        f"fan-in {list(group.sources)} -> {target.id!r} delivers a list "
        f"(of {names(sent) if sent else 'what the sources send'}) but {target.id!r} takes "
        f"{names(target.input_types)}; give it a handler taking a list, e.g. list[Any]",
        problem="fan_in_type",
        executor_ids=[*group.sources, target.id],
        types=[*sent, *target.input_types],
    )


def _check_reachable(
    executors: Mapping[str, Executor], groups: tuple[EdgeGroup, ...], start: str
) -> None:
    out: dict[str, set[str]] = {}
    for group in groups:
        for source in group.sources:
            out.setdefault(source, set()).update(group.targets)
    seen = {start}
    frontier = [start]
    while frontier:
        node = frontier.pop()
        for nxt in out.get(node, ()):
            if nxt not in seen:
                seen.add(nxt)
                frontier.append(nxt)
    unreachable = sorted(set(executors) - seen)
    if unreachable:
        raise WorkflowValidationError(
            f"executors {unreachable} cannot be reached from the start executor {start!r}; "
            "connect them with an edge or remove them",
            problem="unreachable",
            executor_ids=[start, *unreachable],
        )
