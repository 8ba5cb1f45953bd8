"""The one durable-state abstraction: append-only logs and keyed values.

Threads are logs of messages, checkpoints are keyed values that point into logs, runtime
state is keyed values, the effect journal is a log. Keeping one small protocol means every
backend (memory, SQLite, PostgreSQL, Redis) serves every layer, and a new backend is four
methods of logs and six of values.

Values are plain JSON data (what `cantata.core.to_json` produces). A store never sees
Python objects, so no backend can unpickle anything.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

__all__ = ["StateStore"]


@runtime_checkable
class StateStore(Protocol):
    """Append-only logs and keyed values, safe for many concurrent writers.

    Logs: `append` is atomic per call (all entries or none) and entries of one call stay
    contiguous and in order, whatever other writers do. Positions start at 0 and are dense.
    `read` takes `start` and `stop` as a Python slice does (negative counts from the end).
    Values: `put_many` is atomic (all or none). Keys and log names are free strings
    (without NUL characters or lone surrogates); callers namespace them (``"thread:<id>"``,
    ``"ckpt:<run>:<id>"``). Logs and values live in separate namespaces.

    Every value and entry must be JSON data that round-trips exactly: dicts with string
    keys, lists, strings, ints, finite floats, bools and None (no tuples, no subclasses).
    Anything else raises `StoreError` and writes nothing; a stored value that cannot be
    parsed raises `StoreCorruptionError` naming it. `get` cannot tell a stored None from
    a missing key. `close()` may be called twice; any other use after it raises
    `StoreClosedError`. Backends are async context managers.
    """

    async def append(self, log: str, entries: Sequence[Any]) -> int:
        """Append entries to a log; returns the log's length after the append."""
        ...

    async def read(self, log: str, start: int = 0, stop: int | None = None) -> list[Any]:
        """Entries ``start`` (inclusive) to ``stop`` (exclusive, None for the end)."""
        ...

    async def length(self, log: str) -> int:
        """Number of entries in a log (0 for a log never written)."""
        ...

    async def delete_log(self, log: str) -> None:
        """Remove a log; deleting a missing log does nothing."""
        ...

    async def get(self, key: str) -> Any | None:
        """The value at key, or None."""
        ...

    async def put(self, key: str, value: Any) -> None:
        """Set a value."""
        ...

    async def put_many(self, items: Mapping[str, Any]) -> None:
        """Set several values atomically."""
        ...

    async def put_if_absent(self, key: str, value: Any) -> bool:
        """Set a value only if the key holds none; True if this call set it. Atomic across
        every writer of the store (processes included): of two calls on one key, one wins."""
        ...

    async def delete(self, key: str) -> None:
        """Remove a value; deleting a missing key does nothing."""
        ...

    async def keys(self, prefix: str = "") -> list[str]:
        """Keys that start with `prefix`, sorted."""
        ...

    async def close(self) -> None:
        """Release connections; the store must not be used afterwards."""
        ...
