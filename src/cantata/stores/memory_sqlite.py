"""An item store in one SQLite file: FTS5 for text, numpy over cached matrices for vectors.

Every operation runs whole, as one plain function, on the store's own worker thread with
its own connection: one thread hop per call, a write is one ``BEGIN IMMEDIATE``
transaction (so nothing is half-written, and other processes on the file wait for it),
and the matrix product of a vector query runs off the event loop. Vectors are kept as
float32 blobs; each namespace's are loaded into one matrix on first query and kept while
the namespace's version (bumped in every write's transaction, by any process) stands.
SQLite extension loading is not needed, so this works on any Python build.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import json
import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NoReturn, TypeVar

import numpy as np

from ..core import ConfigurationError, StoreError, short_repr
from ._codec import decode
from ._lifecycle import StoreLifecycle
from .errors import StoreClosedError, StoreSchemaError, StoreTimeoutError
from .memory_base import CheckedWrite, ItemStoreBase, Query, hits, opened_size, settled_size
from .memory_filters import Condition, sqlite_where
from .memory_items import Item, Namespace, SearchHit, decode_path, path_upper
from .memory_text import fts5_query
from .memory_vectors import NamespaceMatrix, VectorCache, load_matrix, masked, top_k

__all__ = ["SQLiteItemStore"]

SCHEMA_VERSION = 2
"""Version 1: namespaces with versions, items (JSON value, text, float32 vector), FTS5 kept
by triggers. Version 2: the same tables; a write keeps FTS5 itself, one statement a batch
(a trigger ran once a row, and each run flushed FTS5's pending terms: 2x slower puts).
Version 1 files are upgraded on open (the insert and update triggers dropped)."""

T = TypeVar("T")

_SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS cantata_item_meta (
    name TEXT PRIMARY KEY, value TEXT NOT NULL
) WITHOUT ROWID
    """,
    """
CREATE TABLE IF NOT EXISTS cantata_item_namespaces (
    id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE, version INTEGER NOT NULL
)
    """,
    """
CREATE TABLE IF NOT EXISTS cantata_items (
    id INTEGER PRIMARY KEY,
    ns INTEGER NOT NULL,
    path TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    text TEXT,
    vector BLOB,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    expires_at REAL,
    UNIQUE (path, key)
)
    """,
    """
CREATE INDEX IF NOT EXISTS cantata_items_by_ns ON cantata_items (ns, id)
    """,
    """
CREATE INDEX IF NOT EXISTS cantata_items_expiry ON cantata_items (expires_at)
    WHERE expires_at IS NOT NULL
    """,
    """
CREATE VIRTUAL TABLE IF NOT EXISTS cantata_items_fts USING fts5(
    text, content='cantata_items', content_rowid='id', tokenize='unicode61 remove_diacritics 2'
)
    """,
    """
CREATE TRIGGER IF NOT EXISTS cantata_items_fts_delete AFTER DELETE ON cantata_items
WHEN old.text IS NOT NULL BEGIN
    INSERT INTO cantata_items_fts (cantata_items_fts, rowid, text)
    VALUES ('delete', old.id, old.text);
END
    """,
    "DROP TRIGGER IF EXISTS cantata_items_fts_insert",  # version 1's
    "DROP TRIGGER IF EXISTS cantata_items_fts_update",
)
_COLUMNS = "i.id, i.path, i.key, i.value, i.text, i.created_at, i.updated_at, i.expires_at"
_LIVE = "(i.expires_at IS NULL OR i.expires_at > ?)"
_UPSERT_NS = """
INSERT INTO cantata_item_namespaces (path, version) VALUES (?, 0)
ON CONFLICT (path) DO UPDATE SET version = version + 1 RETURNING id
"""
_UPSERT = """
INSERT INTO cantata_items (ns, path, key, value, text, vector, created_at, updated_at, expires_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (path, key) DO UPDATE SET
    value = excluded.value, text = excluded.text, vector = excluded.vector,
    updated_at = excluded.updated_at, expires_at = excluded.expires_at,
    created_at = CASE WHEN cantata_items.expires_at IS NOT NULL
        AND cantata_items.expires_at <= excluded.updated_at
        THEN excluded.created_at ELSE cantata_items.created_at END
"""
_BUMP = "UPDATE cantata_item_namespaces SET version = version + 1 WHERE path = ?"
# The rows of one batch, by (path, key) given as one JSON array: so FTS5 is kept in one
# statement a batch, before (old texts out) and after (new texts in) the upsert.
_BATCH = (
    "FROM json_each(?) j JOIN cantata_items i "
    "ON i.path = j.value ->> 0 AND i.key = j.value ->> 1 WHERE i.text IS NOT NULL"
)
_FTS_OUT = (
    "INSERT INTO cantata_items_fts (cantata_items_fts, rowid, text) "
    f"SELECT 'delete', i.id, i.text {_BATCH}"
)
_FTS_IN = f"INSERT INTO cantata_items_fts (rowid, text) SELECT i.id, i.text {_BATCH}"


