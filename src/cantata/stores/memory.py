"""In-process store: the fastest, and gone with the process."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ._codec import check_index, check_json, check_name, decode, encode, quoted
from ._lifecycle import StoreLifecycle
from .errors import StoreClosedError

__all__ = ["MemoryStore"]


class MemoryStore(StoreLifecycle):
    """A `StateStore` in dictionaries, with the same rules as the durable backends.

    Every value is checked to be JSON data. By default the store keeps the data it is
    given, which is safe because cantata's writers always hand over freshly built data and
    never mutate it afterwards; ``copy=True`` stores JSON text instead, so callers may
    mutate what they wrote or read without touching the store.
    """

    def __init__(self, *, copy: bool = False) -> None:
        super().__init__("MemoryStore")
        self._logs: dict[str, list[Any]] = {}
        self._values: dict[str, Any] = {}
        self._copy = copy
        self._opened = True  # nothing to connect to

    async def _connect(self) -> None:
        return None

    async def _disconnect(self) -> None:
        self._logs.clear()
        self._values.clear()

    def _check(self) -> None:
        if self._closed:
            raise StoreClosedError("this MemoryStore is closed; create a new one")

    def _in(self, value: Any, where: str) -> Any:
        if self._copy:
            return encode(value, store=self._label, where=where)
        check_json(value, store=self._label, where=where)
        return value

    def _out(self, value: Any, where: str) -> Any:
        return decode(value, store=self._label, where=where) if self._copy else value

    async def append(self, log: str, entries: Sequence[Any]) -> int:
        """Append entries (all checked before any is written); returns the new length."""
        self._check()
        check_name(log, store=self._label, kind="log name")
        where = f"an entry of log {quoted(log)}"
        converted = [self._in(e, where) for e in entries]
        items = self._logs.setdefault(log, [])
        items.extend(converted)
        return len(items)

    async def read(self, log: str, start: int = 0, stop: int | None = None) -> list[Any]:
        """Entries `start` to `stop` of a log, with the meaning of a Python slice."""
        self._check()
        check_name(log, store=self._label, kind="log name")
        check_index(start, store=self._label, name="start")
        if stop is not None:
            check_index(stop, store=self._label, name="stop")
        items = self._logs.get(log, [])[start:stop]
        if not self._copy:
            return items
        return [self._out(e, f"an entry of log {quoted(log)}") for e in items]

    async def length(self, log: str) -> int:
        """Number of entries in a log (0 for a log never written)."""
        self._check()
        check_name(log, store=self._label, kind="log name")
        return len(self._logs.get(log, ()))

    async def delete_log(self, log: str) -> None:
        """Remove a log; a missing log is fine."""
        self._check()
        check_name(log, store=self._label, kind="log name")
        self._logs.pop(log, None)

    async def get(self, key: str) -> Any | None:
        """The value at `key`, or None."""
        self._check()
        check_name(key, store=self._label, kind="key")
        value = self._values.get(key)
        return None if value is None else self._out(value, f"the value at key {quoted(key)}")

    async def put(self, key: str, value: Any) -> None:
        """Set a value (JSON data)."""
        self._check()
        check_name(key, store=self._label, kind="key")
        self._values[key] = self._in(value, f"key {quoted(key)}")

    async def put_many(self, items: Mapping[str, Any]) -> None:
        """Set several values: all are checked before any is written."""
        self._check()
        converted = {}
        for key, value in items.items():
            check_name(key, store=self._label, kind="key")
            converted[key] = self._in(value, f"key {quoted(key)}")
        self._values.update(converted)

    async def put_if_absent(self, key: str, value: Any) -> bool:
        """Set a value unless the key holds one; True if this call set it."""
        self._check()
        check_name(key, store=self._label, kind="key")
        converted = self._in(value, f"key {quoted(key)}")
        if key in self._values:
            return False
        self._values[key] = converted
        return True

    async def delete(self, key: str) -> None:
        """Remove a value; a missing key is fine."""
        self._check()
        check_name(key, store=self._label, kind="key")
        self._values.pop(key, None)

    async def keys(self, prefix: str = "") -> list[str]:
        """Keys that start with `prefix`, sorted by code point."""
        self._check()
        check_name(prefix, store=self._label, kind="key prefix")
        return sorted(k for k in self._values if k.startswith(prefix))
