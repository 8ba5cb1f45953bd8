"""An item store in process memory: for tests, and for one process that needs nothing kept.

Each namespace keeps its items in a dict, its vectors in one growing float32 matrix (a
delete moves the last row into the hole, so the rows stay contiguous) and its texts in an
inverted index. A query visits only the namespaces under its prefix, found by bisection
in the sorted list of encoded paths.
"""

from __future__ import annotations

import bisect
import builtins
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import StoreClosedError
from .memory_filters import Condition, matches, parse_filter
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
    encode_path,
    path_upper,
    unit_vector,
)
from .memory_text import TextIndex, bm25, fuse, query_words
from .memory_vectors import top_k

__all__ = ["InMemoryItemStore"]

CANDIDATES = 4
"""A hybrid query ranks ``CANDIDATES * limit`` (at least 40) items of each kind, then fuses."""


def candidates(limit: int) -> int:
    """How deep each ranking of a hybrid query goes."""
    return max(CANDIDATES * limit, 40)


@dataclass(slots=True, eq=False)
class _Space:
    """One namespace: its items, their vectors (rows 0..n-1) and their texts."""

    namespace: Namespace
    items: dict[str, Item] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)
    row_keys: builtins.list[str] = field(default_factory=list)
    matrix: np.ndarray | None = None
    text: TextIndex = field(default_factory=TextIndex)
    expiring: int = 0