class SQLiteItemStore(StoreLifecycle, ItemStoreBase):
    """An `ItemStore` in one SQLite file (or ``":memory:"``), shared safely by processes.

    The file may be the one a `SQLiteStore` uses: the tables are apart. `dimensions`
    fixes the size of the vectors (else the first vector written does, and the file keeps
    it). `cache_rows` bounds the vectors kept in memory as matrices (the least recently
    queried namespaces go first). `clock` gives the time, for TTL.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        dimensions: int | None = None,
        busy_timeout: float = 30.0,
        cache_rows: int = 2_000_000,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = os.fspath(path)
        plain = len(self.path) <= 120 and self.path.isprintable()
        super().__init__(f"SQLiteItemStore at {self.path if plain else short_repr(self.path)}")
        from .sqlite import _check_path

        _check_path(self.path, self._label)
        if dimensions is not None and (type(dimensions) is not int or dimensions < 1):
            raise ConfigurationError(f"{self._label}: dimensions must be an int >= 1")
        if not (isinstance(busy_timeout, int | float) and 0 <= busy_timeout < 1e9):
            raise ConfigurationError(f"{self._label}: busy_timeout must be >= 0 seconds")
        self._dimensions = dimensions
        self._busy_timeout = float(busy_timeout)
        self._clock = clock
        self._cache = VectorCache(cache_rows)
        self._db: sqlite3.Connection | None = None
        self._worker: ThreadPoolExecutor | None = None

    # -- lifecycle ------------------------------------------------------------------------

    async def _connect(self) -> None:
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="cantata-items")
        try:
            await self._in_worker(self._open_sync)
        except BaseException:
            self._worker.shutdown(wait=False)
            self._worker = None
            raise

    async def _disconnect(self) -> None:
        worker, self._worker = self._worker, None
        if worker is None:
            return
        try:
            await asyncio.get_running_loop().run_in_executor(worker, self._close_sync)
        finally:
            worker.shutdown(wait=False)

    def _open_sync(self) -> None:
        try:
            db = sqlite3.connect(
                self.path,
                timeout=self._busy_timeout,
                isolation_level=None,
                check_same_thread=False,
            )
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(
                f"cannot open the SQLite database {short_repr(self.path, 200)}: {exc}; "
                "check that its directory exists and is writable"
            ) from exc
        try:
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("PRAGMA synchronous = NORMAL")
            self._create_schema(db)
        except sqlite3.Error as exc:
            db.close()
            self._fail("prepare the database", exc)
        except BaseException:
            db.close()
            raise
        self._db = db

    def _create_schema(self, db: sqlite3.Connection) -> None:
        with _transaction(db):
            for statement in _SCHEMA:
                db.execute(statement)
            rows = db.execute(
                "SELECT name, value FROM cantata_item_meta WHERE name IN "
                "('schema_version', 'dimensions')"
            ).fetchall()
            meta = dict(rows)
            version = meta.get("schema_version")
            if version is None:
                db.execute(
                    "INSERT INTO cantata_item_meta VALUES ('schema_version', ?)",
                    (str(SCHEMA_VERSION),),
                )
            elif version == "1":  # the same tables; its triggers are dropped above
                db.execute(
                    "UPDATE cantata_item_meta SET value = ? WHERE name = 'schema_version'",
                    (str(SCHEMA_VERSION),),
                )
            elif version != str(SCHEMA_VERSION):
                raise StoreSchemaError(
                    f"{self._label}: the database has item schema version "
                    f"{short_repr(version)}, this cantata knows {SCHEMA_VERSION}; upgrade "
                    "cantata, or use another file"
                )
            self._settle_dimensions(db, meta.get("dimensions"))

    def _settle_dimensions(self, db: sqlite3.Connection, stored: str | None) -> None:
        self._dimensions = opened_size(stored, self._dimensions, store=self._label)
        if stored is None and self._dimensions is not None:
            db.execute(
                "INSERT INTO cantata_item_meta VALUES ('dimensions', ?)", (str(self._dimensions),)
            )

    def _close_sync(self) -> None:
        db, self._db = self._db, None
        self._cache.clear()
        if db is not None:
            db.close()

    async def _in_worker(self, fn: Callable[..., T], *args: Any) -> T:
        worker = self._worker
        if worker is None:
            raise StoreClosedError(f"{self._label} is closed; create a new store to keep working")
        return await asyncio.get_running_loop().run_in_executor(worker, fn, *args)

    async def _begin(self) -> None:
        await self._ready()

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        await self._ready()
        return await self._in_worker(self._guarded, fn, *args)

    def _guarded(self, fn: Callable[..., T], *args: Any) -> T:
        db = self._db
        if db is None:
            raise StoreClosedError(f"{self._label} is closed; create a new store to keep working")
        try:
            return fn(db, *args)
        except sqlite3.Error as exc:
            name = getattr(fn, "__name__", "run").removesuffix("_sync")
            self._fail(name.strip("_").replace("_", " "), exc)

    def _fail(self, action: str, exc: sqlite3.Error) -> NoReturn:
        text = str(exc)
        if "locked" in text or "busy" in text:
            raise StoreTimeoutError(
                f"{self._label}: cannot {action}: {exc}; another connection held the write "
                f"lock longer than busy_timeout={self._busy_timeout}s",
                action=action,
            ) from exc
        raise StoreError(f"{self._label}: cannot {action}: {exc}; check the file") from exc

    # -- writes ---------------------------------------------------------------------------

    async def _write_items(self, writes: builtins.list[CheckedWrite], size: int | None) -> None:
        await self._run(self._write_items_sync, writes, size)

    def _write_items_sync(
        self, db: sqlite3.Connection, writes: builtins.list[CheckedWrite], size: int | None
    ) -> None:
        now = self._clock()
        with _transaction(db):
            if size is not None:
                self._settle_size(db, size)
            self._sweep_in(db, now)
            ns_ids: dict[str, int] = {}
            for path in dict.fromkeys(w.path for w in writes):
                ns_ids[path] = db.execute(_UPSERT_NS, (path,)).fetchone()[0]
            # each row once (a batch may write a key twice): FTS5 must see it once
            batch = json.dumps(list(dict.fromkeys((w.path, w.key) for w in writes)))
            db.execute(_FTS_OUT, (batch,))
            db.executemany(
                _UPSERT,
                [
                    (
                        ns_ids[w.path],
                        w.path,
                        w.key,
                        w.json,
                        w.text,
                        w.blob,
                        now,
                        now,
                        None if w.ttl is None else now + w.ttl,
                    )
                    for w in writes
                ],
            )
            db.execute(_FTS_IN, (batch,))

    def _settle_size(self, db: sqlite3.Connection, size: int) -> None:
        stored = db.execute(
            "SELECT value FROM cantata_item_meta WHERE name = 'dimensions'"
        ).fetchone()
        self._dimensions = settled_size(
            None if stored is None else stored[0], size, store=self._label
        )
        if stored is None:
            db.execute("INSERT INTO cantata_item_meta VALUES ('dimensions', ?)", (str(size),))

    async def _delete_item(self, path: str, key: str) -> bool:
        return await self._run(self._delete_item_sync, path, key)

    def _delete_item_sync(self, db: sqlite3.Connection, path: str, key: str) -> bool:
        now = self._clock()
        with _transaction(db):
            row = db.execute(
                "DELETE FROM cantata_items WHERE path = ? AND key = ? RETURNING expires_at",
                (path, key),
            ).fetchone()
            if row is None:
                return False
            db.execute(_BUMP, (path,))
        return bool(row[0] is None or row[0] > now)

    async def _clear_items(self, path: str) -> int:
        return await self._run(self._clear_items_sync, path)

    def _clear_items_sync(self, db: sqlite3.Connection, path: str) -> int:
        now = self._clock()
        where, params = _range("path", path)
        with _transaction(db):
            live = db.execute(
                f"SELECT count(*) FROM cantata_items i WHERE {where} AND {_LIVE}",
                (*params, now),
            ).fetchone()[0]
            db.execute(f"DELETE FROM cantata_items WHERE {where}", params)
            gone = db.execute(
                f"DELETE FROM cantata_item_namespaces WHERE {where} RETURNING id", params
            ).fetchall()
        for (ns_id,) in gone:
            self._cache.drop(ns_id)
        return int(live)

    async def _sweep_items(self) -> int:
        return await self._run(self._sweep_items_sync)

    def _sweep_items_sync(self, db: sqlite3.Connection) -> int:
        with _transaction(db):
            return self._sweep_in(db, self._clock())

    def _sweep_in(self, db: sqlite3.Connection, now: float) -> int:
        gone = db.execute(
            "DELETE FROM cantata_items WHERE expires_at IS NOT NULL AND expires_at <= ? "
            "RETURNING path",
            (now,),
        ).fetchall()
        for path in {p for (p,) in gone}:
            db.execute(_BUMP, (path,))
        return len(gone)

    # -- reads ----------------------------------------------------------------------------

    async def _get_item(self, path: str, key: str) -> Item | None:
        return await self._run(self._get_item_sync, path, key)

    def _get_item_sync(self, db: sqlite3.Connection, path: str, key: str) -> Item | None:
        row = db.execute(
            f"SELECT {_COLUMNS} FROM cantata_items i WHERE i.path = ? AND i.key = ? AND {_LIVE}",
            (path, key, self._clock()),
        ).fetchone()
        return None if row is None else self._item(row)

    async def _list_items(
        self, path: str, conditions: builtins.list[Condition], limit: int, offset: int
    ) -> builtins.list[Item]:
        return await self._run(self._list_items_sync, path, conditions, limit, offset)

    def _list_items_sync(
        self,
        db: sqlite3.Connection,
        path: str,
        conditions: builtins.list[Condition],
        limit: int,
        offset: int,
    ) -> builtins.list[Item]:
        where, params = self._scope(path, conditions)
        rows = db.execute(
            f"SELECT {_COLUMNS} FROM cantata_items i WHERE {where} "
            "ORDER BY i.path, i.key LIMIT ? OFFSET ?",
            (*params, limit, offset),
        ).fetchall()
        return [self._item(r) for r in rows]

    async def _list_namespaces(self, path: str) -> builtins.list[Namespace]:
        return await self._run(self._list_namespaces_sync, path)

    def _list_namespaces_sync(self, db: sqlite3.Connection, path: str) -> builtins.list[Namespace]:
        where, params = _range("n.path", path)
        rows = db.execute(
            f"SELECT n.path FROM cantata_item_namespaces n WHERE {where} AND EXISTS ("
            f"SELECT 1 FROM cantata_items i WHERE i.ns = n.id AND {_LIVE}) ORDER BY n.path",
            (*params, self._clock()),
        ).fetchall()
        return [decode_path(p) for (p,) in rows]

    async def _search_items(self, query: Query) -> builtins.list[SearchHit]:
        return await self._run(self._search_items_sync, query)

    def _search_items_sync(self, db: sqlite3.Connection, query: Query) -> builtins.list[SearchHit]:
        with _snapshot(db):
            now = self._clock()
            if query.vector is not None and self._dimensions is None:
                self._read_dimensions(db)  # another store on the file may have fixed it since
                query = query.sized(self._dimensions, store=self._label)
            vector_hits = [] if query.vector is None else self._vector_ids(db, query, now)
            text_hits = [] if query.text is None else self._text_ids(db, query, now)
            fused = query.rank(vector_hits, text_hits)
            return hits(fused, self._items_by_id(db, [i for i, *_ in fused]))

    def _vector_ids(
        self, db: sqlite3.Connection, query: Query, now: float
    ) -> builtins.list[tuple[int, float]]:
        if self._dimensions is None or query.vector is None:
            return []  # no vector was ever written
        path, conditions = query.path, query.conditions
        where, params = _range("path", path)
        spaces = db.execute(
            f"SELECT id, version FROM cantata_item_namespaces WHERE {where}", params
        ).fetchall()
        matrices = [self._matrix(db, ns_id, version) for ns_id, version in spaces]
        if conditions:
            scope, sparams = self._scope(path, conditions, now)
            allowed = _ids(
                db,
                f"SELECT i.id FROM cantata_items i WHERE {scope} AND i.vector IS NOT NULL",
                sparams,
            )
            return top_k(masked(matrices, allowed=allowed), query.vector, query.depth)
        expired = _ids(
            db,
            # The expiry index, not the path range: expired rows are few, a scope many.
            "SELECT i.id FROM cantata_items i INDEXED BY cantata_items_expiry "
            "WHERE i.expires_at IS NOT NULL "
            f"AND i.expires_at <= ? AND {_range('i.path', path)[0]}",
            (now, *params),
        )
        return top_k(masked(matrices, expired=expired), query.vector, query.depth)

    def _read_dimensions(self, db: sqlite3.Connection) -> None:
        row = db.execute("SELECT value FROM cantata_item_meta WHERE name = 'dimensions'").fetchone()
        if row is not None:
            self._dimensions = int(row[0])

    def _matrix(self, db: sqlite3.Connection, ns_id: int, version: int) -> NamespaceMatrix:
        cached = self._cache.get(ns_id, version)
        if cached is not None:
            return cached
        dims = self._dimensions or 1  # set: _vector_ids returns early without it
        rows = db.execute(
            "SELECT id, vector FROM cantata_items WHERE ns = ? AND vector IS NOT NULL ORDER BY id",
            (ns_id,),
        )
        entry = load_matrix(version, rows, dims)
        self._cache.put(ns_id, entry)
        return entry

    def _text_ids(
        self, db: sqlite3.Connection, query: Query, now: float
    ) -> builtins.list[tuple[int, float]]:
        match = None if query.text is None else fts5_query(query.text)
        if match is None:
            return []
        scope, params = self._scope(query.path, query.conditions, now)
        rows = db.execute(
            "SELECT i.id, -bm25(cantata_items_fts) AS score FROM cantata_items_fts "
            "JOIN cantata_items i ON i.id = cantata_items_fts.rowid "
            f"WHERE cantata_items_fts MATCH ? AND {scope} ORDER BY score DESC, i.id LIMIT ?",
            (match, *params, query.depth),
        ).fetchall()
        return [(int(i), float(s)) for i, s in rows]

    def _items_by_id(self, db: sqlite3.Connection, ids: builtins.list[int]) -> dict[int, Item]:
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        rows = db.execute(
            f"SELECT {_COLUMNS} FROM cantata_items i WHERE i.id IN ({marks})", ids
        ).fetchall()
        return {r[0]: self._item(r) for r in rows}

    def _scope(
        self, path: str, conditions: builtins.list[Condition], now: float | None = None
    ) -> tuple[str, builtins.list[Any]]:
        """The WHERE clause of a read: the prefix range, liveness, the filter."""
        where, params = _range("i.path", path)
        params = [*params, self._clock() if now is None else now]
        filtered = sqlite_where(conditions, params, "i.value")
        return f"{where} AND {_LIVE} AND {filtered}", params

    def _item(self, row: tuple[Any, ...]) -> Item:
        _, path, key, value, text, created, updated, expires = row
        where = f"the value of item {key!r}"
        return Item(
            decode_path(path),
            key,
            decode(value, store=self._label, where=where),
            text,
            created,
            updated,
            expires,
        )


def _range(column: str, path: str) -> tuple[str, list[Any]]:
    """A condition on `column` for every path that starts with `path`."""
    upper = path_upper(path)
    if upper is None:
        return "1", []
    return f"{column} >= ? AND {column} < ?", [path, upper]


def _ids(db: sqlite3.Connection, sql: str, params: Sequence[Any]) -> np.ndarray:
    return np.fromiter((r[0] for r in db.execute(sql, params)), dtype=np.int64)


@contextlib.contextmanager
def _transaction(db: sqlite3.Connection) -> Any:
    """BEGIN IMMEDIATE ... COMMIT, rolled back on any error."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


@contextlib.contextmanager
def _snapshot(db: sqlite3.Connection) -> Any:
    """One read transaction, so every statement of a query sees the same data."""
    db.execute("BEGIN")
    try:
        yield
    finally:
        with contextlib.suppress(sqlite3.Error):
            db.execute("COMMIT")
