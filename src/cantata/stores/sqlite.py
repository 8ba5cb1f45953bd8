"""SQLite: the embedded default, one file that many tasks and processes share safely."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, NoReturn

import aiosqlite

from ..core import ConfigurationError, StoreError, short_repr
from ._batching import AppendBatcher
from ._codec import (
    SCHEMA_VERSION,
    check_index,
    check_name,
    decode,
    encode,
    prefix_upper,
    quoted,
)
from ._lifecycle import StoreLifecycle
from .errors import StoreClosedError, StoreSchemaError, StoreTimeoutError

__all__ = ["SQLiteStore"]

Synchronous = Literal["OFF", "NORMAL", "FULL", "EXTRA"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS cantata_meta (
    name TEXT PRIMARY KEY, value TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS cantata_log_entries (
    log TEXT NOT NULL, pos INTEGER NOT NULL, value TEXT NOT NULL, PRIMARY KEY (log, pos)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS cantata_values (
    key TEXT PRIMARY KEY, value TEXT NOT NULL
) WITHOUT ROWID;
"""
_LENGTH = "SELECT COALESCE(MAX(pos) + 1, 0) FROM cantata_log_entries WHERE log = ?"
_INSERT_ENTRY = "INSERT INTO cantata_log_entries (log, pos, value) VALUES (?, ?, ?)"
# Negative bounds count from the end: one statement, so one snapshot of the length.
_READ_FROM_END = """
WITH n AS (SELECT COALESCE(MAX(pos) + 1, 0) AS len FROM cantata_log_entries WHERE log = :log)
SELECT pos, value FROM cantata_log_entries, n WHERE log = :log
AND pos >= CASE WHEN :start < 0 THEN n.len + :start ELSE :start END
AND pos < CASE WHEN :stop IS NULL THEN n.len WHEN :stop < 0 THEN n.len + :stop ELSE :stop END
ORDER BY pos
"""
_PUT = "INSERT OR REPLACE INTO cantata_values (key, value) VALUES (?, ?)"
_PUT_IF_ABSENT = (
    "INSERT INTO cantata_values (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING"
)


