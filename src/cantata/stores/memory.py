"""In-process store: the fastest, and gone with the process."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..core import StoreError

__all__ = ["MemoryStore"]


class MemoryStore:
    """A `StateStore` in dictionaries.

    Values are copied in and out through JSON text only when ``copy=True``; by default the
    store keeps the JSON data it is given, which is safe because cantata's writers always
    hand over freshly built data and never mutate it afterwards.
    """

    def __init__(self, *, copy: bool = False) -> None:
        self._logs: dict[str, list[Any]] = {}
        self._values: dict[str, Any] = {}
        self._copy = copy
        self._closed = False

    def _check(self) -> None:
        if self._closed:
            raise StoreError("this MemoryStore is closed; create a new one")

    def _in(self, value: Any) -> Any:
        if not self._copy:
            return value
        try:
            return json.dumps(value)
        except (TypeError, ValueError) as exc:
            raise StoreError(f"value is not JSON data: {exc}") from exc

    def _out(self, value: Any) -> Any:
        return json.loads(value) if self._copy else value

    async def append(self, log: str, entries: Sequence[Any]) -> int:
        self._check()
        items = self._logs.setdefault(log, [])
        items.extend([self._in(e) for e in entries])
        return len(items)

    async def read(self, log: str, start: int = 0, stop: int | None = None) -> list[Any]:
        self._check()
        items = self._logs.get(log, [])
        return [self._out(e) for e in items[start:stop]]

    async def length(self, log: str) -> int:
        self._check()
        return len(self._logs.get(log, ()))

    async def delete_log(self, log: str) -> None:
        self._check()
        self._logs.pop(log, None)

    async def get(self, key: str) -> Any | None:
        self._check()
        value = self._values.get(key)
        return None if value is None else self._out(value)

    async def put(self, key: str, value: Any) -> None:
        self._check()
        self._values[key] = self._in(value)

    async def put_many(self, items: Mapping[str, Any]) -> None:
        self._check()
        converted = {k: self._in(v) for k, v in items.items()}
        self._values.update(converted)

    async def delete(self, key: str) -> None:
        self._check()
        self._values.pop(key, None)

    async def keys(self, prefix: str = "") -> list[str]:
        self._check()
        return sorted(k for k in self._values if k.startswith(prefix))

    async def close(self) -> None:
        self._closed = True
