"""Fixtures for the store tests: one isolated namespace per test on every backend.

`backend` is parametrized over memory, SQLite, PostgreSQL and Redis. Each test gets its
own SQLite file, its own PostgreSQL table prefix and its own Redis key prefix, removed
afterwards, so tests never see each other's data nor that of other suites on the servers.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from cantata.core import new_id
from cantata.stores import MemoryStore, SQLiteStore, StateStore

DURABLE = [
    "sqlite",
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("redis", marks=pytest.mark.redis),
]
ALL = ["memory", *DURABLE]


@dataclass
class Backend:
    """How to open stores on one isolated namespace, and how to damage its data."""

    name: str
    url: str
    options: dict[str, Any]
    make: Callable[[], Any]
    raw_put: Callable[[str, str], None] | None = None
    raw_append: Callable[[str, str], None] | None = None
    raw_snapshot: Callable[[list[str]], list[Any]] | None = None
    opened: list[Any] = field(default_factory=list)

    def store(self) -> Any:
        """A new store on this backend's namespace, closed at teardown."""
        store = self.make()
        self.opened.append(store)
        return store


def _sqlite(tmp_path: Path) -> Iterator[Backend]:
    path = tmp_path / "store.db"

    def raw(sql: str, params: tuple[Any, ...]) -> None:
        with sqlite3.connect(path) as conn:
            conn.execute(sql, params)

    def snapshot(keys: list[str]) -> list[Any]:
        conn = sqlite3.connect(path)
        try:
            marks = ",".join("?" * len(keys))
            sql = f"SELECT key, value FROM cantata_values WHERE key IN ({marks})"
            found = dict(conn.execute(sql, keys).fetchall())
        finally:
            conn.close()
        return [found.get(k) for k in keys]

    yield Backend(
        "sqlite",
        f"sqlite:///{path}",
        {},
        lambda: SQLiteStore(path),
        raw_put=lambda key, text: raw(
            "UPDATE cantata_values SET value = ? WHERE key = ?", (text, key)
        ),
        raw_append=lambda log, text: raw(
            "UPDATE cantata_log_entries SET value = ? WHERE log = ? AND pos = 0", (text, log)
        ),
        raw_snapshot=snapshot,
    )


def _postgres(dsn: str) -> Iterator[Backend]:
    import psycopg

    from cantata.stores import PostgresStore

    prefix = f"t{new_id()[:12]}_"
    tables = [f"{prefix}{t}" for t in ("meta", "log_heads", "log_entries", "values")]

    def raw(sql: str, params: tuple[Any, ...]) -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.format(p=prefix).encode(), params)

    def snapshot(keys: list[str]) -> list[Any]:
        with psycopg.connect(dsn, autocommit=True) as conn:
            sql = f'SELECT key, value FROM "{prefix}values" WHERE key = ANY(%s)'
            found = dict(conn.execute(sql.encode(), (keys,)).fetchall())
        return [found.get(k) for k in keys]

    try:
        yield Backend(
            "postgres",
            dsn,
            {"table_prefix": prefix},
            lambda: PostgresStore(dsn, table_prefix=prefix),
            raw_put=lambda key, text: raw(
                'UPDATE "{p}values" SET value = %s WHERE key = %s', (text, key)
            ),
            raw_append=lambda log, text: raw(
                'UPDATE "{p}log_entries" SET value = %s WHERE log = %s AND pos = 0', (text, log)
            ),
            raw_snapshot=snapshot,
        )
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            names = ", ".join(f'"{table}"' for table in tables)
            conn.execute(f"DROP TABLE IF EXISTS {names}".encode())


def _redis(url: str) -> Iterator[Backend]:
    import redis

    from cantata.stores import RedisStore

    prefix = f"cantata-test:{new_id()[:12]}:"
    client = redis.Redis.from_url(url)
    try:
        yield Backend(
            "redis",
            url,
            {"prefix": prefix},
            lambda: RedisStore(url, prefix=prefix),
            raw_put=lambda key, text: client.set(f"{prefix}val:{key}", text) and None,
            raw_append=lambda log, text: client.lset(f"{prefix}log:{log}", 0, text) and None,
            raw_snapshot=lambda keys: [
                v if v is None else v.decode()
                for v in client.mget([f"{prefix}val:{k}" for k in keys])
            ],
        )
    finally:
        for key in client.scan_iter(match=f"{prefix}*"):
            client.delete(key)
        client.close()


def make_backend(name: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """The backend called `name`; PostgreSQL and Redis skip when down (fail under CI)."""
    if name == "memory":
        yield Backend("memory", "memory://", {}, MemoryStore)
    elif name == "sqlite":
        yield from _sqlite(tmp_path)
    elif name == "postgres":
        yield from _postgres(request.getfixturevalue("postgres_dsn"))
    elif name == "redis":
        yield from _redis(request.getfixturevalue("redis_url"))
    else:
        raise ValueError(name)


async def _close_all(backend: Backend) -> None:
    for store in backend.opened:
        await store.close()


async def _provide(
    name: str, request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[Backend]:
    gen = make_backend(name, request, tmp_path)
    found = next(gen)
    try:
        yield found
    finally:
        await _close_all(found)
        gen.close()


@pytest.fixture(params=ALL)
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    """Every backend in turn."""
    async for found in _provide(request.param, request, tmp_path):
        yield found


@pytest.fixture(params=DURABLE)
async def durable(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    """SQLite, PostgreSQL and Redis in turn: the backends that many processes share."""
    async for found in _provide(request.param, request, tmp_path):
        yield found


@pytest.fixture
async def durables(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[list[Backend]]:
    """SQLite, PostgreSQL and Redis together, leaving out a server that is down.

    A server that is down is left out as its fixture would skip; under CI its fixture fails,
    and so does this one.
    """
    found: list[Backend] = []
    providers = []
    try:
        for name in ("sqlite", "postgres", "redis"):
            provider = _provide(name, request, tmp_path)
            try:
                found.append(await anext(provider))
            except pytest.skip.Exception:
                continue
            providers.append(provider)
        yield found
    finally:
        for provider in providers:
            await provider.aclose()


@pytest.fixture
async def postgres_backend(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[Backend]:
    """PostgreSQL alone, on its own table prefix."""
    async for found in _provide("postgres", request, tmp_path):
        yield found


@pytest.fixture
async def redis_backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    """Redis alone, on its own key prefix."""
    async for found in _provide("redis", request, tmp_path):
        yield found


@pytest.fixture
async def store(backend: Backend) -> StateStore:
    """An opened store of each backend."""
    opened: StateStore = await backend.store().open()
    return opened
