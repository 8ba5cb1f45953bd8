"""Edges: how a message sent by one executor reaches others.

Four kinds of edge group cover every shape: a single edge (optionally conditional), a
fan-out (to all targets or to a selection computed from the message), a fan-in (the target
receives a list once every source has delivered) and a switch/case with a default.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..core import WorkflowError

__all__ = ["Case", "Default", "EdgeGroup"]

Condition = Callable[[Any], bool]
Selection = Callable[[Any, list[str]], Sequence[str]]
EdgeKind = Literal["single", "fan_out", "fan_in", "switch"]


@dataclass(frozen=True, slots=True)
class Case:
    """A branch of a switch: messages for which `condition` is true go to `target`."""

    condition: Condition
    target: Any


@dataclass(frozen=True, slots=True)
class Default:
    """The branch of a switch taken when no case matches."""

    target: Any


@dataclass(frozen=True, slots=True)
class EdgeGroup:
    """One group of edges of a built workflow, by executor id (immutable)."""

    kind: EdgeKind
    sources: tuple[str, ...]
    targets: tuple[str, ...]
    condition: Condition | None = None
    selection: Selection | None = None
    conditions: tuple[Condition, ...] = ()
    """For a switch: one condition per target, the last target being the default."""
    id: str = ""

    def route(self, message: Any, target_id: str | None) -> list[str]:
        """The targets a message sent from a source of this group goes to (not for fan-in)."""
        kind = self.kind
        if kind == "single":
            target = self.targets[0]
            if target_id is not None and target_id != target:
                return []
            if self.condition is not None and not self.condition(message):
                return []
            return [target]
        if kind == "fan_out":
            chosen: Sequence[str] = self.targets
            if self.selection is not None:
                chosen = self.selection(message, list(self.targets))
                unknown = [t for t in chosen if t not in self.targets]
                if unknown:
                    raise WorkflowError(
                        f"the selection of the fan-out from {self.sources[0]!r} chose "
                        f"{unknown}, which are not among its targets {list(self.targets)}"
                    )
            if target_id is not None:
                return [t for t in chosen if t == target_id]
            return list(chosen)
        if kind == "switch":
            for condition, target in zip(self.conditions, self.targets, strict=False):
                if condition(message):
                    return [target] if target_id in (None, target) else []
            default = self.targets[-1]
            return [default] if target_id in (None, default) else []
        return []

    def describe(self) -> str:
        """A short text for errors and drawings."""
        return f"{self.kind} {list(self.sources)} -> {list(self.targets)}"
