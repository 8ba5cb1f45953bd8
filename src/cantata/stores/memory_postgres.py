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
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import numpy as np
import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from ..core import ConfigurationError, StoreError, short_repr
from ._lifecycle import StoreLifecycle
from .errors import StoreClosedError, StoreSchemaError, StoreTimeoutError
from .memory_base import CheckedWrite, ItemStoreBase, Query, hits, opened_size, settled_size
from .memory_filters import Condition, postgres_where
from .memory_items import Item, Namespace, SearchHit, decode_path, path_upper
from .memory_text import tokenize, tsquery
from .memory_vectors import VectorCache, load_matrix, masked, top_k

__all__ = ["PostgresItemStore"]

SCHEMA_VERSION = 1
_PREFIX = re.compile(r"[a-z_][a-z0-9_]{0,39}")
_COLUMNS = "i.id, i.path, i.key, i.value, i.text, i.created_at, i.updated_at, i.expires_at"
_LIVE = "(i.expires_at IS NULL OR i.expires_at > %s)"
_BUMP = "UPDATE {spaces} SET version = version + 1 WHERE path = %s"
_UPSERT = (
    "INSERT INTO {items} AS i (ns, path, key, value, text, tsv, vector, created_at, "
    "updated_at, expires_at) VALUES (%s, %s, %s, %s::jsonb, %s, to_tsvector('simple', %s), "
    "%s, %s, %s, %s) ON CONFLICT (path, key) DO UPDATE SET value = excluded.value, "
    "text = excluded.text, tsv = excluded.tsv, vector = excluded.vector, "
    "updated_at = excluded.updated_at, expires_at = excluded.expires_at, created_at = CASE "
    "WHEN i.expires_at IS NOT NULL AND i.expires_at <= excluded.updated_at "
    "THEN excluded.created_at ELSE i.created_at END"
)


