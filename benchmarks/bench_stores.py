"""State stores: appends and reads per second on each backend (no peer: these are floors).

Workloads: one task appending one message-sized entry at a time; 8 tasks appending to one
log at once (the shared-thread case, where concurrent appends share commits); reading the
last 20 entries of a 1,000-entry log; reading a whole 1,000-entry log (entries per second);
put and get of one value. PostgreSQL (127.0.0.1:5432, database ``test``) and Redis
(127.0.0.1:6379) are measured when they answer; each run uses its own table or key prefix
and removes it afterwards.
"""

from __future__ import annotations

import asyncio
import os
import socket
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from _harness import Row, best_rate
from cantata.core import new_id
from cantata.stores import MemoryStore, SQLiteStore, StateStore

POSTGRES = os.environ.get("CANTATA_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
REDIS = os.environ.get("CANTATA_TEST_REDIS", "redis://127.0.0.1:6379/0")
ENTRY = {
    "role": "assistant",
    "contents": [{"$type": "text", "text": "The capital of France is Paris. " * 4}],
    "author_name": "geographer",
    "message_id": "0" * 32,
}


def _reachable(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


@asynccontextmanager
async def _sqlite() -> AsyncIterator[StateStore]:
    with tempfile.TemporaryDirectory() as tmp:
        async with SQLiteStore(Path(tmp) / "bench.db") as store:
            yield store


@asynccontextmanager
async def _memory() -> AsyncIterator[StateStore]:
    async with MemoryStore() as store:
        yield store


@asynccontextmanager
async def _postgres() -> AsyncIterator[StateStore]:
    import psycopg

    from cantata.stores import PostgresStore

    prefix = f"bench{new_id()[:8]}_"
    try:
        async with PostgresStore(POSTGRES, table_prefix=prefix) as store:
            yield store
    finally:
        async with await psycopg.AsyncConnection.connect(POSTGRES, autocommit=True) as conn:
            for table in ("meta", "log_heads", "log_entries", "values"):
                await conn.execute(f'DROP TABLE IF EXISTS "{prefix}{table}"'.encode())


@asynccontextmanager
async def _redis() -> AsyncIterator[StateStore]:
    import redis.asyncio as aioredis

    from cantata.stores import RedisStore

    prefix = f"cantata-bench:{new_id()[:8]}:"
    try:
        async with RedisStore(REDIS, prefix=prefix) as store:
            yield store
    finally:
        client = aioredis.Redis.from_url(REDIS)
        async for key in client.scan_iter(match=f"{prefix}*"):
            await client.delete(key)
        await client.aclose()


def _backends() -> list[tuple[str, Callable[[], Any]]]:
    found: list[tuple[str, Callable[[], Any]]] = [("memory", _memory), ("sqlite", _sqlite)]
    if _reachable(5432):
        found.append(("postgres", _postgres))
    if _reachable(6379):
        found.append(("redis", _redis))
    return found


async def _measure(name: str, store: StateStore, quick: bool) -> list[Row]:
    n = 200 if quick else 1_000
    repeat = 3 if quick else 5
    counter = iter(range(1_000_000))

    async def append_one() -> None:
        log = f"serial:{next(counter)}"
        for _ in range(n):
            await store.append(log, [ENTRY])

    async def append_eight_tasks() -> None:
        log = f"shared:{next(counter)}"

        async def writer() -> None:
            for _ in range(n // 8):
                await store.append(log, [ENTRY])

        await asyncio.gather(*(writer() for _ in range(8)))

    await store.append("read", [ENTRY] * 1_000)

    async def read_tail() -> None:
        for _ in range(n):
            await store.read("read", -20)

    async def read_all() -> None:
        for _ in range(max(1, n // 100)):
            await store.read("read")

    async def put_get() -> None:
        for i in range(n):
            await store.put(f"k{i % 50}", ENTRY)
            await store.get(f"k{i % 50}")

    work: list[tuple[str, str, Callable[[], Awaitable[None]], int]] = [
        ("append, 1 task", "appends/s", append_one, n),
        ("append, 8 tasks on one log", "appends/s", append_eight_tasks, n // 8 * 8),
        ("read last 20 of 1,000", "reads/s", read_tail, n),
        ("read all 1,000", "entries/s", read_all, max(1, n // 100) * 1_000),
        ("put + get", "pairs/s", put_get, n),
    ]
    return [
        Row(f"stores {name}: {label}", unit, await best_rate(fn, ops, repeat=repeat))
        for label, unit, fn, ops in work
    ]


async def collect(quick: bool) -> list[Row]:
    """Rows for every backend that is available here."""
    rows: list[Row] = []
    for name, open_backend in _backends():
        async with open_backend() as store:
            rows.extend(await _measure(name, store, quick))
    return rows


if __name__ == "__main__":
    for row in asyncio.run(collect(quick=False)):
        print(f"{row.name:50} {row.ours:>12,.0f} {row.unit}")
