"""Kill -9 a durable run at random moments, resume it in fresh processes, and count.

Used by tests/durable/test_kill9.py (a few kills) and benchmarks/bench_durable.py (20).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CHILD = Path(__file__).with_name("kill_child.py")
_BOUND = 120.0
"""Seconds any one child may take (a hang fails the harness instead of blocking it)."""


@dataclass
class KillReport:
    """What a kill-and-resume series found."""

    kills: int
    """Children killed while still running (a kill after the run ended does not count)."""
    identical: bool
    outputs: Any
    reference: Any
    effect_starts: int
    effects: int
    repeated: int
    """Effects whose function began more than once (an interrupted one may, once)."""
    repeated_after_journal: int
    """Effects begun again after their result was journaled: must be 0."""
    most_starts: int
    """The most times one effect's function began (at most 1 + kills)."""
    model_calls: int
    reference_model_calls: int


def _child(where: str, ledger: Path) -> list[str]:
    return [sys.executable, str(CHILD), where, str(ledger)]


def run_to_end(where: str, ledger: Path) -> Any:
    """Run (or resume) the child until it finishes; its outputs."""
    done = subprocess.run(
        _child(where, ledger), capture_output=True, text=True, timeout=_BOUND, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"child failed ({done.returncode}): {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def kill_at_random(where: str, ledger: Path, *, kills: int, seed: int, window: float) -> int:
    """Start the child `kills` times, each killed (SIGKILL) at a random moment."""
    rng = random.Random(seed)
    landed = 0
    for _ in range(kills):
        proc = subprocess.Popen(
            _child(where, ledger), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        assert proc.stdout is not None
        proc.stdout.readline()  # "ready", or "" when the child died: EOF ends the wait
        time.sleep(rng.uniform(0.0, window))
        if proc.poll() is None:
            proc.kill()
            landed += 1
        proc.wait(timeout=_BOUND)
        proc.stdout.close()
    return landed


def count_models(ledger: Path) -> int:
    """How many model calls the ledger saw."""
    if not ledger.exists():
        return 0
    return sum(line == "model" for line in ledger.read_text(encoding="utf-8").splitlines())


def count_ledger(ledger: Path) -> tuple[int, int, int, int, int]:
    """(starts, distinct effects, repeated, repeated after journaled, most starts of one)."""
    starts: dict[str, int] = {}
    kept: set[str] = set()
    after = 0
    if ledger.exists():
        for line in ledger.read_text(encoding="utf-8").splitlines():
            what, _, key = line.partition(" ")
            if what == "start":
                starts[key] = starts.get(key, 0) + 1
                after += key in kept
            elif what == "kept":
                kept.add(key)
    total = sum(starts.values())
    return total, len(starts), total - len(starts), after, max(starts.values(), default=0)


def kill_and_resume(
    where: str, reference_where: str, tmp: Path, *, kills: int, seed: int, window: float = 0.6
) -> KillReport:
    """A clean reference run, then `kills` killed children and one to the end."""
    reference = run_to_end(reference_where, tmp / "reference.ledger")
    ledger = tmp / "killed.ledger"
    landed = kill_at_random(where, ledger, kills=kills, seed=seed, window=window)
    outputs = run_to_end(where, ledger)
    starts, effects, repeated, after, most = count_ledger(ledger)
    return KillReport(
        landed,
        outputs == reference,
        outputs,
        reference,
        starts,
        effects,
        repeated,
        after,
        most,
        count_models(ledger),
        count_models(tmp / "reference.ledger"),
    )


def pg_where(dsn: str, prefix: str) -> str:
    """A child's store argument for PostgreSQL tables under `prefix`."""
    return f"{dsn}#{prefix}"


def drop_pg_tables(dsn: str, prefix: str) -> None:
    """Remove the tables a PostgresStore made under `prefix`."""
    import psycopg

    names = ", ".join(f'"{prefix}{t}"' for t in ("meta", "log_heads", "log_entries", "values"))
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {names}".encode())


__all__ = ["KillReport", "drop_pg_tables", "kill_and_resume", "pg_where"]
