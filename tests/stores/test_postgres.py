"""What is specific to `PostgresStore`: tables per prefix, schema version, connections."""

from __future__ import annotations

from typing import Any

import pytest

from cantata.core import ConfigurationError, SchemaVersionError, StoreError
from cantata.stores import StoreSchemaError

pytestmark = pytest.mark.postgres


@pytest.fixture
def pg(postgres_dsn: str) -> Any:
    """The class, imported only when PostgreSQL tests run."""
    from cantata.stores.postgres import PostgresStore

    return PostgresStore


async def test_tables_and_schema_version_are_created_on_first_use(postgres_backend: Any) -> None:
    import psycopg

    store = postgres_backend.store()
    prefix = postgres_backend.options["table_prefix"]
    with psycopg.connect(postgres_backend.url, autocommit=True) as conn:
        found = conn.execute("SELECT to_regclass(%s)", (f"{prefix}values",)).fetchone()
        assert found == (None,)
    await store.put("k", 1)
    with psycopg.connect(postgres_backend.url, autocommit=True) as conn:
        row = conn.execute(
            f"SELECT value FROM \"{prefix}meta\" WHERE name = 'schema_version'".encode()
        ).fetchone()
    assert row == ("1",)


async def test_unknown_schema_version_is_refused(postgres_backend: Any) -> None:
    import psycopg

    async with postgres_backend.store() as store:
        await store.put("k", 1)
    prefix = postgres_backend.options["table_prefix"]
    with psycopg.connect(postgres_backend.url, autocommit=True) as conn:
        conn.execute(f"UPDATE \"{prefix}meta\" SET value = '7'".encode())
    store = postgres_backend.store()
    with pytest.raises(StoreSchemaError, match="'7'") as info:
        await store.get("k")
    assert isinstance(info.value, SchemaVersionError)


async def test_prefixes_keep_stores_apart(postgres_backend: Any, postgres_dsn: str) -> None:
    from cantata.stores import PostgresStore

    other_prefix = postgres_backend.options["table_prefix"] + "b_"
    async with (
        postgres_backend.store() as one,
        PostgresStore(postgres_dsn, table_prefix=other_prefix) as two,
    ):
        try:
            await one.put("k", "one")
            await one.append("log", [1])
            assert await two.get("k") is None
            assert await two.length("log") == 0
        finally:
            import psycopg

            with psycopg.connect(postgres_dsn, autocommit=True) as conn:
                for t in ("meta", "log_heads", "log_entries", "values"):
                    conn.execute(f'DROP TABLE IF EXISTS "{other_prefix}{t}"'.encode())


async def test_an_unreachable_server_is_reported(pg: Any) -> None:
    store = pg("postgresql://postgres@127.0.0.1:1/test", connect_timeout=2)
    with pytest.raises(StoreError, match=r"cannot connect to PostgreSQL at 127\.0\.0\.1:1/test"):
        await store.get("k")
    await store.close()


async def test_an_unknown_database_is_reported(pg: Any, postgres_dsn: str) -> None:
    dsn = postgres_dsn.rsplit("/", 1)[0] + "/cantata_no_such_database"
    store = pg(dsn)
    with pytest.raises(StoreError, match="cantata_no_such_database"):
        await store.get("k")
    await store.close()


@pytest.mark.parametrize("prefix", ["", "Upper_", "1abc_", "semi;colon", "x" * 41])
def test_bad_table_prefixes_are_refused(pg: Any, prefix: str) -> None:
    with pytest.raises(ConfigurationError, match="table_prefix"):
        pg("postgresql://postgres@127.0.0.1/test", table_prefix=prefix)


def test_bad_pool_sizes_are_refused(pg: Any) -> None:
    with pytest.raises(ConfigurationError, match="min_size"):
        pg("postgresql://postgres@127.0.0.1/test", min_size=3, max_size=2)


def test_a_malformed_dsn_is_refused(pg: Any) -> None:
    with pytest.raises(ConfigurationError, match="DSN"):
        pg("host=127.0.0.1 port")


async def test_appends_from_many_stores_share_one_log(postgres_backend: Any) -> None:
    stores = [await postgres_backend.store().open() for _ in range(3)]
    for i, store in enumerate(stores):
        await store.append("log", [i, i])
    assert await stores[0].read("log") == [0, 0, 1, 1, 2, 2]
    await stores[1].delete_log("log")
    assert await stores[2].append("log", ["x"]) == 1


# -- statement timeout ------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0, -1.0, "30", float("nan")])
def test_statement_timeout_must_be_positive_seconds(pg: Any, postgres_dsn: str, bad: Any) -> None:
    with pytest.raises(ConfigurationError, match="statement_timeout"):
        pg(postgres_dsn, statement_timeout=bad)


def test_statement_timeout_has_a_documented_default(pg: Any, postgres_dsn: str) -> None:
    assert pg(postgres_dsn).statement_timeout == 30.0
    assert "statement_timeout" in (pg.__doc__ or "")


@pytest.mark.parametrize("operation", ["put", "append", "get"])
async def test_a_locked_table_cannot_hang_a_writer(postgres_backend: Any, operation: str) -> None:
    import asyncio

    import psycopg

    from cantata.stores import StoreTimeoutError
    from cantata.stores.postgres import PostgresStore

    prefix = postgres_backend.options["table_prefix"]
    async with PostgresStore(postgres_backend.url, table_prefix=prefix) as setup:
        await setup.put("k", 1)
        await setup.append("log", [1])
    store = PostgresStore(postgres_backend.url, table_prefix=prefix, statement_timeout=0.5)
    postgres_backend.opened.append(store)
    await store.open()
    blocker = await psycopg.AsyncConnection.connect(postgres_backend.url)
    try:
        for table in ("values", "log_heads", "log_entries"):
            await blocker.execute(f'LOCK TABLE "{prefix}{table}" IN ACCESS EXCLUSIVE MODE'.encode())
        call = {
            "put": lambda: store.put("k", 2),
            "append": lambda: store.append("log", [2]),
            "get": lambda: store.get("k"),
        }[operation]
        # wait_for only keeps a regression from hanging the suite; the store's own bound
        # (0.5 s) is what must end the wait, with its typed error.
        with pytest.raises(StoreTimeoutError, match=r"statement_timeout=0\.5s") as info:
            await asyncio.wait_for(call(), 60)
        assert isinstance(info.value, StoreError)
        assert isinstance(info.value, TimeoutError)
    finally:
        await blocker.rollback()
        await blocker.close()
    await store.put("k", 3)  # the lock is gone: the store works again
    assert await store.get("k") == 3
