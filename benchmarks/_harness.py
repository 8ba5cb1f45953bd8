"""Shared pieces of the benchmarks: a result row, timing, peer versions.

Each ``benchmarks/bench_*.py`` module defines ``async def collect(quick: bool) -> list[Row]``.
A row holds our figure and, when the peer is installed, the peer's figure measured on the
same workload in the same run. Quote ratios, not absolute times: machines are noisy.
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from importlib import metadata
from typing import Any

__all__ = ["Row", "best_rate", "measure", "peer_version"]


@dataclass
class Row:
    """One line of the results table."""

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

    @property
    def ratio(self) -> float | None:
        """How many times better we are than the peer (above 1 means we win)."""
        if self.peer is None or self.peer == 0 or self.ours == 0:
            return None
        return self.ours / self.peer if self.higher_is_better else self.peer / self.ours

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ratio": self.ratio}


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

    Best-of rather than mean: on a shared machine the noise only ever slows a run down.
    """
    times = await measure(fn, repeat=repeat)
    return work / min(times)


def median(values: list[float]) -> float:
    return statistics.median(values)
