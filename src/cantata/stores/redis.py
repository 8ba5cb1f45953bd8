"""Redis: shared state for many processes and machines, in memory with Redis's persistence."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, NoReturn, TypeVar

import redis.asyncio as aioredis
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from ..core import ConfigurationError, StoreError, short_repr
from ._codec import SCHEMA_VERSION, check_index, check_name, decode, encode, quoted
from ._lifecycle import StoreLifecycle
from .errors import StoreClosedError, StoreCorruptionError, StoreSchemaError, StoreTimeoutError

__all__ = ["RedisStore"]

T = TypeVar("T")
_GLOB_SPECIAL = re.compile(r"([\\*?\[\]])")


def redis_client(
    url: str, connect_timeout: float, timeout: float | None
) -> tuple[aioredis.Redis, str]:
    """A client for `url` (it connects on first use), and where it points, for messages."""
    try:
        client = aioredis.Redis.from_url(
            url,
            socket_connect_timeout=connect_timeout,
            socket_timeout=timeout,
            decode_responses=False,
        )
    except ValueError as exc:
        raise ConfigurationError(f"invalid Redis URL {short_repr(url, 200)}: {exc}") from exc
    kwargs = client.connection_pool.connection_kwargs
    where = kwargs.get("path") or f"{kwargs.get('host')}:{kwargs.get('port')}"
    return client, f"{where}/{kwargs.get('db', 0)}"


def connect_error(where: str, exc: RedisError) -> StoreError:
    """The error for a first connection that failed."""
    kind = StoreTimeoutError if isinstance(exc, RedisTimeoutError) else StoreError
    return kind(
        f"cannot connect to Redis at {where}: {exc}; is the server running, and is the URL right?"
    )


def failure(label: str, action: str, exc: RedisError, timeout: float | None) -> StoreError:
    """The store's error for a Redis command that failed."""
    if isinstance(exc, RedisTimeoutError):
        return StoreTimeoutError(
            f"{label}: cannot {action}: no answer within timeout={timeout}s ({exc}); is the "
            "server overloaded or blocked? Raise timeout if it is slow",
            action=action,
        )
    return StoreError(f"{label}: cannot {action}: {exc}; is the server running and reachable?")