class SQLiteStore(StoreLifecycle):
    """A `StateStore` in one SQLite file (or ``":memory:"`` for tests).

    The file is in WAL mode, so readers never block the writer. Within a process, one
    connection serves every task and an asyncio lock keeps each operation whole; across
    processes, every write transaction starts with ``BEGIN IMMEDIATE`` and waits up to
    `busy_timeout` seconds for the file's write lock. An append reads the log's length and
    inserts its entries at the next positions in that one transaction, so entries of one
    call are contiguous and positions are dense from 0; appends that tasks make to one log
    at the same time share one transaction (group commit).

    Every wait is bounded: the asyncio lock is held for one operation, and each operation
    waits at most `busy_timeout` for the file (then `StoreTimeoutError`).

    Each ``SQLiteStore(":memory:")`` is a private database of its own, gone on `close()`.
    `synchronous` is SQLite's setting: with ``"NORMAL"`` (the default) a crash of the
    application loses nothing committed, but a power cut may undo the last commits;
    ``"FULL"`` survives that too, at the price of a disk sync per commit.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout: float = 30.0,
        synchronous: Synchronous = "NORMAL",
    ) -> None:
        self.path = os.fspath(path)
        plain = len(self.path) <= 120 and self.path.isprintable()
        where = self.path if plain else short_repr(self.path, 120)
        super().__init__(f"SQLiteStore at {where}")
        _check_path(self.path, self._label)
        if synchronous not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise ConfigurationError(
                f"{self._label}: synchronous={short_repr(synchronous)} is not one of "
                "'OFF', 'NORMAL', 'FULL', 'EXTRA'"
            )
        if not (
            isinstance(busy_timeout, int | float)
            and not isinstance(busy_timeout, bool)
            and 0 <= busy_timeout < 10**9
        ):
            raise ConfigurationError(
                f"{self._label}: busy_timeout must be >= 0 seconds, got {short_repr(busy_timeout)}"
            )
        self._busy_timeout = busy_timeout
        self._synchronous = synchronous
        self._db: aiosqlite.Connection | None = None
        self._lock = asyncio.Lock()
        self._batcher = AppendBatcher(self._write_entries)

    # -- lifecycle -------------------------------------------------------------------------

    async def _connect(self) -> None:
        pending = aiosqlite.connect(self.path, timeout=self._busy_timeout, isolation_level=None)
        worker = getattr(pending, "_thread", None)
        if isinstance(worker, threading.Thread):
            # aiosqlite's worker is not a daemon, and the interpreter waits for such threads
            # before anything else at exit: a store never closed (or an exception before
            # `close()`) would hang the process forever. Committed data is on disk already.
            worker.daemon = True
        try:
            db = await pending
        except BaseException as exc:
            # On an error, and on a cancellation too, aiosqlite stops its worker thread
            # without waiting for it; wait here, so that the thread never reports back to
            # an event loop that has closed meanwhile ("Event loop is closed" in the thread).
            await _worker_ended(pending)
            if isinstance(exc, sqlite3.Error | OSError | ValueError):
                raise StoreError(
                    f"cannot open the SQLite database {short_repr(self.path, 200)}: {exc}; "
                    "check that its directory exists and is writable"
                ) from exc
            raise
        try:
            await db.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout * 1000)}")
            await self._enable_wal(db)
            await db.execute(f"PRAGMA synchronous = {self._synchronous}")
            await self._create_schema(db)
        except sqlite3.Error as exc:
            await _close(db)
            self._fail("prepare the database", exc)
        except BaseException:
            await _close(db)
            raise
        self._db = db

    async def _enable_wal(self, db: aiosqlite.Connection) -> None:
        """Switch the file to WAL, retrying while other connections hold it.

        Changing the journal mode needs the file to itself, and SQLite answers "database is
        locked" at once instead of calling the busy handler, so several stores opening one
        new file together would fail without this retry.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._busy_timeout
        delay = 0.005
        while True:
            try:
                await db.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc) or loop.time() + delay > deadline:
                    raise (StoreTimeoutError if _is_busy(exc) else StoreError)(
                        f"{self._label}: cannot switch the database to WAL mode: {exc}; "
                        f"another process held it for busy_timeout={self._busy_timeout}s"
                    ) from exc
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.25)

    async def _create_schema(self, db: aiosqlite.Connection) -> None:
        try:
            # Usually the tables exist: check without taking the write lock.
            if await self._schema_version(db) is not None:
                return
            await db.execute("BEGIN IMMEDIATE")
            try:
                if await self._schema_version(db) is None:
                    for statement in _SCHEMA.split(";"):
                        if statement.strip():
                            await db.execute(statement)
                    await db.execute(
                        "INSERT INTO cantata_meta (name, value) VALUES ('schema_version', ?)",
                        (str(SCHEMA_VERSION),),
                    )
                await db.execute("COMMIT")
            except BaseException:
                await _rollback(db)
                raise
        except sqlite3.Error as exc:
            self._fail("create its tables", exc)

    async def _schema_version(self, db: aiosqlite.Connection) -> str | None:
        """The version on file (None when there is none), refusing one this code does not know."""
        sql = "SELECT value FROM cantata_meta WHERE name = 'schema_version'"
        try:
            rows = list(await db.execute_fetchall(sql))
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return None
            raise
        if not rows:
            return None
        version = str(rows[0][0])
        if version != str(SCHEMA_VERSION):
            raise StoreSchemaError(
                f"{self._label}: the database has store schema version {short_repr(version)}, "
                f"this cantata knows version {SCHEMA_VERSION}; upgrade cantata, "
                "or point the store at another file"
            )
        return version

    async def _disconnect(self) -> None:
        async with self._lock:
            db, self._db = self._db, None
            if db is not None:
                await _close(db)

    async def _conn(self) -> aiosqlite.Connection:
        """The connection, for a caller that holds `_lock`."""
        db = self._db
        if db is None:
            raise StoreClosedError(f"{self._label} is closed; create a new store to keep working")
        return db

    def _fail(self, action: str, exc: sqlite3.Error) -> NoReturn:
        if _is_busy(exc):
            raise StoreTimeoutError(
                f"{self._label}: cannot {action}: {exc}; another connection held the write "
                f"lock longer than busy_timeout={self._busy_timeout}s; raise busy_timeout or "
                "shorten its writes",
                action=action,
            ) from exc
        hint = "check the file and its permissions"
        raise StoreError(f"{self._label}: cannot {action}: {exc}; {hint}") from exc

    # -- logs ------------------------------------------------------------------------------

    async def append(self, log: str, entries: Sequence[Any]) -> int:
        """Append entries atomically and contiguously; returns the log's new length."""
        check_name(log, store=self._label, kind="log name")
        where = f"an entry of log {quoted(log)}"
        texts = [encode(entry, store=self._label, where=where) for entry in entries]
        if not texts:
            return await self.length(log)
        await self._ready()
        return await self._batcher.append(log, texts)

    async def _write_entries(self, log: str, texts: list[str]) -> int:
        async with self._lock:
            db = await self._conn()
            try:
                await db.execute("BEGIN IMMEDIATE")
                try:
                    start = await _scalar(db, _LENGTH, (log,))
                    await db.executemany(
                        _INSERT_ENTRY, [(log, start + i, text) for i, text in enumerate(texts)]
                    )
                    await db.execute("COMMIT")
                except BaseException:
                    await _rollback(db)
                    raise
            except sqlite3.Error as exc:
                self._fail(f"append to log {quoted(log)}", exc)
            return start + len(texts)

    async def read(self, log: str, start: int = 0, stop: int | None = None) -> list[Any]:
        """Entries `start` to `stop` of a log, with the meaning of a Python slice."""
        check_name(log, store=self._label, kind="log name")
        check_index(start, store=self._label, name="start")
        if stop is not None:
            check_index(stop, store=self._label, name="stop")
        await self._ready()
        async with self._lock:
            db = await self._conn()
            try:
                if start < 0 or (stop is not None and stop < 0):
                    params = {"log": log, "start": start, "stop": stop}
                    rows = await db.execute_fetchall(_READ_FROM_END, params)
                else:
                    rows = await _rows(db, log, start, stop)
            except sqlite3.Error as exc:
                self._fail(f"read log {quoted(log)}", exc)
        label = self._label
        return [decode(v, store=label, where=f"entry {p} of log {quoted(log)}") for p, v in rows]

    async def length(self, log: str) -> int:
        """Number of entries in a log (0 for a log never written)."""
        check_name(log, store=self._label, kind="log name")
        await self._ready()
        async with self._lock:
            try:
                return await _scalar(await self._conn(), _LENGTH, (log,))
            except sqlite3.Error as exc:
                self._fail(f"read the length of log {quoted(log)}", exc)

    async def delete_log(self, log: str) -> None:
        """Remove a log; a missing log is fine."""
        check_name(log, store=self._label, kind="log name")
        await self._execute(
            "DELETE FROM cantata_log_entries WHERE log = ?", (log,), f"delete log {quoted(log)}"
        )

    # -- values ----------------------------------------------------------------------------

    async def get(self, key: str) -> Any | None:
        """The value at `key`, or None."""
        check_name(key, store=self._label, kind="key")
        await self._ready()
        async with self._lock:
            try:
                rows = list(
                    await (await self._conn()).execute_fetchall(
                        "SELECT value FROM cantata_values WHERE key = ?", (key,)
                    )
                )
            except sqlite3.Error as exc:
                self._fail(f"read key {quoted(key)}", exc)
        if not rows:
            return None
        return decode(rows[0][0], store=self._label, where=f"the value at key {quoted(key)}")

    async def put(self, key: str, value: Any) -> None:
        """Set a value (JSON data)."""
        check_name(key, store=self._label, kind="key")
        text = encode(value, store=self._label, where=f"key {quoted(key)}")
        await self._execute(_PUT, (key, text), f"write key {quoted(key)}")

    async def put_many(self, items: Mapping[str, Any]) -> None:
        """Set several values in one transaction: all or none."""
        rows = []
        for key, value in items.items():
            check_name(key, store=self._label, kind="key")
            rows.append((key, encode(value, store=self._label, where=f"key {quoted(key)}")))
        if not rows:
            return
        await self._ready()
        async with self._lock:
            db = await self._conn()
            try:
                await db.execute("BEGIN IMMEDIATE")
                try:
                    await db.executemany(_PUT, rows)
                    await db.execute("COMMIT")
                except BaseException:
                    await _rollback(db)
                    raise
            except sqlite3.Error as exc:
                self._fail(f"write keys {short_repr([k for k, _ in rows], 200)}", exc)

    async def put_if_absent(self, key: str, value: Any) -> bool:
        """Set a value unless the key holds one (one INSERT ... ON CONFLICT DO NOTHING, so
        one of two processes on the file wins); True if this call set it."""
        check_name(key, store=self._label, kind="key")
        text = encode(value, store=self._label, where=f"key {quoted(key)}")
        await self._ready()
        async with self._lock:
            try:
                cursor = await (await self._conn()).execute(_PUT_IF_ABSENT, (key, text))
                return bool(cursor.rowcount == 1)
            except sqlite3.Error as exc:
                self._fail(f"write key {quoted(key)} if absent", exc)

    async def delete(self, key: str) -> None:
        """Remove a value; a missing key is fine."""
        check_name(key, store=self._label, kind="key")
        await self._execute(
            "DELETE FROM cantata_values WHERE key = ?", (key,), f"delete key {quoted(key)}"
        )

    async def keys(self, prefix: str = "") -> list[str]:
        """Keys that start with `prefix`, sorted by code point."""
        check_name(prefix, store=self._label, kind="key prefix")
        upper = prefix_upper(prefix)
        sql = "SELECT key FROM cantata_values WHERE key >= ?"
        params: tuple[str, ...] = (prefix,)
        if upper is not None:
            sql += " AND key < ?"
            params = (prefix, upper)
        await self._ready()
        async with self._lock:
            try:
                rows = await (await self._conn()).execute_fetchall(sql + " ORDER BY key", params)
            except sqlite3.Error as exc:
                self._fail(f"list keys with prefix {quoted(prefix)}", exc)
        return [row[0] for row in rows]

    async def _execute(self, sql: str, params: Iterable[Any], action: str) -> None:
        await self._ready()
        async with self._lock:
            try:
                await (await self._conn()).execute(sql, params)
            except sqlite3.Error as exc:
                self._fail(action, exc)


