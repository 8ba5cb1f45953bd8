"""Many writers on one log, as tasks and as processes: nothing lost, each writer's order kept.

The figure of issue 3: 8 concurrent writers x 1,000 appends, on real SQLite, PostgreSQL and
Redis. Processes are started with the spawn method and each opens its own store.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import runpy
from pathlib import Path
from typing import Any

from cantata.stores import StateStore

WRITERS = 8
APPENDS = 1_000
WORKER = Path(__file__).with_name("_append_worker.py")


def check_log(entries: list[Any], writers: int, count: int, batch: int = 1) -> None:
    """Every entry present once, each writer's entries in order, each batch contiguous."""
    assert len(entries) == writers * count
    for w in range(writers):
        assert [m for (writer, m) in entries if writer == w] == list(range(count))
    for start in range(0, len(entries), batch):
        chunk = entries[start : start + batch]
        assert {writer for writer, _ in chunk} == {chunk[0][0]}
        assert [m for _, m in chunk] == list(range(chunk[0][1], chunk[0][1] + len(chunk)))


async def _append_in_tasks(store: StateStore, log: str, batch: int) -> None:
    async def writer(w: int) -> None:
        for n in range(0, APPENDS, batch):
            await store.append(log, [[w, m] for m in range(n, n + batch)])

    await asyncio.gather(*(writer(w) for w in range(WRITERS)))


async def test_tasks_sharing_one_store(durable: Any) -> None:
    store = await durable.store().open()
    await _append_in_tasks(store, "thread:tasks", 1)
    assert await store.length("thread:tasks") == WRITERS * APPENDS
    check_log(await store.read("thread:tasks"), WRITERS, APPENDS)


async def test_tasks_each_with_its_own_store(durable: Any) -> None:
    stores = [await durable.store().open() for _ in range(WRITERS)]

    async def writer(w: int) -> None:
        for n in range(0, 200, 10):
            await stores[w].append("thread:own", [[w, m] for m in range(n, n + 10)])

    await asyncio.gather(*(writer(w) for w in range(WRITERS)))
    check_log(await stores[0].read("thread:own"), WRITERS, 200, batch=10)


def _run_processes(backends: list[Any]) -> None:
    ctx = multiprocessing.get_context("spawn")
    config = {
        "stores": [(b.url, b.options) for b in backends],
        "log": "thread:processes",
        "batch_log": "thread:batches",
        "count": APPENDS,
        "batch": 25,
    }
    processes = [
        ctx.Process(
            target=runpy.run_path,
            args=(str(WORKER),),
            kwargs={
                "run_name": "cantata_append_worker",
                "init_globals": {"CONFIG": {**config, "writer": w}},
            },
        )
        for w in range(WRITERS)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join()
    assert [p.exitcode for p in processes] == [0] * WRITERS


async def test_processes_each_with_their_own_stores(durables: list[Any]) -> None:
    """8 spawned processes; each appends to every backend at once, so spawning is paid once."""
    await asyncio.to_thread(_run_processes, durables)
    for backend in durables:
        store = await backend.store().open()
        assert await store.length("thread:processes") == WRITERS * APPENDS, backend.name
        check_log(await store.read("thread:processes"), WRITERS, APPENDS)
        check_log(await store.read("thread:batches"), WRITERS, APPENDS, batch=25)


CLAIMERS = 4
CLAIMS = 200
CLAIM_WORKER = Path(__file__).with_name("_claim_worker.py")


def _run_claimers(backend: Any, out: Path) -> list[list[int]]:
    ctx = multiprocessing.get_context("spawn")
    processes = [
        ctx.Process(
            target=runpy.run_path,
            args=(str(CLAIM_WORKER),),
            kwargs={
                "run_name": "cantata_claim_worker",
                "init_globals": {
                    "CONFIG": {
                        "url": backend.url,
                        "options": backend.options,
                        "writer": w,
                        "keys": CLAIMS,
                        "out": str(out / f"won-{w}.json"),
                    }
                },
            },
        )
        for w in range(CLAIMERS)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(120)
    assert [p.exitcode for p in processes] == [0] * CLAIMERS
    return [json.loads((out / f"won-{w}.json").read_text()) for w in range(CLAIMERS)]


async def test_processes_claiming_the_same_keys_have_one_winner_each(
    durable: Any, tmp_path: Path
) -> None:
    """put_if_absent across processes: every key claimed by exactly one, and it holds its value."""
    won = await asyncio.to_thread(_run_claimers, durable, tmp_path)
    claimed = sorted(n for keys in won for n in keys)
    assert claimed == list(range(CLAIMS))
    store = await durable.store().open()
    for writer, keys in enumerate(won):
        for n in keys:
            assert await store.get(f"claim:{n}") == writer
