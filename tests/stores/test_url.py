"""`open_store(url)`: the backend for each scheme, and clear errors for the rest."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import cantata.stores as stores
from cantata.core import ConfigurationError
from cantata.stores import MemoryStore, SQLiteStore, StateStore, open_store


def test_memory() -> None:
    store = open_store("memory://")
    assert isinstance(store, MemoryStore)
    assert isinstance(open_store("memory://", copy=True), MemoryStore)


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("sqlite:///relative/to.db", "relative/to.db"),
        ("sqlite:////absolute/to.db", "/absolute/to.db"),
        ("sqlite://:memory:", ":memory:"),
        ("sqlite:///:memory:", ":memory:"),
        ("sqlite://", ":memory:"),
        ("SQLite:///x.db", "x.db"),
    ],
)
def test_sqlite_paths(url: str, path: str) -> None:
    store = open_store(url)
    assert isinstance(store, SQLiteStore)
    assert store.path == path


async def test_sqlite_options_and_use(tmp_path: Path) -> None:
    async with open_store(f"sqlite:///{tmp_path}/s.db", busy_timeout=1.0) as store:
        assert await store.append("log", ["x"]) == 1
    assert (tmp_path / "s.db").exists()


def test_sqlite_without_a_path() -> None:
    with pytest.raises(ConfigurationError, match=r"sqlite:///relative\.db"):
        open_store("sqlite://host/x.db")


@pytest.mark.postgres
async def test_postgresql(postgres_backend: object, postgres_dsn: str) -> None:
    from cantata.stores import PostgresStore

    prefix = postgres_backend.options["table_prefix"]  # type: ignore[attr-defined]
    for url in (postgres_dsn, postgres_dsn.replace("postgresql://", "postgres://", 1)):
        async with open_store(url, table_prefix=prefix) as store:
            assert isinstance(store, PostgresStore)
            await store.put("k", url)
            assert await store.get("k") == url


@pytest.mark.redis
async def test_redis(redis_backend: object, redis_url: str) -> None:
    from cantata.stores import RedisStore

    prefix = redis_backend.options["prefix"]  # type: ignore[attr-defined]
    async with open_store(redis_url, prefix=prefix) as store:
        assert isinstance(store, RedisStore)
        await store.put("k", 1)
        assert await store.get("k") == 1


@pytest.mark.parametrize("url", ["mysql://x/db", "file:///tmp/x", "no scheme", "", "://x"])
def test_unknown_schemes_name_the_supported_ones(url: str) -> None:
    with pytest.raises(ConfigurationError, match="memory, sqlite, postgresql, redis"):
        open_store(url)


def test_a_non_string_url_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="must be a string"):
        open_store(Path("x.db"))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("url", "module", "extra", "backend"),
    [
        ("postgresql://u@h/db", "psycopg", "postgres", "postgres"),
        ("postgresql://u@h/db", "psycopg_pool", "postgres", "postgres"),
        ("redis://127.0.0.1:6379/0", "redis", "redis", "redis"),
    ],
)
def test_a_missing_extra_names_what_to_install(
    monkeypatch: pytest.MonkeyPatch, url: str, module: str, extra: str, backend: str
) -> None:
    # Make the dependency unimportable, and forget the backend module that imported it.
    monkeypatch.setitem(sys.modules, module, None)
    monkeypatch.delitem(sys.modules, f"cantata.stores.{backend}", raising=False)
    with pytest.raises(ConfigurationError, match=rf"pip install 'cantata\[{extra}\]'"):
        open_store(url)
    name = "PostgresStore" if backend == "postgres" else "RedisStore"
    with pytest.raises(ConfigurationError, match=rf"cantata\[{extra}\]"):
        getattr(stores, name)


def test_public_names_are_exported() -> None:
    for name in stores.__all__:
        assert getattr(stores, name) is not None
    assert set(stores.__all__) >= {
        "StateStore",
        "MemoryStore",
        "SQLiteStore",
        "PostgresStore",
        "RedisStore",
        "open_store",
        "StoreClosedError",
        "StoreCorruptionError",
        "StoreSchemaError",
    }
    with pytest.raises(AttributeError):
        _ = stores.NoSuchStore  # type: ignore[attr-defined]


def test_every_backend_is_a_state_store() -> None:
    assert isinstance(MemoryStore(), StateStore)
    assert isinstance(SQLiteStore(":memory:"), StateStore)
