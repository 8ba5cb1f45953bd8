"""An item store in PostgreSQL: tsvector full text, vectors scored with numpy over cached
matrices (as on SQLite), for many processes on many machines.

Texts are tokenized here, by the tokenizer every backend shares, and stored as a
``simple`` tsvector of those words, so a query finds what it finds on SQLite (accents
folded, no stemming). Vectors are float32 blobs; each namespace's are loaded once into a
matrix and kept while its version (bumped in every write's transaction) stands. A query
reads in one REPEATABLE READ transaction, so its statements see one snapshot.
"""

from __future__ import annotations

import builtins
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn

import numpy as np
import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from ..core import ConfigurationError, StoreError, short_repr
from ._codec import encode
from ._lifecycle import StoreLifecycle
from .errors import StoreClosedError, StoreSchemaError, StoreTimeoutError
from .memory_errors import VectorSizeError
from .memory_filters import Condition, parse_filter, postgres_where
from .memory_items import (
    Item,
    ItemWrite,
    Namespace,
    SearchHit,
    check_key,
    check_limit,
    check_namespace,
    check_text,
    check_ttl,
    check_value,
    decode_path,
    encode_path,
    path_upper,
    unit_vector,
)
from .memory_local import candidates
from .memory_text import fuse, tokenize, tsquery
from .memory_vectors import VectorCache, load_matrix, top_k

__all__ = ["PostgresItemStore"]

SCHEMA_VERSION = 1
_PREFIX = re.compile(r"[a-z_][a-z0-9_]{0,39}")
_COLUMNS = "i.id, i.path, i.key, i.value, i.text, i.created_at, i.updated_at, i.expires_at"
_LIVE = "(i.expires_at IS NULL OR i.expires_at > %s)"


