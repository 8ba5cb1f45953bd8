"""What is specific to `SQLiteStore`: the file, its settings, its schema version."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from cantata.core import ConfigurationError, SchemaVersionError, StoreError
from cantata.stores import SQLiteStore, StoreSchemaError, StoreTimeoutError


async def test_memory_database_works(tmp_path: Path) -> None:
    async with SQLiteStore(":memory:") as store:
        assert await store.append("log", [1, 2]) == 2
        await store.put("k", {"v": 1})
        assert await store.read("log") == [1, 2]
        assert await store.get("k") == {"v": 1}


async def test_data_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with SQLiteStore(path) as store:
        await store.append("log", ["a", "b"])
        await store.put("k", [1])
    async with SQLiteStore(path) as store:
        assert await store.read("log") == ["a", "b"]
        assert await store.get("k") == [1]
        assert await store.append("log", ["c"]) == 3


async def test_wal_mode_and_schema_version_are_on_disk(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with SQLiteStore(path) as store:
        await store.put("k", 1)
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        version = conn.execute("SELECT value FROM cantata_meta WHERE name = 'schema_version'")
        assert version.fetchone() == ("1",)
    finally:
        conn.close()


async def test_unknown_schema_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with SQLiteStore(path) as store:
        await store.put("k", 1)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE cantata_meta SET value = '99' WHERE name = 'schema_version'")
    store = SQLiteStore(path)
    with pytest.raises(StoreSchemaError, match="'99'") as info:
        await store.get("k")
    assert isinstance(info.value, SchemaVersionError)
    await store.close()


async def test_two_stores_on_one_file_see_each_other(tmp_path: Path) -> None:
    a, b = SQLiteStore(tmp_path / "s.db"), SQLiteStore(tmp_path / "s.db")
    try:
        await asyncio.gather(
            *(a.append("log", [["a", i]]) for i in range(50)),
            *(b.append("log", [["b", i]]) for i in range(50)),
        )
        entries = await b.read("log")
        assert [e for e in entries if e[0] == "a"] == [["a", i] for i in range(50)]
        assert [e for e in entries if e[0] == "b"] == [["b", i] for i in range(50)]
    finally:
        await a.close()
        await b.close()


async def test_a_held_write_lock_times_out_with_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with SQLiteStore(path) as store:
        await store.put("k", 1)
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        async with SQLiteStore(path, busy_timeout=0) as store:
            with pytest.raises(StoreTimeoutError, match="busy_timeout") as info:
                await store.append("log", [1])
            assert isinstance(info.value, TimeoutError)
            with pytest.raises(StoreTimeoutError, match="'k'"):
                await store.put_many({"k": 2})
            assert await store.get("k") == 1  # WAL: readers are never blocked
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()


async def test_a_missing_directory_is_reported(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "no" / "such" / "dir" / "s.db")
    with pytest.raises(StoreError, match="directory exists"):
        await store.get("k")
    await store.close()


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="synchronous"):
        SQLiteStore(":memory:", synchronous="SOMETIMES")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="busy_timeout"):
        SQLiteStore(":memory:", busy_timeout=-1)


async def test_a_failed_group_write_reaches_every_caller(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = await SQLiteStore(path).open()
    try:
        with sqlite3.connect(path) as conn:
            conn.execute("DROP TABLE cantata_log_entries")
        results = await asyncio.gather(
            *(store.append("log", [i]) for i in range(5)), return_exceptions=True
        )
        assert all(isinstance(r, StoreError) for r in results), results
        assert "append to log 'log'" in str(results[0])
    finally:
        await store.close()


async def test_cancelling_one_appender_leaves_the_others_whole(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "s.db") as store:
        tasks = [asyncio.create_task(store.append("log", [i, i])) for i in range(10)]
        await asyncio.sleep(0)
        tasks[5].cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        entries = await store.read("log")
        done = [i for i, r in enumerate(results) if not isinstance(r, BaseException)]
        # A cancelled append may or may not have been written, but never in half.
        assert len(entries) % 2 == 0
        assert entries[0::2] == entries[1::2]
        assert set(done) <= set(entries[0::2])
        assert await store.append("log", ["after"]) == len(entries) + 1


async def test_many_stores_opening_one_new_file_together_all_succeed(tmp_path: Path) -> None:
    # Switching a new file to WAL needs it to itself, and when two connections both want
    # it SQLite answers "database is locked" at once instead of waiting: without a retry,
    # a few rounds in a hundred fail.
    for round_ in range(60):
        stores = [SQLiteStore(tmp_path / f"new-{round_}.db") for _ in range(8)]
        try:
            await asyncio.gather(*(s.append("log", [i]) for i, s in enumerate(stores)))
            assert sorted(await stores[0].read("log")) == list(range(8))
        finally:
            for store in stores:
                await store.close()
