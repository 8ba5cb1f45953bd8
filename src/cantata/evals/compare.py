"""Two reports of the same dataset, case by case: what regressed, what improved.

Cases are matched by name. A case regressed when its pass rate fell (over its repeats), or
its mean score fell by more than `score_tolerance`; the evaluators whose pass rate fell are
named, so a reader sees which check broke. A case only in the old report is `removed`, one
only in the new is `added`; neither counts as a regression (a removed case is still shown,
since dropping a failing case is a way to hide one).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from ..core import ConfigurationError
from .report import CaseResult, EvalReport

__all__ = ["CaseChange", "Comparison", "compare_reports"]

Change = Literal["regressed", "improved", "same", "added", "removed"]


@dataclass(frozen=True, slots=True)
class CaseChange:
    """One case across two reports (None for the side it is missing from)."""

    case: str
    change: Change
    old_pass_rate: float | None
    new_pass_rate: float | None
    old_score: float | None
    new_score: float | None
    evaluators: tuple[str, ...] = ()
    """Evaluators whose pass rate fell (for a regression) or rose (an improvement)."""
    failures: tuple[str, ...] = ()
    """Why the new runs failed (for a regression)."""


@dataclass(slots=True)
class Comparison:
    """Every case's change from the old report to the new one."""

    old: EvalReport
    new: EvalReport
    changes: list[CaseChange] = field(default_factory=list)

    def of(self, change: Change) -> list[CaseChange]:
        """The cases with this change."""
        return [c for c in self.changes if c.change == change]

    @property
    def regressions(self) -> list[CaseChange]:
        """The cases that got worse."""
        return self.of("regressed")

    @property
    def has_regressions(self) -> bool:
        """True when any case got worse (`cantata eval --compare` then exits 1)."""
        return any(c.change == "regressed" for c in self.changes)


def _rates(results: Iterable[CaseResult]) -> dict[str, float]:
    seen: dict[str, list[bool]] = {}
    for r in results:
        for s in r.scores:
            seen.setdefault(s.evaluator, []).append(s.passed)
        if r.error is not None:
            seen.setdefault("(run)", []).append(False)
    return {name: sum(v) / len(v) for name, v in seen.items()}


def compare_reports(
    old: EvalReport, new: EvalReport, *, score_tolerance: float = 0.0
) -> Comparison:
    """How each case of `new` changed from `old` (see the module docstring)."""
    if not score_tolerance >= 0:
        raise ConfigurationError(f"score_tolerance must be >= 0, got {score_tolerance!r}")
    eps = score_tolerance + 1e-9
    olds, news = old.cases(), new.cases()
    old_runs: dict[str, list[CaseResult]] = {}
    for r in old.results:
        old_runs.setdefault(r.case, []).append(r)
    new_runs: dict[str, list[CaseResult]] = {}
    for r in new.results:
        new_runs.setdefault(r.case, []).append(r)
    out = Comparison(old, new)
    for name in [*news, *(n for n in olds if n not in news)]:
        a, b = olds.get(name), news.get(name)
        if a is None or b is None:
            out.changes.append(CaseChange(
                name,
                "added" if a is None else "removed",
                None if a is None else a.pass_rate,
                None if b is None else b.pass_rate,
                None if a is None else a.score,
                None if b is None else b.score,
            ))  # fmt: skip
            continue
        before, after = _rates(old_runs[name]), _rates(new_runs[name])
        fell = tuple(e for e, rate in after.items() if rate < before.get(e, 1.0) - 1e-9)
        rose = tuple(e for e, rate in after.items() if e in before and rate > before[e] + 1e-9)
        if b.pass_rate < a.pass_rate - 1e-9 or b.score < a.score - eps:
            change: Change = "regressed"
        elif b.pass_rate > a.pass_rate + 1e-9 or b.score > a.score + eps:
            change = "improved"
        else:
            change = "same"
        out.changes.append(CaseChange(
            name, change, a.pass_rate, b.pass_rate, a.score, b.score,
            fell if change == "regressed" else rose if change == "improved" else (),
            b.failures if change == "regressed" else (),
        ))  # fmt: skip
    return out
