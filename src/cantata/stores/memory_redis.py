"""An item store in Redis, on plain Redis structures (no RediSearch module needed).

Redis keeps the items; each process keeps a copy of the namespaces it queries and scores
there, exactly, as the in-memory store does (cosine over one matrix, BM25 over an
inverted index, fused by reciprocal rank). Why not server-side search: RediSearch is a
module many Redis servers do not load (the one these tests run on has none), and a
vector or full-text index built by hand from sorted sets would still send every posting
and every vector over the wire for an exact top-k. So the data lives in hashes, each
namespace has a version bumped in the same MULTI/EXEC as every write to it (by any
process), and a copy is reloaded, in one MULTI/EXEC snapshot, only when its version
moved. A store queried while another writes the same namespace reloads that namespace:
right for many small scopes (users' memories), slower for one large scope under
constant writes, where the PostgreSQL or SQLite store suits better.

Keys, under `prefix` (``cantata:`` by default)::

    items:meta            hash: schema_version, dimensions
    items:paths           sorted set of encoded namespace paths (all at score 0: by bytes)
    items:ver             hash: path -> version
    items:seq             counter: the order items were created in (ties rank by it)
    items:d:<path>        hash: key -> record (JSON [created, updated, expires, text,
                          order], a newline, the value's JSON)
    items:v:<path>        hash: key -> float32 unit vector
    items:exp             sorted set: path NUL key, scored by the time it expires

Writes that read first (put, sweep, clear) WATCH what they read and retry when another
client changed it, so a write is applied whole or not at all, never on stale reads.
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn, TypeVar

import numpy as np
import redis.asyncio as aioredis
from redis.exceptions import RedisError, WatchError

from ..core import ConfigurationError, short_repr
from ._codec import decode, encode, quoted
from ._lifecycle import StoreLifecycle
from .errors import StoreClosedError, StoreCorruptionError, StoreSchemaError, StoreTimeoutError
from .memory_base import CheckedWrite, ItemStoreBase, Query, opened_size, settled_size
from .memory_filters import Condition
from .memory_items import Item, Namespace, SearchHit, decode_path, path_upper
from .memory_local import Space, expired, list_spaces, search_spaces
from .redis import connect_error, failure, redis_client

__all__ = ["RedisItemStore"]

SCHEMA_VERSION = 1
"""Version 1: the keys above."""

T = TypeVar("T")
_RETRIES = 200
"""How often a write retries after another client changed what it read (WATCH)."""


class RedisItemStore(StoreLifecycle, ItemStoreBase):
    """An `ItemStore` in Redis keys under `prefix`, shared by processes and machines.

    `prefix` keeps several stores apart on one server (it may be a `RedisStore`'s: the
    keys are apart). No command waits longer than `timeout` seconds. `cache_items`
    bounds the items kept in this process's copies (the least recently queried
    namespaces go first). `clock` gives the time, for TTL.
    """

    def __init__(
        self,
        url: str = "redis://127.0.0.1:6379/0",
        *,
        prefix: str = "cantata:",
        dimensions: int | None = None,
        connect_timeout: float = 10.0,
        timeout: float | None = 30.0,
        cache_items: int = 1_000_000,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if type(prefix) is not str or "\x00" in prefix:
            raise ConfigurationError(
                f"RedisItemStore prefix must be a string without NUL: {short_repr(prefix)}"
            )
        client, self._where = redis_client(url, connect_timeout, timeout)
        super().__init__(f"RedisItemStore at {self._where} (prefix {quoted(prefix)})")
        if dimensions is not None and (type(dimensions) is not int or dimensions < 1):
            raise ConfigurationError(f"{self._label}: dimensions must be an int >= 1")
        if type(cache_items) is not int or cache_items < 0:
            raise ConfigurationError(f"{self._label}: cache_items must be an int >= 0")
        self._client: aioredis.Redis | None = client
        self.url = url
        self.prefix = prefix
        self._timeout = timeout
        self._dimensions = dimensions
        self._clock = clock
        self._cache_items = cache_items
        self._cache: dict[str, tuple[int, Space]] = {}
        base = f"{prefix}items:"
        self._meta = f"{base}meta".encode()
        self._paths = f"{base}paths".encode()
        self._versions = f"{base}ver".encode()
        self._expiry = f"{base}exp".encode()
        self._sequence = f"{base}seq".encode()
        self._data_prefix = f"{base}d:".encode()
        self._vector_prefix = f"{base}v:".encode()

    def _data(self, path: str) -> bytes:
        return self._data_prefix + path.encode()

    def _vectors(self, path: str) -> bytes:
        return self._vector_prefix + path.encode()

    # -- lifecycle ------------------------------------------------------------------------

    async def _connect(self) -> None:
        client: Any = self._client_or_raise()  # redis-py's own types vary between versions
        try:
            await client.ping()
            await client.hsetnx(self._meta, "schema_version", str(SCHEMA_VERSION))
            if self._dimensions is not None:
                await client.hsetnx(self._meta, "dimensions", str(self._dimensions))
            version, stored = await client.hmget(self._meta, ["schema_version", "dimensions"])
        except RedisError as exc:
            raise connect_error(self._where, exc) from exc
        if version != str(SCHEMA_VERSION).encode():
            raise StoreSchemaError(
                f"{self._label}: the item schema version is {short_repr(version)}, this "
                f"cantata knows {SCHEMA_VERSION}; upgrade cantata, or use another prefix"
            )
        self._dimensions = opened_size(stored, self._dimensions, store=self._label)

    async def _disconnect(self) -> None:
        client, self._client = self._client, None
        self._cache.clear()
        if client is not None:
            await client.aclose()

    def _client_or_raise(self) -> aioredis.Redis:
        client = self._client
        if client is None:
            raise StoreClosedError(f"{self._label} is closed; create a new store to keep working")
        return client

    async def _begin(self) -> None:
        await self._ready()

    async def _call(self, action: str, call: Callable[[Any], Awaitable[T]]) -> T:
        """`call(client)`, with Redis's errors as the store's."""
        await self._ready()
        client = self._client_or_raise()
        try:
            return await call(client)
        except RedisError as exc:
            if self._closed:
                raise StoreClosedError(f"{self._label} was closed during {action}") from exc
            self._fail(action, exc)

    async def _watched(self, action: str, attempt: Callable[[Any], Awaitable[T]]) -> T:
        """`attempt(pipeline)` until no WATCHed key changed under it (bounded)."""

        async def run(client: Any) -> T:
            for _ in range(_RETRIES):
                async with client.pipeline(transaction=True) as pipe:
                    try:
                        return await attempt(pipe)
                    except WatchError:
                        continue
            raise StoreTimeoutError(
                f"{self._label}: cannot {action}: other clients changed the same keys "
                f"{_RETRIES} times in a row; retry later",
                action=action,
            )

        return await self._call(action, run)

    def _fail(self, action: str, exc: RedisError) -> NoReturn:
        raise failure(self._label, action, exc, self._timeout) from exc

    # -- records --------------------------------------------------------------------------

    def _record(
        self, created: float, updated: float, expires: float | None, order: int, w: CheckedWrite
    ) -> str:
        head = encode(
            [created, updated, expires, w.text, order], store=self._label, where="a record"
        )
        return f"{head}\n{w.json}"

    def _head(self, raw: bytes, path: str, key: str) -> builtins.list[Any]:
        head, sep, _ = raw.partition(b"\n")
        where = f"item {key!r} in {short_repr(decode_path(path))}"
        fields = decode(head, store=self._label, where=where) if sep else None
        if type(fields) is not list or len(fields) != 5:
            raise StoreCorruptionError(
                f"{self._label}: the record of {where} is not one this store writes; "
                "delete it (HDEL) or use another prefix"
            )
        return fields

    def _item(self, raw: bytes, path: str, key: str) -> Item:
        created, updated, expires, text, _ = self._head(raw, path, key)
        value = decode(raw.partition(b"\n")[2], store=self._label, where=f"item {key!r}")
        if type(value) is not dict:
            raise StoreCorruptionError(f"{self._label}: the value of item {key!r} is not a dict")
        return Item(decode_path(path), key, value, text, created, updated, expires)

    def _member(self, path: str, key: str) -> bytes:
        return f"{path}\x00{key}".encode()

    @staticmethod
    def _split(member: bytes) -> tuple[str, str]:
        path, _, key = member.decode().partition("\x00")
        return path, key

    # -- writes ---------------------------------------------------------------------------

    async def _write_items(self, writes: builtins.list[CheckedWrite], size: int | None) -> None:
        paths = builtins.list(dict.fromkeys(w.path for w in writes))

        async def attempt(pipe: Any) -> None:
            now = self._clock()
            await pipe.watch(self._meta, self._expiry, *[self._data(p) for p in paths])
            stored = await pipe.hget(self._meta, "dimensions") if size is not None else None
            if size is not None:
                settled_size(None if stored is None else stored.decode(), size, store=self._label)
            olds: dict[tuple[str, str], bytes | None] = {}
            for path in paths:
                keys = [w.key for w in writes if w.path == path]
                for key, raw in zip(keys, await pipe.hmget(self._data(path), keys), strict=True):
                    olds[(path, key)] = raw
            gone = await pipe.zrangebyscore(self._expiry, "-inf", now)
            swept = {self._split(m) for m in gone}
            kept = {
                place: self._head(raw, *place)
                for place, raw in olds.items()
                if raw is not None and place not in swept
            }
            fresh = sum(1 for w in writes if (w.path, w.key) not in kept)
            # not watched: a number taken by an attempt that is retried is skipped, no harm
            order = await pipe.incrby(self._sequence, fresh) - fresh if fresh else 0
            pipe.multi()
            self._queue_sweep(pipe, gone)
            for w in writes:
                head = kept.get((w.path, w.key))
                if head is None:
                    order += 1
                    kept[(w.path, w.key)] = head = [now, now, None, None, order]
                deadline = None if w.ttl is None else now + w.ttl
                record = self._record(head[0], now, deadline, head[4], w)
                pipe.hset(self._data(w.path), w.key, record)
                if w.blob is None:
                    pipe.hdel(self._vectors(w.path), w.key)
                else:
                    pipe.hset(self._vectors(w.path), w.key, w.blob)
                if deadline is None:
                    pipe.zrem(self._expiry, self._member(w.path, w.key))
                else:
                    pipe.zadd(self._expiry, {self._member(w.path, w.key): deadline})
            for path in paths:
                pipe.hincrby(self._versions, path, 1)
                pipe.zadd(self._paths, {path: 0})
            if size is not None and stored is None:
                pipe.hset(self._meta, "dimensions", str(size))
            await pipe.execute()
            if size is not None:
                self._dimensions = size if stored is None else int(stored)

        await self._watched("write items", attempt)

    def _queue_sweep(self, pipe: Any, gone: builtins.list[bytes]) -> None:
        """Queue the removal of expired members `gone` (inside a MULTI)."""
        by_path: dict[str, builtins.list[str]] = {}
        for member in gone:
            path, key = self._split(member)
            by_path.setdefault(path, []).append(key)
        for path, keys in by_path.items():
            pipe.hdel(self._data(path), *keys)
            pipe.hdel(self._vectors(path), *keys)
            pipe.hincrby(self._versions, path, 1)
        if gone:
            pipe.zrem(self._expiry, *gone)

    async def _delete_item(self, path: str, key: str) -> bool:
        async def run(client: Any) -> bool:
            async with client.pipeline(transaction=True) as pipe:
                pipe.hget(self._data(path), key)
                pipe.hdel(self._data(path), key)
                pipe.hdel(self._vectors(path), key)
                pipe.zrem(self._expiry, self._member(path, key))
                pipe.hincrby(self._versions, path, 1)
                raw, *_ = await pipe.execute()
            if raw is None:
                return False
            deadline = self._head(raw, path, key)[2]
            return bool(deadline is None or deadline > self._clock())

        return await self._call(f"delete item {key!r}", run)

    async def _clear_items(self, path: str) -> int:
        async def attempt(pipe: Any) -> int:
            await pipe.watch(self._paths)
            paths = [p.decode() for p in await pipe.zrangebylex(self._paths, *self._lex(path))]
            if paths:
                await pipe.watch(*[self._data(p) for p in paths])
            now = self._clock()
            live = 0
            members: builtins.list[bytes] = []
            for p in paths:
                records = await pipe.hgetall(self._data(p))
                for raw_key, raw in records.items():
                    key = raw_key.decode()
                    deadline = self._head(raw, p, key)[2]
                    live += deadline is None or deadline > now
                    if deadline is not None:
                        members.append(self._member(p, key))
            pipe.multi()
            for p in paths:
                pipe.delete(self._data(p), self._vectors(p))
                pipe.hincrby(self._versions, p, 1)
            if paths:
                pipe.zrem(self._paths, *paths)
            if members:
                pipe.zrem(self._expiry, *members)
            await pipe.execute()
            for p in paths:
                self._cache.pop(p, None)
            return live

        return await self._watched("clear items", attempt)

    async def _sweep_items(self) -> int:
        async def attempt(pipe: Any) -> int:
            await pipe.watch(self._expiry)
            gone = await pipe.zrangebyscore(self._expiry, "-inf", self._clock())
            pipe.multi()
            self._queue_sweep(pipe, gone)
            await pipe.execute()
            return len(gone)

        return await self._watched("sweep expired items", attempt)

    # -- reads ----------------------------------------------------------------------------

    def _lex(self, path: str) -> tuple[bytes, bytes]:
        """ZRANGEBYLEX bounds for every path that starts with `path`."""
        upper = path_upper(path)
        if upper is None:
            return b"-", b"+"
        return b"[" + path.encode(), b"(" + upper.encode()

    async def _get_item(self, path: str, key: str) -> Item | None:
        async def run(client: Any) -> bytes | None:
            raw: bytes | None = await client.hget(self._data(path), key)
            return raw

        raw = await self._call(f"read item {key!r}", run)
        if raw is None:
            return None
        item = self._item(raw, path, key)
        return None if expired(item, self._clock()) else item

    async def _list_namespaces(self, path: str) -> builtins.list[Namespace]:
        async def run(client: Any) -> builtins.list[Any]:
            paths = await client.zrangebylex(self._paths, *self._lex(path))
            async with client.pipeline(transaction=True) as pipe:
                for p in paths:
                    pipe.hlen(self._data_prefix + p)
                pipe.zrangebyscore(self._expiry, "-inf", self._clock())
                *sizes, gone = await pipe.execute()
            dead: dict[str, int] = {}
            for member in gone:
                p, _ = self._split(member)
                dead[p] = dead.get(p, 0) + 1
            return [
                p.decode() for p, n in zip(paths, sizes, strict=True) if n > dead.get(p.decode(), 0)
            ]

        return [decode_path(p) for p in await self._call("list namespaces", run)]

    async def _list_items(
        self, path: str, conditions: builtins.list[Condition], limit: int, offset: int
    ) -> builtins.list[Item]:
        spaces = await self._spaces(path)
        return list_spaces(spaces, conditions, limit, offset, self._clock())

    async def _search_items(self, query: Query) -> builtins.list[SearchHit]:
        spaces = await self._spaces(query.path)
        if query.vector is not None and self._dimensions is None:
            await self._read_dimensions()  # another store may have fixed it since
            query = query.sized(self._dimensions, store=self._label)
        return search_spaces(spaces, query, self._clock())

    async def _read_dimensions(self) -> None:
        async def run(client: Any) -> bytes | None:
            raw: bytes | None = await client.hget(self._meta, "dimensions")
            return raw

        stored = await self._call("read the vector size", run)
        if stored is not None:
            self._dimensions = int(stored)

    async def _spaces(self, path: str) -> builtins.list[Space]:
        """Current copies of the namespaces under `path`, in path order."""

        async def run(client: Any) -> builtins.list[Space]:
            paths = await client.zrangebylex(self._paths, *self._lex(path))
            names = [p.decode() for p in paths]
            versions = await client.hmget(self._versions, names) if names else []
            spaces = []
            for name, version in zip(names, versions, strict=True):
                cached = self._cache.get(name)
                if cached is None or version is None or cached[0] != int(version):
                    cached = await self._load(client, name)
                self._cache[name] = self._cache.pop(name, cached)  # most recently used last
                spaces.append(cached[1])
            self._trim()
            return spaces

        return await self._call("read items", run)

    async def _load(self, client: Any, path: str) -> tuple[int, Space]:
        """One namespace, read in one MULTI/EXEC so its version matches its data."""
        async with client.pipeline(transaction=True) as pipe:
            pipe.hget(self._versions, path)
            pipe.hgetall(self._data(path))
            pipe.hgetall(self._vectors(path))
            version, records, vectors = await pipe.execute()
        space = Space(decode_path(path))
        loaded = []
        for raw_key, raw in records.items():
            key = raw_key.decode()
            loaded.append((self._head(raw, path, key)[4], key, raw_key, raw))
        # in the order they were created: ties in a ranking go to the older item, as they do
        # (by row id) in the SQL stores
        for _, key, raw_key, raw in sorted(loaded):
            blob = vectors.get(raw_key)
            unit = None if blob is None else np.frombuffer(blob, dtype=np.float32)
            space.add(self._item(raw, path, key), unit)
        entry = (int(version or 0), space)
        self._cache[path] = entry
        return entry

    def _trim(self) -> None:
        total = sum(len(s.items) for _, s in self._cache.values())
        while total > self._cache_items and len(self._cache) > 1:
            first = next(iter(self._cache))
            total -= len(self._cache.pop(first)[1].items)