# A bound for a busy machine, not a measured time: after `stop()` the worker has at most
# one `sqlite3.connect` left to run, which waits for no lock.
_WORKER_EXIT_BOUND = 5.0


async def _worker_ended(conn: aiosqlite.Connection) -> None:
    """Wait, at most `_WORKER_EXIT_BOUND` seconds, for a stopped connection's thread to end."""
    thread = getattr(conn, "_thread", None)
    if not isinstance(thread, threading.Thread) or thread.ident is None:
        return  # never started
    try:
        await asyncio.to_thread(thread.join, _WORKER_EXIT_BOUND)
    except asyncio.CancelledError:
        thread.join(_WORKER_EXIT_BOUND)  # cancelled again: still wait, blocking but bounded
        raise


async def _close(db: aiosqlite.Connection) -> None:
    """Close the connection and wait for its worker thread to end."""
    try:
        await db.close()
    finally:
        await _worker_ended(db)


async def _scalar(db: aiosqlite.Connection, sql: str, params: Iterable[Any]) -> int:
    rows = list(await db.execute_fetchall(sql, params))
    return int(rows[0][0])


async def _rows(
    db: aiosqlite.Connection, log: str, start: int, stop: int | None
) -> Iterable[sqlite3.Row]:
    if stop is None:
        sql = "SELECT pos, value FROM cantata_log_entries WHERE log = ? AND pos >= ? ORDER BY pos"
        return await db.execute_fetchall(sql, (log, start))
    sql = (
        "SELECT pos, value FROM cantata_log_entries "
        "WHERE log = ? AND pos >= ? AND pos < ? ORDER BY pos"
    )
    return await db.execute_fetchall(sql, (log, start, stop))


def _check_path(path: Any, label: str) -> None:
    """A path SQLite can be given: a str without NUL that is valid Unicode."""
    if type(path) is not str:
        raise ConfigurationError(
            f"{label}: the path must be a str or an os.PathLike of str, got {type(path).__name__}"
        )
    if "\x00" in path:
        raise ConfigurationError(f"{label}: the path contains a NUL character; remove it")
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigurationError(
            f"{label}: the path is not valid Unicode (a lone surrogate); SQLite needs a "
            "UTF-8 path: rename the file or pass a path made of proper text"
        ) from None


def _is_busy(exc: sqlite3.Error) -> bool:
    text = str(exc)
    return "locked" in text or "busy" in text


async def _rollback(db: aiosqlite.Connection) -> None:
    # Also reached after a cancellation: the transaction may already be gone.
    with contextlib.suppress(sqlite3.Error):
        await db.execute("ROLLBACK")
