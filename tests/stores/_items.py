"""Item stores for the tests: every backend on an isolated namespace, with a clock to move."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from cantata.core import new_id
from cantata.stores import InMemoryItemStore, ItemStore, SQLiteItemStore

BACKENDS = [
    "memory",
    "sqlite",
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("redis", marks=pytest.mark.redis),
]


class Clock:
    """A clock the test moves by hand, for TTL."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Opener:
    """Opens stores of one backend on one isolated database (all closed at teardown)."""

    def __init__(self, name: str, make: Callable[..., Any]) -> None:
        self.name = name
        self._make = make
        self.opened: list[Any] = []

    async def __call__(self, **options: Any) -> ItemStore:
        store = self._make(**options)
        self.opened.append(store)
        opened: ItemStore = await store.open()
        return opened


async def provide(
    name: str, request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[Opener]:
    """An `Opener` for backend `name`; PostgreSQL and Redis skip when down (fail under CI)."""
    cleanup: Callable[[], Any] | None = None
    if name == "memory":
        opener = Opener(name, InMemoryItemStore)
    elif name == "sqlite":
        path = tmp_path / "items.db"
        opener = Opener(name, lambda **o: SQLiteItemStore(path, **o))
    elif name == "postgres":
        dsn = request.getfixturevalue("postgres_dsn")
        from cantata.stores import PostgresItemStore

        prefix = f"t{new_id()[:12]}_"
        opener = Opener(name, lambda **o: PostgresItemStore(dsn, table_prefix=prefix, **o))

        def cleanup() -> None:
            import psycopg

            with psycopg.connect(dsn, autocommit=True) as conn:
                for table in ("item_meta", "item_namespaces", "items"):
                    conn.execute(f'DROP TABLE IF EXISTS "{prefix}{table}" CASCADE'.encode())

    elif name == "redis":
        url = request.getfixturevalue("redis_url")
        from cantata.stores import RedisItemStore

        key_prefix = f"cantata-test:{new_id()[:12]}:"
        opener = Opener(name, lambda **o: RedisItemStore(url, prefix=key_prefix, **o))

        def cleanup() -> None:
            import redis

            with redis.Redis.from_url(url) as client:
                for key in client.scan_iter(match=f"{key_prefix}*"):
                    client.delete(key)

    else:
        raise ValueError(name)
    try:
        yield opener
    finally:
        for store in opener.opened:
            await store.close()
        if cleanup is not None:
            cleanup()