class PostgresItemStore(StoreLifecycle, ItemStoreBase):
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
            self._dimensions = opened_size(stored, self._dimensions, store=self._label)
            if stored is None and self._dimensions is not None:
                await conn.execute(
                    self._sql("INSERT INTO {meta} VALUES ('dimensions', %s)"),
                    (str(self._dimensions),),
                )

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

    async def _begin(self) -> None:
        await self._ready()

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

    async def _write_items(self, writes: builtins.list[CheckedWrite], size: int | None) -> None:
        await self._run("write items", self._write, writes, size)

    async def _write(
        self,
        conn: psycopg.AsyncConnection[Any],
        writes: builtins.list[CheckedWrite],
        size: int | None,
    ) -> None:
        now = self._clock()
        if size is not None:
            await self._settle(conn, size)
        await self._sweep_in(conn, now)
        ids: dict[str, int] = {}
        for path in dict.fromkeys(w.path for w in writes):
            cur = await conn.execute(
                self._sql(
                    "INSERT INTO {spaces} (path, version) VALUES (%s, 0) ON CONFLICT (path) "
                    "DO UPDATE SET version = {spaces}.version + 1 RETURNING id"
                ),
                (path,),
            )
            ids[path] = (await cur.fetchone())[0]  # type: ignore[index]
        rows = []
        for w in writes:
            words = None if w.text is None else " ".join(tokenize(w.text))
            deadline = None if w.ttl is None else now + w.ttl
            rows.append(
                (ids[w.path], w.path, w.key, w.json, w.text, words, w.blob, now, now, deadline)
            )
        async with conn.cursor() as cur:
            await cur.executemany(self._sql(_UPSERT), rows)

    async def _settle(self, conn: psycopg.AsyncConnection[Any], size: int) -> None:
        await conn.execute(
            self._sql("INSERT INTO {meta} VALUES ('dimensions', %s) ON CONFLICT DO NOTHING"),
            (str(size),),
        )
        cur = await conn.execute(self._sql("SELECT value FROM {meta} WHERE name = 'dimensions'"))
        stored = (await cur.fetchone())[0]  # type: ignore[index]
        self._dimensions = settled_size(stored, size, store=self._label)

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
            await conn.execute(self._sql(_BUMP), (path,))
        return len(gone)

    async def _delete_item(self, path: str, key: str) -> bool:
        async def run(conn: psycopg.AsyncConnection[Any]) -> bool:
            cur = await conn.execute(
                self._sql("DELETE FROM {items} WHERE path = %s AND key = %s RETURNING expires_at"),
                (path, key),
            )
            row = await cur.fetchone()
            if row is None:
                return False
            await conn.execute(self._sql(_BUMP), (path,))
            return bool(row[0] is None or row[0] > self._clock())

        result: bool = await self._run(f"delete item {key!r}", run)
        return result

    async def _clear_items(self, path: str) -> int:
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

    async def _sweep_items(self) -> int:
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

    async def _get_item(self, path: str, key: str) -> Item | None:
        rows = await self._rows(
            f"read item {key!r}",
            f"SELECT {_COLUMNS} FROM {{items}} i WHERE i.path = %s AND i.key = %s AND {_LIVE}",
            (path, key, self._clock()),
        )
        return _item(rows[0]) if rows else None

    async def _list_items(
        self, path: str, conditions: builtins.list[Condition], limit: int, offset: int
    ) -> builtins.list[Item]:
        where, params = self._scope(path, conditions, self._clock())
        rows = await self._rows(
            "list items",
            f"SELECT {_COLUMNS} FROM {{items}} i WHERE {where} "
            "ORDER BY i.path, i.key LIMIT %s OFFSET %s",
            (*params, limit, offset),
        )
        return [_item(r) for r in rows]

    async def _list_namespaces(self, path: str) -> builtins.list[Namespace]:
        where, params = _range("n.path", path)
        rows = await self._rows(
            "list namespaces",
            f"SELECT n.path FROM {{spaces}} n WHERE {where} AND EXISTS (SELECT 1 FROM "
            f"{{items}} i WHERE i.ns = n.id AND {_LIVE}) ORDER BY n.path",
            (*params, self._clock()),
        )
        return [decode_path(p) for (p,) in rows]

    async def _search_items(self, query: Query) -> builtins.list[SearchHit]:
        result: builtins.list[SearchHit] = await self._run("search items", self._search, query)
        return result

    async def _search(
        self, conn: psycopg.AsyncConnection[Any], query: Query
    ) -> builtins.list[SearchHit]:
        await conn.execute(b"SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        now = self._clock()
        if query.vector is not None and self._dimensions is None:
            cur = await conn.execute(
                self._sql("SELECT value FROM {meta} WHERE name = 'dimensions'")
            )
            row = await cur.fetchone()  # another store may have fixed it since
            if row is not None:
                self._dimensions = int(row[0])
                query = query.sized(self._dimensions, store=self._label)
        vector_hits = [] if query.vector is None else await self._vector_ids(conn, query, now)
        text_hits = [] if query.text is None else await self._text_ids(conn, query, now)
        fused = query.rank(vector_hits, text_hits)
        ids = [i for i, *_ in fused]
        items: dict[int, Item] = {}
        if ids:
            cur = await conn.execute(
                self._sql(f"SELECT {_COLUMNS} FROM {{items}} i WHERE i.id = ANY(%s)"), (ids,)
            )
            items = {r[0]: _item(r) for r in await cur.fetchall()}
        return hits(fused, items)

    async def _vector_ids(
        self, conn: psycopg.AsyncConnection[Any], query: Query, now: float
    ) -> builtins.list[tuple[int, float]]:
        if self._dimensions is None or query.vector is None:
            return []
        path, conditions = query.path, query.conditions
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
        if conditions:
            scope, sparams = self._scope(path, conditions, now)
            sql = f"SELECT i.id FROM {{items}} i WHERE {scope} AND i.vector IS NOT NULL"
            mask_ids = await conn.execute(self._sql(sql), sparams)
            allowed = np.array([r[0] for r in await mask_ids.fetchall()], dtype=np.int64)
            return top_k(masked(matrices, allowed=allowed), query.vector, query.depth)
        rng, rparams = _range("i.path", path)
        gone = await conn.execute(
            self._sql(
                "SELECT i.id FROM {items} i WHERE i.expires_at IS NOT NULL "
                f"AND i.expires_at <= %s AND {rng}"
            ),
            (now, *rparams),
        )
        expired = np.array([r[0] for r in await gone.fetchall()], dtype=np.int64)
        return top_k(masked(matrices, expired=expired), query.vector, query.depth)

    async def _text_ids(
        self, conn: psycopg.AsyncConnection[Any], query: Query, now: float
    ) -> builtins.list[tuple[int, float]]:
        match = None if query.text is None else tsquery(query.text)
        if match is None:
            return []
        scope, params = self._scope(query.path, query.conditions, now)
        cur = await conn.execute(
            self._sql(
                "SELECT i.id, ts_rank(i.tsv, q) AS score FROM {items} i, "
                f"to_tsquery('simple', %s) q WHERE i.tsv @@ q AND {scope} "
                "ORDER BY score DESC, i.id LIMIT %s"
            ),
            (match, *params, query.depth),
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
