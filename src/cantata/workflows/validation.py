"""Checks `build()` runs: type-compatible edges, fan-ins that can take a list, reachability.

An executor that declares no sent types (no ``WorkflowContext[...]`` parameters, no return
annotation) is not checked on its out-edges: nothing is known to contradict. `Any`, unions
and generics are compared generously (see `_typing.could_accept`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core import ConfigurationError
from ._typing import could_accept, names
from .edges import EdgeGroup
from .executor import Executor

__all__ = ["validate"]


def validate(executors: Mapping[str, Executor], groups: tuple[EdgeGroup, ...], start: str) -> None:
    """Raise `ConfigurationError` for a graph that could never run as drawn."""
    for ex in executors.values():
        if not ex.input_types:
            raise ConfigurationError(
                f"executor {ex.id!r} ({type(ex).__qualname__}) has no handler; mark a method "
                "with @handler"
            )
    for group in groups:
        if group.kind == "fan_in":
            _check_fan_in(executors, group)
        else:
            source = executors[group.sources[0]]
            for target in group.targets:
                _check_edge(source, executors[target])
    _check_reachable(executors, groups, start)


def _check_edge(source: Executor, target: Executor) -> None:
    sent = source.output_types
    if not sent:
        return
    if any(could_accept(t, s) for s in sent for t in target.input_types):
        return
    raise ConfigurationError(
        f"edge {source.id!r} -> {target.id!r} can never carry a message: {source.id!r} sends "
        f"{names(sent)} but {target.id!r} takes {names(target.input_types)}; add a handler "
        "for one of the sent types, or change what the source sends"
    )


def _check_fan_in(executors: Mapping[str, Executor], group: EdgeGroup) -> None:
    target = executors[group.targets[0]]
    sent: list[Any] = []
    for source_id in group.sources:
        sent.extend(executors[source_id].output_types)
    candidates = [list[s] for s in sent] or [list[Any]]  # type: ignore[valid-type]
    if any(could_accept(t, c) for c in candidates for t in target.input_types):
        return
    raise ConfigurationError(
        f"fan-in {list(group.sources)} -> {target.id!r} delivers a list "
        f"(of {names(sent) if sent else 'what the sources send'}) but {target.id!r} takes "
        f"{names(target.input_types)}; give it a handler taking a list, e.g. list[Any]"
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
        raise ConfigurationError(
            f"executors {unreachable} cannot be reached from the start executor {start!r}; "
            "connect them with an edge or remove them"
        )