class PostgresItemStore(StoreLifecycle):
    """An `ItemStore` in three PostgreSQL tables (``<prefix>items`` and two beside it).

    `table_prefix` keeps several stores apart in one database. Every statement is bounded
    by `statement_timeout` seconds, and getting a connection by `connect_timeout`.
    """

    def __init__(
        self,
        dsn: str,
        *,
        table_prefix: str = "cantata_",
        dimensions: int | None = None,
        min_size: int = 1,
        max_size: int = 4,
        connect_timeout: float = 10.0,
        statement_timeout: float | None = 30.0,
        cache_rows: int = 2_000_000,
        clock: Callable[[], float] = time.time,
    ) -> None:
        try:
            info = conninfo_to_dict(dsn)
        except psycopg.ProgrammingError as exc:
            raise ConfigurationError(f"invalid PostgreSQL DSN: {exc}") from exc
        where = f"{info.get('host') or 'localhost'}:{info.get('port') or 5432}"
        super().__init__(f"PostgresItemStore at {where}/{info.get('dbname', '')}")
        if not _PREFIX.fullmatch(table_prefix):
            raise ConfigurationError(
                f"{self._label}: table_prefix {table_prefix!r} must be lowercase letters, "
                "digits and '_', start with a letter or '_', at most 40 characters"
            )
        if dimensions is not None and (type(dimensions) is not int or dimensions < 1):
            raise ConfigurationError(f"{self._label}: dimensions must be an int >= 1")
        if not 1 <= min_size <= max_size:
            raise ConfigurationError(f"{self._label}: need 1 <= min_size <= max_size")
        self.dsn = dsn
        self.table_prefix = table_prefix
        self.statement_timeout = statement_timeout
        self._dimensions = dimensions
        self._min_size, self._max_size = min_size, max_size
        self._timeout = connect_timeout
        self._clock = clock
        self._cache = VectorCache(cache_rows)
        self._pool: AsyncConnectionPool | None = None
        p = table_prefix
        self._meta, self._spaces, self._items = f"{p}item_meta", f"{p}item_namespaces", f"{p}items"

    @property
    def dimensions(self) -> int | None:
        """The size of the store's vectors, or None until the first vector fixes it."""
        return self._dimensions

    def _sql(self, text: str) -> bytes:
        return (
            text.replace("{meta}", f'"{self._meta}"')
            .replace("{spaces}", f'"{self._spaces}"')
            .replace("{items}", f'"{self._items}"')
            .encode()
        )

    # -- lifecycle ------------------------------------------------------------------------

    async def _connect(self) -> None:
        pool: AsyncConnectionPool = AsyncConnectionPool(
            self.dsn,
            min_size=self._min_size,
            max_size=self._max_size,
            configure=self._configure,
            timeout=self._timeout,
            open=False,
            name=self._label,
        )
        try:
            await pool.open(wait=True, timeout=self._timeout)
            async with pool.connection() as conn:
                await self._create_schema(conn)
        except (psycopg.Error, PoolTimeout) as exc:
            await pool.close()
            raise StoreError(
                f"cannot open {self._label}: {exc}; check that the server is up and the "
                "DSN's host, port, user and database"
            ) from exc
        except BaseException:
            await pool.close()
            raise
        self._pool = pool

    async def _configure(self, conn: psycopg.AsyncConnection[Any]) -> None:
        if self.statement_timeout is not None:
            millis = max(1, round(self.statement_timeout * 1000))
            await conn.execute(f"SET statement_timeout = {int(millis)}".encode())
            await conn.commit()

    async def _create_schema(self, conn: psycopg.AsyncConnection[Any]) -> None:
        async with conn.transaction():
            await conn.execute(b"SELECT pg_advisory_xact_lock(hashtext(%s))", (self._items,))
            for statement in (
                "CREATE TABLE IF NOT EXISTS {meta} (name text PRIMARY KEY, value text NOT NULL)",
                "CREATE TABLE IF NOT EXISTS {spaces} (id bigserial PRIMARY KEY, "
                'path text COLLATE "C" NOT NULL UNIQUE, version bigint NOT NULL)',
                "CREATE TABLE IF NOT EXISTS {items} (id bigserial PRIMARY KEY, "
                'ns bigint NOT NULL, path text COLLATE "C" NOT NULL, key text NOT NULL, '
                "value jsonb NOT NULL, text text, tsv tsvector, vector bytea, "
                "created_at float8 NOT NULL, updated_at float8 NOT NULL, expires_at float8, "
                "UNIQUE (path, key))",
                f'CREATE INDEX IF NOT EXISTS "{self._items}_ns" ON {{items}} (ns, id)',
                f'CREATE INDEX IF NOT EXISTS "{self._items}_tsv" ON {{items}} USING gin (tsv)',
                f'CREATE INDEX IF NOT EXISTS "{self._items}_expiry" ON {{items}} (expires_at) '
                "WHERE expires_at IS NOT NULL",
            ):
                await conn.execute(self._sql(statement))
            cur = await conn.execute(self._sql("SELECT name, value FROM {meta}"))
            meta = dict(await cur.fetchall())
            version = meta.get("schema_version")
            if version is None:
                await conn.execute(
                    self._sql("INSERT INTO {meta} VALUES ('schema_version', %s)"),
                    (str(SCHEMA_VERSION),),
                )
            elif version != str(SCHEMA_VERSION):
                raise StoreSchemaError(
                    f"{self._label}: tables {self.table_prefix}item* have schema version "
                    f"{short_repr(version)}, this cantata knows {SCHEMA_VERSION}"
                )
            stored = meta.get("dimensions")
            if stored is None and self._dimensions is not None:
                await conn.execute(
                    self._sql("INSERT INTO {meta} VALUES ('dimensions', %s)"),
                    (str(self._dimensions),),
                )
            elif stored is not None:
                if self._dimensions is not None and int(stored) != self._dimensions:
                    raise VectorSizeError(
                        f"{self._label}: the tables hold vectors of {stored} dimensions, the "
                        f"store was opened with dimensions={self._dimensions}"
                    )
                self._dimensions = int(stored)

    async def _disconnect(self) -> None:
        pool, self._pool = self._pool, None
        self._cache.clear()
        if pool is not None:
            await pool.close()

    def _fail(self, action: str, exc: BaseException) -> NoReturn:
        if isinstance(exc, psycopg.errors.QueryCanceled | PoolTimeout):
            raise StoreTimeoutError(
                f"{self._label}: cannot {action}: {exc}; the server or the pool did not answer "
                "in time (statement_timeout, connect_timeout)",
                action=action,
            ) from exc
        raise StoreError(f"{self._label}: cannot {action}: {exc}; check the server") from exc

    async def _run(self, action: str, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(conn, *args)` inside one transaction on a pooled connection."""
        await self._ready()
        pool = self._pool
        if pool is None:
            raise StoreClosedError(f"{self._label} is closed; create a new store to keep working")
        try:
            async with pool.connection() as conn, conn.transaction():
                return await fn(conn, *args)
        except (psycopg.Error, PoolTimeout) as exc:
            if self._closed:
                raise StoreClosedError(f"{self._label} was closed during {action}") from exc
            self._fail(action, exc)

    # -- writes ---------------------------------------------------------------------------

    async def put(
        self,
        namespace: Namespace,
        key: str,
        value: Mapping[str, Any],
        *,
        text: str | None = None,
        vector: Sequence[float] | None = None,
        ttl: float | None = None,
    ) -> None:
        """Create or replace the item at (namespace, key)."""
        await self.put_many([ItemWrite(namespace, key, dict(value), text, vector, ttl)])

    async def put_many(self, writes: Sequence[ItemWrite]) -> None:
        """Several puts in one transaction: all or none."""
        await self._ready()
        label, dims = self._label, self._dimensions
        rows = []
        sizes = set()
        for w in writes:
            path = encode_path(check_namespace(w.namespace, store=label))
            key = check_key(w.key, store=label)
            value = encode(check_value(w.value, store=label), store=label, where=f"item {key!r}")
            text = check_text(w.text, store=label)
            blob = None
            if w.vector is not None:
                unit = unit_vector(w.vector, dims, store=label)
                dims = unit.size
                sizes.add(unit.size)
                blob = unit.tobytes()
            words = None if text is None else " ".join(tokenize(text))
            rows.append((path, key, value, text, words, blob, check_ttl(w.ttl, store=label)))
        if rows:
            await self._run("write items", self._write, rows, sizes)

    async def _write(
        self, conn: psycopg.AsyncConnection[Any], rows: builtins.list[Any], sizes: set[int]
    ) -> None:
        now = self._clock()
        if sizes:
            await self._settle(conn, sizes)
        await self._sweep_in(conn, now)
        ids: dict[str, int] = {}
        for path in dict.fromkeys(r[0] for r in rows):
            cur = await conn.execute(
                self._sql(
                    "INSERT INTO {spaces} (path, version) VALUES (%s, 0) ON CONFLICT (path) "
                    "DO UPDATE SET version = {spaces}.version + 1 RETURNING id"
                ),
                (path,),
            )
            ids[path] = (await cur.fetchone())[0]  # type: ignore[index]
        async with conn.cursor() as cur:
            await cur.executemany(
                self._sql(
                    "INSERT INTO {items} AS i (ns, path, key, value, text, tsv, vector, "
                    "created_at, updated_at, expires_at) VALUES (%s, %s, %s, %s::jsonb, %s, "
                    "to_tsvector('simple', %s), %s, %s, %s, %s) ON CONFLICT (path, key) DO "
                    "UPDATE SET value = excluded.value, text = excluded.text, tsv = excluded.tsv, "
                    "vector = excluded.vector, updated_at = excluded.updated_at, "
                    "expires_at = excluded.expires_at, created_at = CASE WHEN i.expires_at IS "
                    "NOT NULL AND i.expires_at <= excluded.updated_at THEN excluded.created_at "
                    "ELSE i.created_at END"
                ),
                [
                    (ids[p], p, k, v, t, w, b, now, now, None if ttl is None else now + ttl)
                    for p, k, v, t, w, b, ttl in rows
                ],
            )

    async def _settle(self, conn: psycopg.AsyncConnection[Any], sizes: set[int]) -> None:
        size = min(sizes)
        await conn.execute(
            self._sql("INSERT INTO {meta} VALUES ('dimensions', %s) ON CONFLICT DO NOTHING"),
            (str(size),),
        )
        cur = await conn.execute(self._sql("SELECT value FROM {meta} WHERE name = 'dimensions'"))
        self._dimensions = int((await cur.fetchone())[0])  # type: ignore[index]
        for other in sizes:
            if other != self._dimensions:
                unit_vector(np.ones(other), self._dimensions, store=self._label)  # raises

    async def _sweep_in(self, conn: psycopg.AsyncConnection[Any], now: float) -> int:
        cur = await conn.execute(
            self._sql(
                "DELETE FROM {items} WHERE expires_at IS NOT NULL AND expires_at <= %s "
                "RETURNING path"
            ),
            (now,),
        )
        gone = await cur.fetchall()
        for path in sorted({p for (p,) in gone}):
            await conn.execute(
                self._sql("UPDATE {spaces} SET version = version + 1 WHERE path = %s"), (path,)
            )
        return len(gone)

    async def delete(self, namespace: Namespace, key: str) -> bool:
        """Remove an item; True if a live one was there."""
        path = encode_path(check_namespace(namespace, store=self._label))
        check_key(key, store=self._label)

        async def run(conn: psycopg.AsyncConnection[Any]) -> bool:
            cur = await conn.execute(
                self._sql("DELETE FROM {items} WHERE path = %s AND key = %s RETURNING expires_at"),
                (path, key),
            )
            row = await cur.fetchone()
            if row is None:
                return False
            await conn.execute(
                self._sql("UPDATE {spaces} SET version = version + 1 WHERE path = %s"), (path,)
            )
            return bool(row[0] is None or row[0] > self._clock())

        result: bool = await self._run(f"delete item {key!r}", run)
        return result

    async def clear(self, prefix: Namespace) -> int:
        """Remove every item under `prefix`; returns how many live ones there were."""
        path = encode_path(check_namespace(prefix, store=self._label, prefix=True))

        async def run(conn: psycopg.AsyncConnection[Any]) -> int:
            where, params = _range("path", path)
            cur = await conn.execute(
                self._sql(
                    f"DELETE FROM {{items}} i WHERE {where} RETURNING "
                    "(i.expires_at IS NULL OR i.expires_at > %s)"
                ),
                (*params, self._clock()),
            )
            live = sum(1 for (alive,) in await cur.fetchall() if alive)
            cur = await conn.execute(
                self._sql(f"DELETE FROM {{spaces}} WHERE {where} RETURNING id"), params
            )
            for (ns_id,) in await cur.fetchall():
                self._cache.drop(ns_id)
            return live

        result: int = await self._run("clear items", run)
        return result

    async def sweep(self) -> int:
        """Remove expired items now; returns how many."""

        async def run(conn: psycopg.AsyncConnection[Any]) -> int:
            return await self._sweep_in(conn, self._clock())

        result: int = await self._run("sweep expired items", run)
        return result

    # -- reads ----------------------------------------------------------------------------

    async def _rows(self, action: str, query: str, params: Sequence[Any]) -> builtins.list[Any]:
        async def run(conn: psycopg.AsyncConnection[Any]) -> builtins.list[Any]:
            cur = await conn.execute(self._sql(query), params)
            return await cur.fetchall()

        rows: builtins.list[Any] = await self._run(action, run)
        return rows

    async def get(self, namespace: Namespace, key: str) -> Item | None:
        """The live item at (namespace, key), or None."""
        path = encode_path(check_namespace(namespace, store=self._label))
        check_key(key, store=self._label)
        rows = await self._rows(
            f"read item {key!r}",
            f"SELECT {_COLUMNS} FROM {{items}} i WHERE i.path = %s AND i.key = %s AND {_LIVE}",
            (path, key, self._clock()),
        )
        return _item(rows[0]) if rows else None

    async def list(
        self,
        prefix: Namespace,
        *,
        filter: Mapping[str, Any] | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> builtins.list[Item]:
        """Live items under `prefix` that match `filter`, by namespace then key."""
        path = encode_path(check_namespace(prefix, store=self._label, prefix=True))
        conditions = parse_filter(filter, store=self._label)
        check_limit(limit, offset, store=self._label)
        where, params = self._scope(path, conditions, self._clock())
        rows = await self._rows(
            "list items",
            f"SELECT {_COLUMNS} FROM {{items}} i WHERE {where} "
            "ORDER BY i.path, i.key LIMIT %s OFFSET %s",
            (*params, limit, offset),
        )
        return [_item(r) for r in rows]

    async def namespaces(self, prefix: Namespace = ()) -> builtins.list[Namespace]:
        """The namespaces under `prefix` that hold live items, sorted."""
        path = encode_path(check_namespace(prefix, store=self._label, prefix=True))
        where, params = _range("n.path", path)
        rows = await self._rows(
            "list namespaces",
            f"SELECT n.path FROM {{spaces}} n WHERE {where} AND EXISTS (SELECT 1 FROM "
            f"{{items}} i WHERE i.ns = n.id AND {_LIVE}) ORDER BY n.path",
            (*params, self._clock()),
        )
        return [decode_path(p) for (p,) in rows]

    async def search(
        self,
        prefix: Namespace,
        *,
        vector: Sequence[float] | None = None,
        text: str | None = None,
        filter: Mapping[str, Any] | None = None,
        limit: int = 10,
    ) -> builtins.list[SearchHit]:
        """The best `limit` live items under `prefix` (see `ItemStore.search`)."""
        label = self._label
        path = encode_path(check_namespace(prefix, store=label, prefix=True))
        conditions = parse_filter(filter, store=label)
        check_limit(limit, 0, store=label)
        query_text = check_text(text, store=label)
        if vector is None and query_text is None:
            items = await self.list(prefix, filter=filter, limit=limit)
            return [SearchHit(i, 0.0) for i in items]
        await self._ready()
        query = None if vector is None else unit_vector(vector, self._dimensions, store=label)
        result: builtins.list[SearchHit] = await self._run(
            "search items", self._search, path, conditions, query, query_text, limit
        )
        return result

    async def _search(
        self,
        conn: psycopg.AsyncConnection[Any],
        path: str,
        conditions: builtins.list[Condition],
        query: np.ndarray | None,
        text: str | None,
        limit: int,
    ) -> builtins.list[SearchHit]:
        await conn.execute(b"SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        now = self._clock()
        if query is not None and self._dimensions is None:
            cur = await conn.execute(
                self._sql("SELECT value FROM {meta} WHERE name = 'dimensions'")
            )
            row = await cur.fetchone()
            if row is None:
                query = None if text is not None else query
                if text is None:
                    return []
            else:
                self._dimensions = int(row[0])
                query = unit_vector(query, self._dimensions, store=self._label)
        depth = limit if query is None or text is None else candidates(limit)
        vector_hits = (
            []
            if query is None
            else await self._vector_ids(conn, path, conditions, query, depth, now)
        )
        text_hits = (
            [] if text is None else await self._text_ids(conn, path, conditions, text, depth, now)
        )
        fused: builtins.list[tuple[int, float, float | None, float | None]]
        if text is None:
            fused = [(i, s, s, None) for i, s in vector_hits]
        elif query is None:
            fused = [(i, s, None, s) for i, s in text_hits]
        else:
            fused = fuse(vector_hits, text_hits, limit)
        ids = [i for i, *_ in fused]
        items: dict[int, Item] = {}
        if ids:
            cur = await conn.execute(
                self._sql(f"SELECT {_COLUMNS} FROM {{items}} i WHERE i.id = ANY(%s)"), (ids,)
            )
            items = {r[0]: _item(r) for r in await cur.fetchall()}
        return [SearchHit(items[i], s, v, t) for i, s, v, t in fused if i in items]

    async def _vector_ids(
        self,
        conn: psycopg.AsyncConnection[Any],
        path: str,
        conditions: builtins.list[Condition],
        query: np.ndarray,
        depth: int,
        now: float,
    ) -> builtins.list[tuple[int, float]]:
        if self._dimensions is None:
            return []
        where, params = _range("path", path)
        cur = await conn.execute(
            self._sql(f"SELECT id, version FROM {{spaces}} WHERE {where}"), params
        )
        matrices = []
        for ns_id, version in await cur.fetchall():
            entry = self._cache.get(ns_id, version)
            if entry is None:
                rows = await conn.execute(
                    self._sql(
                        "SELECT id, vector FROM {items} WHERE ns = %s AND vector IS NOT NULL "
                        "ORDER BY id"
                    ),
                    (ns_id,),
                )
                entry = load_matrix(
                    version, [(i, bytes(b)) for i, b in await rows.fetchall()], self._dimensions
                )
                self._cache.put(ns_id, entry)
            matrices.append(entry)
        scope, sparams = self._scope(path, conditions, now)
        parts: builtins.list[tuple[np.ndarray, np.ndarray, np.ndarray | None]]
        if conditions:
            sql = f"SELECT i.id FROM {{items}} i WHERE {scope} AND i.vector IS NOT NULL"
            mask_ids = await conn.execute(self._sql(sql), sparams)
            allowed = np.array([r[0] for r in await mask_ids.fetchall()], dtype=np.int64)
            parts = [(m.ids, m.matrix, np.isin(m.ids, allowed)) for m in matrices]
        else:
            rng, rparams = _range("i.path", path)
            gone = await conn.execute(
                self._sql(
                    "SELECT i.id FROM {items} i WHERE i.expires_at IS NOT NULL "
                    f"AND i.expires_at <= %s AND {rng}"
                ),
                (now, *rparams),
            )
            expired = np.array([r[0] for r in await gone.fetchall()], dtype=np.int64)
            parts = [
                (m.ids, m.matrix, ~np.isin(m.ids, expired) if len(expired) else None)
                for m in matrices
            ]
        return top_k(parts, query, depth)

    async def _text_ids(
        self,
        conn: psycopg.AsyncConnection[Any],
        path: str,
        conditions: builtins.list[Condition],
        text: str,
        depth: int,
        now: float,
    ) -> builtins.list[tuple[int, float]]:
        match = tsquery(text)
        if match is None:
            return []
        scope, params = self._scope(path, conditions, now)
        cur = await conn.execute(
            self._sql(
                "SELECT i.id, ts_rank(i.tsv, q) AS score FROM {items} i, "
                f"to_tsquery('simple', %s) q WHERE i.tsv @@ q AND {scope} "
                "ORDER BY score DESC, i.id LIMIT %s"
            ),
            (match, *params, depth),
        )
        return [(int(i), float(s)) for i, s in await cur.fetchall()]

    def _scope(
        self, path: str, conditions: builtins.list[Condition], now: float
    ) -> tuple[str, builtins.list[Any]]:
        where, params = _range("i.path", path)
        params = [*params, now]
        filtered = postgres_where(conditions, params, "i.value")
        return f"{where} AND {_LIVE} AND {filtered}", params


def _range(column: str, path: str) -> tuple[str, builtins.list[Any]]:
    upper = path_upper(path)
    if upper is None:
        return "true", []
    return f"{column} >= %s AND {column} < %s", [path, upper]


def _item(row: Sequence[Any]) -> Item:
    _, path, key, value, text, created, updated, expires = row
    return Item(decode_path(path), key, value, text, created, updated, expires)
