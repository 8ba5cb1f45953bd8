"""Durable execution: kill -9 proof and the cost of journaling an effect (no peer).

Kill proof: 20 trials per backend (5 with --quick). Each trial starts the durable run of
tests/durable/kill_child.py (3 rounds of fan-out to three effects, fan-in, state, a
tool-calling agent with an effect tool: 12 supersteps) in a fresh process, kills it with
SIGKILL at a random moment, and resumes it in another fresh process until it ends.
Counted: trials whose outputs equal a clean reference run's; kills that landed while the
run was still going; effects begun again after their result was journaled (must be 0);
model calls beyond the reference run's (only one cut off before its answer was journaled
may be asked again); effects begun again at all (a kill mid-flight may re-run that effect
once, with the same idempotency key).

Cost: one executor calling ``ctx.effect`` 200 times against calling the same function
directly, both with a checkpoint store: the time added per effect, and the bytes the
journal writes per effect (key plus sealed JSON record).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _harness import Row, median

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "durable"))

from kill_harness import (
    count_ledger,
    count_models,
    drop_pg_tables,
    kill_at_random,
    pg_where,
    run_to_end,
)

from cantata.core import new_id, to_json
from cantata.stores import PostgresStore, SQLiteStore, StateStore, seal
from cantata.workflows import (
    StateStoreCheckpointStore,
    WorkflowBuilder,
    WorkflowContext,
    executor,
)

MAX_REPEAT = 1
POSTGRES = os.environ.get("CANTATA_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
EFFECTS = 200
RESULT = {"receipt": "r-0123456789abcdef", "amount": 4200, "currency": "EUR"}


def _postgres_up() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", 5432), timeout=0.5):
            return True
    except OSError:
        return False


def _trials(backend: str, trials: int, tmp: Path) -> dict[str, int]:
    """`trials` kill-then-resume trials, each on a fresh store; summed counts."""
    totals = {"identical": 0, "kills": 0, "repeated_after_journal": 0, "repeated": 0}
    totals["model_calls_repeated"] = 0
    prefixes: list[str] = []

    def where(name: str) -> str:
        if backend == "sqlite":
            return str(tmp / f"{name}.db")
        prefixes.append(f"b{new_id()[:10]}_")
        return pg_where(POSTGRES, prefixes[-1])

    try:
        reference = run_to_end(where("reference"), tmp / f"{backend}-reference.ledger")
        reference_models = count_models(tmp / f"{backend}-reference.ledger")
        for trial in range(trials):
            ledger = tmp / f"{backend}-{trial}.ledger"
            store = where(f"trial{trial}")
            totals["kills"] += kill_at_random(store, ledger, kills=1, seed=trial, window=0.6)
            totals["identical"] += run_to_end(store, ledger) == reference
            _, _, repeated, after, _ = count_ledger(ledger)
            totals["repeated"] += repeated
            totals["repeated_after_journal"] += after
            totals["model_calls_repeated"] += count_models(ledger) - reference_models
    finally:
        for prefix in prefixes:
            drop_pg_tables(POSTGRES, prefix)
    return totals


async def _cost(store: StateStore) -> tuple[float, float]:
    """Seconds added per journaled effect, and bytes written per effect."""

    def pay(i: int) -> dict[str, Any]:
        return {**RESULT, "amount": i}

    @executor
    async def journaled(n: int, ctx: WorkflowContext[None, int]) -> None:
        for i in range(n):
            await ctx.effect("pay", pay, i)
        ctx.yield_output(n)

    @executor
    async def direct(n: int, ctx: WorkflowContext[None, int]) -> None:
        for i in range(n):
            pay(i)
        ctx.yield_output(n)

    ckpt = StateStoreCheckpointStore(store)
    times: dict[str, list[float]] = {"journaled": [], "direct": []}
    for _ in range(3):
        for name, ex in (("journaled", journaled), ("direct", direct)):
            wf = WorkflowBuilder(ex).build()
            start = time.perf_counter()
            await wf.run(EFFECTS, checkpoint_store=ckpt, run_id=new_id())
            times[name].append(time.perf_counter() - start)
    added = (median(times["journaled"]) - median(times["direct"])) / EFFECTS
    key = f"wf:fx:{new_id()}:journaled:1:pay#{EFFECTS // 2}"
    record = json.dumps(seal({"result": to_json(pay(EFFECTS // 2))}), separators=(",", ":"))
    return added, float(len(key.encode()) + len(record.encode()))


async def collect(quick: bool) -> list[Row]:
    trials = 5 if quick else 20
    backends = ["sqlite"] + (["postgres"] if _postgres_up() else [])
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        for backend in backends:
            found = await asyncio.to_thread(_trials, backend, trials, Path(tmp))
            note = f"{trials} trials, {found['kills']} kills landed mid-run"
            rows += [
                Row(
                    f"kill -9 and resume ({backend}): identical outputs",
                    f"of {trials}",
                    found["identical"],
                    goal=f">= {trials} runs",
                    note=note,
                    headline=True,
                ),
                Row(
                    f"kill -9 and resume ({backend}): journaled effects begun again",
                    "effects",
                    found["repeated_after_journal"],
                    higher_is_better=False,
                    goal="<= 0 effects",
                    note=note,
                    headline=True,
                ),
                Row(
                    f"kill -9 and resume ({backend}): model calls asked again",
                    "calls",
                    found["model_calls_repeated"],
                    higher_is_better=False,
                    note="only a call cut off before its answer was journaled",
                    headline=True,
                ),
                Row(
                    f"kill -9 and resume ({backend}): effects cut mid-flight and re-run",
                    "effects",
                    found["repeated"],
                    higher_is_better=False,
                    note="allowed: at most once each, with the same idempotency key",
                ),
            ]
        stores: list[tuple[str, StateStore, str | None]] = [
            ("sqlite", SQLiteStore(Path(tmp) / "cost.db"), None)
        ]
        if "postgres" in backends:
            prefix = f"c{new_id()[:10]}_"
            stores.append(("postgres", PostgresStore(POSTGRES, table_prefix=prefix), prefix))
        for backend, store, prefix in stores:
            try:
                added, size = await _cost(store)
            finally:
                await store.close()
                if prefix:
                    drop_pg_tables(POSTGRES, prefix)
            rows += [
                Row(
                    f"journaling one effect ({backend}): time added",
                    "us",
                    added * 1e6,
                    higher_is_better=False,
                ),
                Row(
                    f"journaling one effect ({backend}): bytes written",
                    "bytes",
                    size,
                    higher_is_better=False,
                ),
            ]
    return rows


if __name__ == "__main__":
    for row in asyncio.run(collect("--quick" in sys.argv)):
        print(f"{row.name:70} {row.ours:10.1f} {row.unit}  {row.note or ''}")