class RedisStore(StoreLifecycle):
    """A `StateStore` in Redis keys under `prefix`.

    A log is a list (``<prefix>log:<name>``): one RPUSH of several values is atomic and its
    values contiguous, whoever else pushes. A value is a string key (``<prefix>val:<key>``);
    `put_many` is one MSET, which Redis applies whole or not at all (unlike MULTI/EXEC,
    which does not roll back a command that fails inside it). `keys` walks ``SCAN``, so it
    never blocks the server. ``<prefix>schema_version`` records the layout. No command
    waits longer than `timeout` seconds for the server (None: no limit).
    """

    def __init__(
        self,
        url: str = "redis://127.0.0.1:6379/0",
        *,
        prefix: str = "cantata:",
        connect_timeout: float = 10.0,
        timeout: float | None = 30.0,
    ) -> None:
        if type(prefix) is not str or "\x00" in prefix:
            raise ConfigurationError(
                f"RedisStore prefix must be a string without NUL: {short_repr(prefix)}"
            )
        client, self._where = redis_client(url, connect_timeout, timeout)
        self._client: aioredis.Redis | None = client
        super().__init__(f"RedisStore at {self._where} (prefix {quoted(prefix)})")
        self.url = url
        self.prefix = prefix
        self._timeout = timeout
        # the settings, read by its component config (cantata.declarative)
        self.connect_timeout = connect_timeout
        self.timeout = timeout
        self._logs = f"{prefix}log:"
        self._values = f"{prefix}val:"

    # -- lifecycle -------------------------------------------------------------------------

    async def _connect(self) -> None:
        client = self._client_or_raise()
        version_key = f"{self.prefix}schema_version"
        try:
            await client.ping()
            await client.set(version_key, str(SCHEMA_VERSION), nx=True)
            version = await client.get(version_key)
        except RedisError as exc:
            raise connect_error(self._where, exc) from exc
        if version != str(SCHEMA_VERSION).encode():
            raise StoreSchemaError(
                f"{self._label}: key {quoted(version_key)} says store schema version "
                f"{short_repr(version)}, this cantata knows version {SCHEMA_VERSION}; "
                "upgrade cantata, or use another prefix"
            )

    async def _disconnect(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    def _client_or_raise(self) -> aioredis.Redis:
        client = self._client
        if client is None:
            raise StoreClosedError(f"{self._label} is closed; create a new store to keep working")
        return client

    async def _call(self, action: str, call: Awaitable[T]) -> T:
        try:
            return await call
        except RedisError as exc:
            if self._closed:
                raise StoreClosedError(f"{self._label} was closed during {action}") from exc
            self._fail(action, exc)

    async def _client_ready(self) -> aioredis.Redis:
        await self._ready()
        return self._client_or_raise()

    def _key_name(self, raw: bytes) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise StoreCorruptionError(
                f"{self._label}: the Redis key {short_repr(raw)} under the store's prefix is "
                "not UTF-8, so no store wrote it; delete or rename it"
            ) from None

    def _fail(self, action: str, exc: RedisError) -> NoReturn:
        raise failure(self._label, action, exc, self._timeout) from exc

    # -- logs ------------------------------------------------------------------------------

    async def append(self, log: str, entries: Sequence[Any]) -> int:
        """Append entries atomically and contiguously (one RPUSH); returns the new length."""
        check_name(log, store=self._label, kind="log name")
        where = f"an entry of log {quoted(log)}"
        texts = [encode(entry, store=self._label, where=where) for entry in entries]
        client = await self._client_ready()
        name = self._logs + log
        if not texts:
            return int(await self._call(f"read the length of log {quoted(log)}", client.llen(name)))
        return int(await self._call(f"append to log {quoted(log)}", client.rpush(name, *texts)))

    async def read(self, log: str, start: int = 0, stop: int | None = None) -> list[Any]:
        """Entries `start` to `stop` of a log, with the meaning of a Python slice."""
        check_name(log, store=self._label, kind="log name")
        check_index(start, store=self._label, name="start")
        if stop is not None:
            check_index(stop, store=self._label, name="stop")
        if stop == 0:
            return []
        client = await self._client_ready()
        # LRANGE's end is inclusive, and -1 is the last entry.
        end = -1 if stop is None else stop - 1
        action = f"read log {quoted(log)}"
        raw = await self._call(action, client.lrange(self._logs + log, start, end))
        base = f"{start} + " if start < 0 else ""
        label = self._label
        return [
            decode(v, store=label, where=f"entry {base}{i} of log {quoted(log)}")
            for i, v in enumerate(raw, start=max(start, 0))
        ]

    async def length(self, log: str) -> int:
        """Number of entries in a log (0 for a log never written)."""
        check_name(log, store=self._label, kind="log name")
        client = await self._client_ready()
        action = f"read the length of log {quoted(log)}"
        return int(await self._call(action, client.llen(self._logs + log)))

    async def delete_log(self, log: str) -> None:
        """Remove a log; a missing log is fine."""
        check_name(log, store=self._label, kind="log name")
        client = await self._client_ready()
        await self._call(f"delete log {quoted(log)}", client.delete(self._logs + log))

    # -- values ----------------------------------------------------------------------------

    async def get(self, key: str) -> Any | None:
        """The value at `key`, or None."""
        check_name(key, store=self._label, kind="key")
        client = await self._client_ready()
        raw = await self._call(f"read key {quoted(key)}", client.get(self._values + key))
        if raw is None:
            return None
        return decode(raw, store=self._label, where=f"the value at key {quoted(key)}")

    async def put(self, key: str, value: Any) -> None:
        """Set a value (JSON data)."""
        check_name(key, store=self._label, kind="key")
        text = encode(value, store=self._label, where=f"key {quoted(key)}")
        client = await self._client_ready()
        await self._call(f"write key {quoted(key)}", client.set(self._values + key, text))

    async def put_many(self, items: Mapping[str, Any]) -> None:
        """Set several values with one MSET: all or none."""
        mapping: dict[str, str] = {}
        for key, value in items.items():
            check_name(key, store=self._label, kind="key")
            where = f"key {quoted(key)}"
            mapping[self._values + key] = encode(value, store=self._label, where=where)
        if not mapping:
            return
        client = await self._client_ready()
        await self._call(f"write keys {short_repr(list(items), 200)}", client.mset(mapping))

    async def put_if_absent(self, key: str, value: Any) -> bool:
        """Set a value unless the key holds one (SET NX); True if this call set it."""
        check_name(key, store=self._label, kind="key")
        text = encode(value, store=self._label, where=f"key {quoted(key)}")
        client = await self._client_ready()
        action = f"write key {quoted(key)} if absent"
        return bool(await self._call(action, client.set(self._values + key, text, nx=True)))

    async def delete(self, key: str) -> None:
        """Remove a value; a missing key is fine."""
        check_name(key, store=self._label, kind="key")
        client = await self._client_ready()
        await self._call(f"delete key {quoted(key)}", client.delete(self._values + key))

    async def keys(self, prefix: str = "") -> list[str]:
        """Keys that start with `prefix`, sorted by code point."""
        check_name(prefix, store=self._label, kind="key prefix")
        client = await self._client_ready()
        pattern = _GLOB_SPECIAL.sub(r"\\\1", self._values + prefix) + "*"
        skip = len(self._values)
        found: set[str] = set()  # SCAN may return a key more than once
        try:
            async for raw in client.scan_iter(match=pattern, count=1000):
                found.add(self._key_name(raw)[skip:])
        except RedisError as exc:
            self._fail(f"list keys with prefix {quoted(prefix)}", exc)
        return sorted(found)