class InMemoryItemStore:
    """An `ItemStore` in process memory; gone when the process ends.

    `dimensions` fixes the size of the vectors (or the first vector does); `clock` gives
    the time in seconds, for TTL (tests pass a fake one).
    """

    def __init__(
        self, *, dimensions: int | None = None, clock: Callable[[], float] = time.time
    ) -> None:
        self._label = "InMemoryItemStore"
        if dimensions is not None and (type(dimensions) is not int or dimensions < 1):
            from ..core import ConfigurationError

            raise ConfigurationError(f"{self._label}: dimensions must be an int >= 1")
        self._dimensions = dimensions
        self._clock = clock
        self._spaces: dict[str, _Space] = {}
        self._paths: builtins.list[str] = []
        self._closed = False

    def __repr__(self) -> str:
        return f"<{self._label} ({'closed' if self._closed else 'open'})>"

    @property
    def dimensions(self) -> int | None:
        """The size of the store's vectors, or None until the first vector fixes it."""
        return self._dimensions

    async def open(self) -> InMemoryItemStore:
        """Nothing to connect; returns the store (for symmetry with the other backends)."""
        self._check_open()
        return self

    async def __aenter__(self) -> InMemoryItemStore:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Drop everything; later use raises `StoreClosedError`."""
        self._closed = True
        self._spaces.clear()
        self._paths.clear()

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError(f"{self._label} is closed; create a new store")

    # -- writes -----------------------------------------------------------------------------

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
        """Several puts, all checked before any is applied: all or none."""
        self._check_open()
        checked = [self._checked(w) for w in writes]
        dims = self._dimensions
        for *_, unit, _ in checked:
            if unit is not None:
                if dims is None:
                    dims = unit.size
                elif unit.size != dims:
                    unit_vector(unit, dims, store=self._label)  # raises VectorSizeError
        self._dimensions = dims
        now = self._clock()
        self._sweep(now)
        for namespace, key, value, text, unit, ttl in checked:
            self._apply(namespace, key, value, text, unit, ttl, now)

    def _checked(
        self, w: ItemWrite
    ) -> tuple[Namespace, str, dict[str, Any], str | None, np.ndarray | None, float | None]:
        label = self._label
        namespace = check_namespace(w.namespace, store=label)
        key = check_key(w.key, store=label)
        value = check_value(w.value, store=label)
        from ._codec import check_json

        check_json(value, store=label, where=f"the value of item {key!r}")
        text = check_text(w.text, store=label)
        unit = None if w.vector is None else unit_vector(w.vector, self._dimensions, store=label)
        return namespace, key, value, text, unit, check_ttl(w.ttl, store=label)

    def _space(self, namespace: Namespace) -> _Space:
        path = encode_path(namespace)
        space = self._spaces.get(path)
        if space is None:
            space = self._spaces[path] = _Space(namespace)
            bisect.insort(self._paths, path)
        return space

    def _apply(
        self,
        namespace: Namespace,
        key: str,
        value: dict[str, Any],
        text: str | None,
        unit: np.ndarray | None,
        ttl: float | None,
        now: float,
    ) -> None:
        space = self._space(namespace)
        old = space.items.get(key)
        created = now
        if old is not None:
            created = old.created_at if not _expired(old, now) else now
            self._remove(space, key)
        item = Item(namespace, key, _frozen_copy(value), text, created, now, _deadline(ttl, now))
        space.items[key] = item
        if item.expires_at is not None:
            space.expiring += 1
        if text is not None:
            space.text.add(key, text)
        if unit is not None:
            self._add_row(space, key, unit)

    def _add_row(self, space: _Space, key: str, unit: np.ndarray) -> None:
        n = len(space.row_keys)
        if space.matrix is None or space.matrix.shape[0] == n:
            grown = np.empty((max(16, 2 * n), unit.size), dtype=np.float32)
            if space.matrix is not None:
                grown[:n] = space.matrix[:n]
            space.matrix = grown
        space.matrix[n] = unit
        space.rows[key] = n
        space.row_keys.append(key)

    def _remove(self, space: _Space, key: str) -> Item | None:
        item = space.items.pop(key, None)
        if item is None:
            return None
        if item.expires_at is not None:
            space.expiring -= 1
        if item.text is not None:
            space.text.remove(key, item.text)
        row = space.rows.pop(key, None)
        if row is not None and space.matrix is not None:
            last = len(space.row_keys) - 1
            moved = space.row_keys.pop()
            if row != last:
                space.matrix[row] = space.matrix[last]
                space.row_keys[row] = moved
                space.rows[moved] = row
        return item

    def _drop_if_empty(self, path: str) -> None:
        space = self._spaces.get(path)
        if space is not None and not space.items:
            del self._spaces[path]
            self._paths.pop(bisect.bisect_left(self._paths, path))

    async def delete(self, namespace: Namespace, key: str) -> bool:
        """Remove an item; True if a live one was there."""
        self._check_open()
        namespace = check_namespace(namespace, store=self._label)
        check_key(key, store=self._label)
        path = encode_path(namespace)
        space = self._spaces.get(path)
        if space is None:
            return False
        item = self._remove(space, key)
        self._drop_if_empty(path)
        return item is not None and not _expired(item, self._clock())

    async def clear(self, prefix: Namespace) -> int:
        """Remove every item under `prefix`; returns how many live ones there were."""
        self._check_open()
        now = self._clock()
        count = 0
        for path in self._under(check_namespace(prefix, store=self._label, prefix=True)):
            space = self._spaces.pop(path)
            count += sum(not _expired(i, now) for i in space.items.values())
        self._paths = sorted(self._spaces)
        return count

    async def sweep(self) -> int:
        """Remove expired items now; returns how many."""
        self._check_open()
        return self._sweep(self._clock())

    def _sweep(self, now: float) -> int:
        removed = 0
        for path in [p for p, s in self._spaces.items() if s.expiring]:
            space = self._spaces[path]
            for key in [k for k, i in space.items.items() if _expired(i, now)]:
                self._remove(space, key)
                removed += 1
            self._drop_if_empty(path)
        return removed

    # -- reads ------------------------------------------------------------------------------

    def _under(self, prefix: Namespace) -> builtins.list[str]:
        path = encode_path(prefix)
        low = bisect.bisect_left(self._paths, path)
        upper = path_upper(path)
        high = len(self._paths) if upper is None else bisect.bisect_left(self._paths, upper)
        return self._paths[low:high]

    async def get(self, namespace: Namespace, key: str) -> Item | None:
        """The live item at (namespace, key), or None."""
        self._check_open()
        namespace = check_namespace(namespace, store=self._label)
        check_key(key, store=self._label)
        space = self._spaces.get(encode_path(namespace))
        item = None if space is None else space.items.get(key)
        return None if item is None or _expired(item, self._clock()) else _copy(item)

    async def list(
        self,
        prefix: Namespace,
        *,
        filter: Mapping[str, Any] | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> builtins.list[Item]:
        """Live items under `prefix` that match `filter`, by namespace then key."""
        self._check_open()
        prefix = check_namespace(prefix, store=self._label, prefix=True)
        conditions = parse_filter(filter, store=self._label)
        check_limit(limit, offset, store=self._label)
        now = self._clock()
        found: builtins.list[Item] = []
        for path in self._under(prefix):
            space = self._spaces[path]
            for key in sorted(space.items):
                item = space.items[key]
                if not _expired(item, now) and matches(item.value, conditions):
                    if offset:
                        offset -= 1
                        continue
                    found.append(_copy(item))
                    if len(found) == limit:
                        return found
        return found

    async def namespaces(self, prefix: Namespace = ()) -> builtins.list[Namespace]:
        """The namespaces under `prefix` that hold live items, sorted."""
        self._check_open()
        prefix = check_namespace(prefix, store=self._label, prefix=True)
        now = self._clock()
        return [
            self._spaces[p].namespace
            for p in self._under(prefix)
            if any(not _expired(i, now) for i in self._spaces[p].items.values())
        ]

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
        self._check_open()
        label = self._label
        prefix = check_namespace(prefix, store=label, prefix=True)
        conditions = parse_filter(filter, store=label)
        check_limit(limit, 0, store=label)
        query_text = check_text(text, store=label)
        if vector is None and query_text is None:
            return [SearchHit(i, 0.0) for i in await self.list(prefix, filter=filter, limit=limit)]
        query = None if vector is None else unit_vector(vector, self._dimensions, store=label)
        now = self._clock()
        spaces = [self._spaces[p] for p in self._under(prefix)]
        depth = limit if query is None or query_text is None else candidates(limit)
        vector_hits = (
            [] if query is None else self._vector_hits(spaces, query, conditions, now, depth)
        )
        text_hits = (
            []
            if query_text is None
            else self._text_hits(spaces, query_text, conditions, now, depth)
        )
        if query_text is None:
            return [SearchHit(_copy(i), s, similarity=s) for i, s in vector_hits]
        if query is None:
            return [SearchHit(_copy(i), s, text_score=s) for i, s in text_hits]
        by_id = {id(i): i for i, _ in [*vector_hits, *text_hits]}
        fused = fuse(
            [(id(i), s) for i, s in vector_hits], [(id(i), s) for i, s in text_hits], limit
        )
        return [SearchHit(_copy(by_id[i]), f, v, t) for i, f, v, t in fused]

    def _vector_hits(
        self,
        spaces: builtins.list[_Space],
        query: np.ndarray,
        conditions: builtins.list[Condition],
        now: float,
        depth: int,
    ) -> builtins.list[tuple[Item, float]]:
        parts = []
        for index, space in enumerate(spaces):
            n = len(space.row_keys)
            if not n or space.matrix is None:
                continue
            allowed = None
            if conditions or space.expiring:
                allowed = np.fromiter(
                    (
                        not _expired(item, now) and matches(item.value, conditions)
                        for item in (space.items[k] for k in space.row_keys)
                    ),
                    dtype=bool,
                    count=n,
                )
            ids = np.arange(n, dtype=np.int64) + (index << 32)
            parts.append((ids, space.matrix[:n], allowed))
        return [
            (spaces[ident >> 32].items[spaces[ident >> 32].row_keys[ident & 0xFFFFFFFF]], score)
            for ident, score in top_k(parts, query, depth)
        ]

    def _text_hits(
        self,
        spaces: builtins.list[_Space],
        text: str,
        conditions: builtins.list[Condition],
        now: float,
        depth: int,
    ) -> builtins.list[tuple[Item, float]]:
        scores = bm25(((s, s.text) for s in spaces), query_words(text))
        ranked = sorted(scores.items(), key=lambda kv: -kv[1])
        found: builtins.list[tuple[Item, float]] = []
        for (space, key), score in ranked:
            item = space.items[key]  # type: ignore[attr-defined]
            if not _expired(item, now) and matches(item.value, conditions):
                found.append((item, score))
                if len(found) == depth:
                    break
        return found


def _expired(item: Item, now: float) -> bool:
    return item.expires_at is not None and item.expires_at <= now


def _deadline(ttl: float | None, now: float) -> float | None:
    return None if ttl is None else now + ttl


def _frozen_copy(value: dict[str, Any]) -> dict[str, Any]:
    import json

    copied: dict[str, Any] = json.loads(json.dumps(value))
    return copied


def _copy(item: Item) -> Item:
    """A copy the caller may change without changing the store."""
    return Item(
        item.namespace,
        item.key,
        _frozen_copy(item.value),
        item.text,
        item.created_at,
        item.updated_at,
        item.expires_at,
    )
