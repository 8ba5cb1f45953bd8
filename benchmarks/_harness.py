"""Shared pieces of the benchmarks: a result row, timing, peer versions, and the summary of
several runs.

Each ``benchmarks/bench_*.py`` module defines ``async def collect(quick: bool) -> list[Row]``.
One call is one run: it measures our figure and, when the peer is installed, the peer's
figure on the same workload in the same run. `run.py` calls it `--repeat` times and
`summarize` turns those runs into the median and the worst of each figure and of the
ratio (the ratio of each run, so the peer is always paired with the run it shared).
Quote ratios, not absolute times: machines are noisy.

A module may set ``MAX_REPEAT = n`` to cap its runs (a benchmark that takes minutes).
"""

from __future__ import annotations

import asyncio
import gc
import re
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from importlib import metadata
from typing import Any

__all__ = [
    "Row",
    "Spread",
    "Summary",
    "best_rate",
    "goal_met",
    "measure",
    "median",
    "peer_version",
    "summarize",
]


@dataclass
class Row:
    """One line of the results table, from one run.

    Rows of several runs are matched by (`name`, `peer_name`), so keep both the same from
    run to run. `headline` rows are printed first, in their own table.
    """

    name: str
    unit: str
    ours: float
    peer: float | None = None
    peer_name: str | None = None
    peer_version: str | None = None
    higher_is_better: bool = True
    goal: str | None = None
    note: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    headline: bool = False

    @property
    def key(self) -> tuple[str, str | None]:
        """What identifies this row across runs."""
        return (self.name, self.peer_name)

    @property
    def ratio(self) -> float | None:
        """How many times better we are than the peer (above 1 means we win)."""
        if self.peer is None or self.peer == 0 or self.ours == 0:
            return None
        return self.ours / self.peer if self.higher_is_better else self.peer / self.ours

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ratio": self.ratio}


@dataclass(frozen=True)
class Spread:
    """The median and the worst of one figure over the runs (None when never measured)."""

    median: float | None
    worst: float | None

    @staticmethod
    def of(values: list[float | None], *, higher_is_better: bool) -> Spread:
        got = [v for v in values if v is not None]
        if not got:
            return Spread(None, None)
        worst = min(got) if higher_is_better else max(got)
        return Spread(statistics.median(got), worst)


@dataclass
class Summary:
    """One row over all its runs: our figure, the peer's, and the per-run ratio, each as
    median and worst; `met` tells whether the goal holds on both (see `goal_met`)."""

    row: Row  # the first run's row: name, unit, peer, goal
    runs: list[Row]
    ours: Spread
    peer: Spread
    ratio: Spread
    module: str = ""
    """The benchmark module the row comes from (``teams`` for bench_teams.py)."""

    @property
    def met(self) -> str:
        """ "yes" (median and worst), "median only", "no", or "" for a goal not checkable."""
        return goal_met(self.row.goal, self.ratio, self.ours, self.row.higher_is_better)

    def to_dict(self) -> dict[str, Any]:
        row = self.row
        return {
            "name": row.name,
            "module": self.module,
            "unit": row.unit,
            "peer_name": row.peer_name,
            "peer_version": row.peer_version,
            "higher_is_better": row.higher_is_better,
            "goal": row.goal,
            "headline": row.headline,
            "runs": len(self.runs),
            "ours": asdict(self.ours),
            "peer": asdict(self.peer),
            "ratio": asdict(self.ratio),
            "met": self.met,
            "each_run": [r.to_dict() for r in self.runs],
        }


def summarize(runs: list[list[Row]], module: str = "") -> list[Summary]:
    """Group the rows of several runs (of benchmark `module`) by row key, in the order they
    first appeared."""
    grouped: dict[tuple[str, str | None], list[Row]] = {}
    for rows in runs:
        for row in rows:
            grouped.setdefault(row.key, []).append(row)
    summaries = []
    for rows in grouped.values():
        first = rows[0]
        better = first.higher_is_better
        summaries.append(
            Summary(
                row=first,
                runs=rows,
                ours=Spread.of([r.ours for r in rows], higher_is_better=better),
                peer=Spread.of([r.peer for r in rows], higher_is_better=better),
                ratio=Spread.of([r.ratio for r in rows], higher_is_better=True),
                module=module,
            )
        )
    return summaries


_GOAL = re.compile(r"^\s*(>=|<=)\s*([0-9][0-9,]*(?:\.[0-9]+)?)\s*(x\b)?")


def goal_met(goal: str | None, ratio: Spread, ours: Spread, higher_is_better: bool) -> str:
    """Check a goal written as ``>= 12x`` (on the ratio) or ``<= 1024 bytes`` / ``>= 50
    tokens/s`` (on our figure) against the median and the worst of the runs; goals joined
    by `` and `` must all hold."""
    if goal is not None and " and " in goal:
        each = [goal_met(part, ratio, ours, higher_is_better) for part in goal.split(" and ")]
        if "" in each:
            return ""
        if all(v == "yes" for v in each):
            return "yes"
        return "median only" if "no" not in each else "no"
    match = _GOAL.match(goal or "")
    if match is None:
        return ""
    op, number, times = match.groups()
    bound = float(number.replace(",", ""))
    spread = ratio if times else ours
    if spread.median is None or spread.worst is None:
        return ""

    def holds(value: float) -> bool:
        return value >= bound if op == ">=" else value <= bound

    if holds(spread.median) and holds(spread.worst):
        return "yes"
    return "median only" if holds(spread.median) else "no"


def peer_version(distribution: str) -> str | None:
    """The installed version of a peer package, or None when it is not installed."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


async def measure(fn: Callable[[], Awaitable[Any]], *, repeat: int = 5) -> list[float]:
    """Seconds taken by each of `repeat` calls of an async function (after one warm-up)."""
    await fn()
    times: list[float] = []
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        await fn()
        times.append(time.perf_counter() - start)
        await asyncio.sleep(0)
    return times


async def best_rate(fn: Callable[[], Awaitable[Any]], work: int, *, repeat: int = 5) -> float:
    """Operations per second of the best of `repeat` timed calls, each doing `work` operations.

    Best-of within one run: on a shared machine the noise only ever slows a call down. The
    spread across runs is what `summarize` reports.
    """
    times = await measure(fn, repeat=repeat)
    return work / min(times)


def median(values: list[float]) -> float:
    return statistics.median(values)
