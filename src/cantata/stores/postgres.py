"""PostgreSQL: durable state shared by many processes on many machines."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool, PoolTimeout

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

__all__ = ["PostgresStore"]

_PREFIX = re.compile(r"[a-z_][a-z0-9_]{0,39}")


class PostgresStore(StoreLifecycle):
    """A `StateStore` in four PostgreSQL tables, created on first use.

    An append is one statement: it bumps the log's length in ``<prefix>log_heads`` (the
    row lock is held until commit, so concurrent appends to one log queue up while other
    logs proceed) and inserts its entries at the positions it reserved. Entries of one call
    are therefore contiguous and positions dense from 0, across any number of processes.
    `table_prefix` keeps several stores (or test runs) apart in one database.

    Every wait is bounded: `connect_timeout` for a connection (and a free one from the
    pool), `statement_timeout` seconds (default 30; None leaves the server's or the DSN's
    setting) for each statement, lock waits included, so a table locked by another session
    makes an operation fail with `StoreTimeoutError` instead of hanging.
    """

    def __init__(
        self,
        dsn: str,
        *,
        table_prefix: str = "cantata_",
        min_size: int = 1,
        max_size: int = 4,
        connect_timeout: float = 10.0,
        statement_timeout: float | None = 30.0,
    ) -> None:
        try:
            info = conninfo_to_dict(dsn)
        except psycopg.ProgrammingError as exc:
            raise ConfigurationError(f"invalid PostgreSQL DSN: {exc}") from exc
        self._where = (
            f"{info.get('host') or 'localhost'}:{info.get('port') or 5432}/{info.get('dbname', '')}"
        )
        super().__init__(f"PostgresStore at {self._where}")
        if not _PREFIX.fullmatch(table_prefix):
            raise ConfigurationError(
                f"{self._label}: table_prefix {table_prefix!r} must be lowercase letters, digits "
                "and '_', start with a letter or '_', and have at most 40 characters"
            )
        if not 1 <= min_size <= max_size:
            raise ConfigurationError(
                f"{self._label}: need 1 <= min_size <= max_size, got {min_size} and {max_size}"
            )
        if statement_timeout is not None and not (
            isinstance(statement_timeout, int | float) and statement_timeout > 0
        ):
            raise ConfigurationError(
                f"{self._label}: statement_timeout must be a number of seconds > 0, or None "
                f"for the server's setting; got {short_repr(statement_timeout)}"
            )
        self.dsn = dsn
        self.statement_timeout = statement_timeout
        self.table_prefix = table_prefix
        self._min_size = min_size
        self._max_size = max_size
        self._timeout = connect_timeout
        # the settings, read by its component config (cantata.declarative)
        self.min_size = min_size
        self.max_size = max_size
        self.connect_timeout = connect_timeout
        self._pool: AsyncConnectionPool | None = None
        self._q = _Queries(table_prefix)
        self._batcher = AppendBatcher(self._write_entries)

    # -- lifecycle -------------------------------------------------------------------------

    async def _connect(self) -> None:
        try:
            conn = await psycopg.AsyncConnection.connect(
                self.dsn, autocommit=True, connect_timeout=max(1, int(self._timeout))
            )
        except psycopg.Error as exc:
            raise StoreError(
                f"cannot connect to PostgreSQL at {self._where}: {exc}; "
                "check that the server is up and the DSN's host, port, user and database"
            ) from exc
        try:
            await self._configure(conn)
            async with conn.transaction():
                await self._create_schema(conn)
        except psycopg.Error as exc:
            self._fail("create its tables", exc)
        finally:
            await conn.close()
        pool: AsyncConnectionPool = AsyncConnectionPool(
            self.dsn,
            min_size=self._min_size,
            max_size=self._max_size,
            kwargs={"autocommit": True},
            configure=self._configure,
            timeout=self._timeout,
            open=False,
            name=self._label,
        )
        try:
            await pool.open(wait=True, timeout=self._timeout)
        except psycopg.Error as exc:
            await pool.close()
            raise StoreError(
                f"cannot connect to PostgreSQL at {self._where}: {exc}; is the server running?"
            ) from exc
        self._pool = pool

    async def _configure(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """Bound every statement of the session (the pool calls this for each connection)."""
        if self.statement_timeout is not None:
            millis = max(1, round(self.statement_timeout * 1000))
            await conn.execute(sql.SQL("SET statement_timeout = {}").format(sql.Literal(millis)))

    async def _create_schema(self, conn: psycopg.AsyncConnection[Any]) -> None:
        q = self._q
        # Several processes may open a fresh database at once: take turns.
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (q.meta_name,))
        await conn.execute(q.create_meta)
        cur = await conn.execute(q.get_version)
        row = await cur.fetchone()
        if row is None:
            for statement in q.create_tables:
                await conn.execute(statement)
            await conn.execute(q.set_version, (str(SCHEMA_VERSION),))
        elif row[0] != str(SCHEMA_VERSION):
            raise StoreSchemaError(
                f"{self._label}: tables {self.table_prefix}* have store schema version "
                f"{short_repr(row[0])}, this cantata knows version {SCHEMA_VERSION}; "
                "upgrade cantata, or use another table_prefix"
            )

    async def _disconnect(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()  # waits at most 5 s (psycopg_pool's default) for its workers

    def _fail(self, action: str, exc: psycopg.Error) -> NoReturn:
        if isinstance(exc, psycopg.errors.QueryCanceled):
            raise StoreTimeoutError(
                f"{self._label}: cannot {action}: the statement ran past "
                f"statement_timeout={self.statement_timeout}s ({exc}); another session may "
                "hold a lock on the store's tables: end it, or raise statement_timeout",
                action=action,
            ) from exc
        if isinstance(exc, PoolTimeout):
            raise StoreTimeoutError(
                f"{self._label}: cannot {action}: no connection was free within "
                f"connect_timeout={self._timeout}s (max_size={self._max_size}); raise "
                "max_size or connect_timeout",
                action=action,
            ) from exc
        hint = "check the server's log"
        if isinstance(exc, psycopg.OperationalError):
            hint = "is the server running and reachable?"
        raise StoreError(f"{self._label}: cannot {action}: {exc}; {hint}") from exc

    async def _fetch(self, action: str, query: sql.Composed, params: Any) -> list[tuple[Any, ...]]:
        await self._ready()
        pool = self._pool
        if pool is None:
            raise StoreClosedError(f"{self._label} is closed; create a new store to keep working")
        try:
            async with pool.connection() as conn:
                cur = await conn.execute(query, params)
                return await cur.fetchall() if cur.description is not None else []
        except psycopg.Error as exc:
            if self._closed:
                raise StoreClosedError(f"{self._label} was closed during {action}") from exc
            self._fail(action, exc)

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
        params = {"log": log, "n": len(texts), "v": texts}
        rows = await self._fetch(f"append to log {quoted(log)}", self._q.append, params)
        return int(rows[0][0])

    async def read(self, log: str, start: int = 0, stop: int | None = None) -> list[Any]:
        """Entries `start` to `stop` of a log, with the meaning of a Python slice."""
        check_name(log, store=self._label, kind="log name")
        check_index(start, store=self._label, name="start")
        if stop is not None:
            check_index(stop, store=self._label, name="stop")
        params = {"log": log, "start": start, "stop": stop}
        if start < 0 or (stop is not None and stop < 0):
            query = self._q.read_from_end
        else:
            query = self._q.read_to_end if stop is None else self._q.read
        rows = await self._fetch(f"read log {quoted(log)}", query, params)
        label = self._label
        return [decode(v, store=label, where=f"entry {p} of log {quoted(log)}") for p, v in rows]

    async def length(self, log: str) -> int:
        """Number of entries in a log (0 for a log never written)."""
        check_name(log, store=self._label, kind="log name")
        rows = await self._fetch(f"read the length of log {quoted(log)}", self._q.length, (log,))
        return int(rows[0][0]) if rows else 0

    async def delete_log(self, log: str) -> None:
        """Remove a log; a missing log is fine."""
        check_name(log, store=self._label, kind="log name")
        await self._ready()
        pool = self._pool
        if pool is None:
            raise StoreClosedError(f"{self._label} is closed; create a new store to keep working")
        try:
            async with pool.connection() as conn, conn.transaction():
                # First the head: this waits for an append in flight, whose entries the
                # second statement (a fresh snapshot) then sees and deletes too.
                await conn.execute(self._q.delete_head, (log,))
                await conn.execute(self._q.delete_entries, (log,))
        except psycopg.Error as exc:
            self._fail(f"delete log {quoted(log)}", exc)

    # -- values ----------------------------------------------------------------------------

    async def get(self, key: str) -> Any | None:
        """The value at `key`, or None."""
        check_name(key, store=self._label, kind="key")
        rows = await self._fetch(f"read key {quoted(key)}", self._q.get, (key,))
        if not rows:
            return None
        return decode(rows[0][0], store=self._label, where=f"the value at key {quoted(key)}")

    async def put(self, key: str, value: Any) -> None:
        """Set a value (JSON data)."""
        check_name(key, store=self._label, kind="key")
        text = encode(value, store=self._label, where=f"key {quoted(key)}")
        await self._fetch(f"write key {quoted(key)}", self._q.put, (key, text))

    async def put_many(self, items: Mapping[str, Any]) -> None:
        """Set several values in one statement: all or none."""
        keys: list[str] = []
        texts: list[str] = []
        for key, value in items.items():
            check_name(key, store=self._label, kind="key")
            keys.append(key)
            texts.append(encode(value, store=self._label, where=f"key {quoted(key)}"))
        if keys:
            action = f"write keys {short_repr(keys, 200)}"
            await self._fetch(action, self._q.put_many, (keys, texts))

    async def put_if_absent(self, key: str, value: Any) -> bool:
        """Set a value unless the key holds one (INSERT ... ON CONFLICT DO NOTHING: one of
        two writers wins); True if this call set it."""
        check_name(key, store=self._label, kind="key")
        text = encode(value, store=self._label, where=f"key {quoted(key)}")
        action = f"write key {quoted(key)} if absent"
        return bool(await self._fetch(action, self._q.put_if_absent, (key, text)))

    async def delete(self, key: str) -> None:
        """Remove a value; a missing key is fine."""
        check_name(key, store=self._label, kind="key")
        await self._fetch(f"delete key {quoted(key)}", self._q.delete, (key,))

    async def keys(self, prefix: str = "") -> list[str]:
        """Keys that start with `prefix`, sorted by code point."""
        check_name(prefix, store=self._label, kind="key prefix")
        upper = prefix_upper(prefix)
        rows = await self._fetch(
            f"list keys with prefix {quoted(prefix)}",
            self._q.keys_from if upper is None else self._q.keys,
            {"low": prefix, "high": upper},
        )
        return [row[0] for row in rows]


class _Queries:
    """Every statement of the store, built once with its table names quoted."""

    def __init__(self, prefix: str) -> None:
        self.meta_name = f"{prefix}meta"
        ids = {
            "meta": sql.Identifier(f"{prefix}meta"),
            "heads": sql.Identifier(f"{prefix}log_heads"),
            "entries": sql.Identifier(f"{prefix}log_entries"),
            "values": sql.Identifier(f"{prefix}values"),
        }

        def q(text: str) -> sql.Composed:
            return sql.SQL(text).format(**ids)

        self.create_meta = q(
            "CREATE TABLE IF NOT EXISTS {meta} (name text PRIMARY KEY, value text NOT NULL)"
        )
        self.get_version = q("SELECT value FROM {meta} WHERE name = 'schema_version'")
        self.set_version = q("INSERT INTO {meta} (name, value) VALUES ('schema_version', %s)")
        self.create_tables = [
            q(
                'CREATE TABLE IF NOT EXISTS {heads} (log text COLLATE "C" PRIMARY KEY, '
                "length bigint NOT NULL)"
            ),
            q(
                'CREATE TABLE IF NOT EXISTS {entries} (log text COLLATE "C" NOT NULL, '
                "pos bigint NOT NULL, value text NOT NULL, PRIMARY KEY (log, pos))"
            ),
            q(
                'CREATE TABLE IF NOT EXISTS {values} (key text COLLATE "C" PRIMARY KEY, '
                "value text NOT NULL)"
            ),
        ]
        self.append = q(
            "WITH head AS ("
            " INSERT INTO {heads} AS h (log, length) VALUES (%(log)s, %(n)s)"
            " ON CONFLICT (log) DO UPDATE SET length = h.length + EXCLUDED.length"
            " RETURNING h.length"
            "), ins AS ("
            " INSERT INTO {entries} (log, pos, value)"
            " SELECT %(log)s, head.length - %(n)s + t.ord - 1, t.value"
            " FROM head, unnest(%(v)s::text[]) WITH ORDINALITY AS t(value, ord)"
            ") SELECT length FROM head"
        )
        self.read_to_end = q(
            "SELECT pos, value FROM {entries} WHERE log = %(log)s AND pos >= %(start)s ORDER BY pos"
        )
        self.read = q(
            "SELECT pos, value FROM {entries} WHERE log = %(log)s AND pos >= %(start)s"
            " AND pos < %(stop)s ORDER BY pos"
        )
        # Negative bounds count from the end: one statement, so one snapshot of the length.
        self.read_from_end = q(
            "WITH n AS (SELECT COALESCE((SELECT length FROM {heads} WHERE log = %(log)s), 0)"
            " AS len)"
            " SELECT e.pos, e.value FROM {entries} e, n WHERE e.log = %(log)s"
            " AND e.pos >= CASE WHEN %(start)s::bigint < 0"
            "  THEN n.len + %(start)s::bigint ELSE %(start)s::bigint END"
            " AND e.pos < CASE WHEN %(stop)s::bigint IS NULL THEN n.len"
            "  WHEN %(stop)s::bigint < 0 THEN n.len + %(stop)s::bigint"
            "  ELSE %(stop)s::bigint END"
            " ORDER BY e.pos"
        )
        self.length = q("SELECT length FROM {heads} WHERE log = %s")
        self.delete_head = q("DELETE FROM {heads} WHERE log = %s")
        self.delete_entries = q("DELETE FROM {entries} WHERE log = %s")
        self.get = q("SELECT value FROM {values} WHERE key = %s")
        self.put = q(
            "INSERT INTO {values} (key, value) VALUES (%s, %s)"
            " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"
        )
        self.put_many = q(
            "INSERT INTO {values} (key, value) SELECT * FROM unnest(%s::text[], %s::text[])"
            " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"
        )
        self.put_if_absent = q(
            "INSERT INTO {values} (key, value) VALUES (%s, %s)"
            " ON CONFLICT (key) DO NOTHING RETURNING key"
        )
        self.delete = q("DELETE FROM {values} WHERE key = %s")
        self.keys_from = q("SELECT key FROM {values} WHERE key >= %(low)s ORDER BY key")
        self.keys = q(
            "SELECT key FROM {values} WHERE key >= %(low)s AND key < %(high)s ORDER BY key"
        )
