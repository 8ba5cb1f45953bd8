"""An item store in process memory: for tests, and for one process that needs nothing kept.

Each namespace is a `Space`: its items in a dict, its vectors in one growing float32
matrix (a delete moves the last row into the hole, so the rows stay contiguous) and its
texts in an inverted index. A query visits only the namespaces under its prefix, found by
bisection in the sorted list of encoded paths. The Redis item store keeps copies of its
namespaces as the same spaces, so both score queries with the functions below.
"""

from __future__ import annotations

import bisect
import builtins
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from .errors import StoreClosedError
from .memory_base import CheckedWrite, ItemStoreBase, Query, hits
from .memory_filters import Condition, matches
from .memory_items import Item, Namespace, SearchHit, path_upper
from .memory_text import TextIndex, bm25, query_words
from .memory_vectors import top_k

__all__ = ["InMemoryItemStore"]


@dataclass(slots=True, eq=False)
class Space:
    """One namespace: its items, their vectors (rows 0..n-1) and their texts."""

    namespace: Namespace
    items: dict[str, Item] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)
    row_keys: builtins.list[str] = field(default_factory=list)
    matrix: np.ndarray | None = None
    text: TextIndex = field(default_factory=TextIndex)
    expiring: int = 0

    def add(self, item: Item, unit: np.ndarray | None) -> None:
        """Add an item whose key the space does not hold."""
        self.items[item.key] = item
        if item.expires_at is not None:
            self.expiring += 1
        if item.text is not None:
            self.text.add(item.key, item.text)
        if unit is not None:
            self._add_row(item.key, unit)

    def _add_row(self, key: str, unit: np.ndarray) -> None:
        n = len(self.row_keys)
        if self.matrix is None or self.matrix.shape[0] == n:
            grown = np.empty((max(16, 2 * n), unit.size), dtype=np.float32)
            if self.matrix is not None:
                grown[:n] = self.matrix[:n]
            self.matrix = grown
        self.matrix[n] = unit
        self.rows[key] = n
        self.row_keys.append(key)

    def remove(self, key: str) -> Item | None:
        """Remove the item at `key`; returns it, or None if there was none."""
        item = self.items.pop(key, None)
        if item is None:
            return None
        if item.expires_at is not None:
            self.expiring -= 1
        if item.text is not None:
            self.text.remove(key, item.text)
        row = self.rows.pop(key, None)
        if row is not None and self.matrix is not None:
            last = len(self.row_keys) - 1
            moved = self.row_keys.pop()
            if row != last:
                self.matrix[row] = self.matrix[last]
                self.row_keys[row] = moved
                self.rows[moved] = row
        return item

    def live(self, now: float) -> bool:
        """True if the space holds an item that has not expired."""
        return any(not expired(i, now) for i in self.items.values())


def search_spaces(
    spaces: builtins.list[Space], query: Query, now: float
) -> builtins.list[SearchHit]:
    """A vector, text or hybrid query over `spaces`, exact; hits hold copies of the items."""
    conditions, deep = query.conditions, query.depth
    vector_hits = (
        [] if query.vector is None else _vector_hits(spaces, query.vector, conditions, now, deep)
    )
    text_hits = [] if query.text is None else _text_hits(spaces, query.text, conditions, now, deep)
    by_id = {id(i): i for i, _ in [*vector_hits, *text_hits]}
    fused = query.rank([(id(i), s) for i, s in vector_hits], [(id(i), s) for i, s in text_hits])
    return hits(fused, {i: copy_item(by_id[i]) for i, *_ in fused})


def list_spaces(
    spaces: Iterable[Space],
    conditions: builtins.list[Condition],
    limit: int,
    offset: int,
    now: float,
) -> builtins.list[Item]:
    """Live items of `spaces` (in namespace order) that match, by key; copies."""
    found: builtins.list[Item] = []
    for space in spaces:
        for key in sorted(space.items):
            item = space.items[key]
            if not expired(item, now) and matches(item.value, conditions):
                if offset:
                    offset -= 1
                    continue
                found.append(copy_item(item))
                if len(found) == limit:
                    return found
    return found


def _vector_hits(
    spaces: builtins.list[Space],
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
                    not expired(item, now) and matches(item.value, conditions)
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
    spaces: builtins.list[Space],
    text: str,
    conditions: builtins.list[Condition],
    now: float,
    depth: int,
) -> builtins.list[tuple[Item, float]]:
    scores = bm25(((s, s.text) for s in spaces), query_words(text))
    ordered = sorted(scores.items(), key=lambda kv: -kv[1])
    found: builtins.list[tuple[Item, float]] = []
    for (space, key), score in ordered:
        item = space.items[key]  # type: ignore[attr-defined]
        if not expired(item, now) and matches(item.value, conditions):
            found.append((item, score))
            if len(found) == depth:
                break
    return found


class InMemoryItemStore(ItemStoreBase):
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
        self._spaces: dict[str, Space] = {}
        self._paths: builtins.list[str] = []
        self._closed = False

    def __repr__(self) -> str:
        return f"<{self._label} ({'closed' if self._closed else 'open'})>"

    async def open(self) -> InMemoryItemStore:
        """Nothing to connect; returns the store (for symmetry with the other backends)."""
        await self._begin()
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

    async def _begin(self) -> None:
        if self._closed:
            raise StoreClosedError(f"{self._label} is closed; create a new store")

    # -- writes -----------------------------------------------------------------------------

    async def _write_items(self, writes: builtins.list[CheckedWrite], size: int | None) -> None:
        if size is not None:
            self._dimensions = size
        now = self._clock()
        self._sweep(now)
        for w in writes:
            space = self._space(w.namespace, w.path)
            old = space.remove(w.key)
            created = now if old is None or expired(old, now) else old.created_at
            deadline = None if w.ttl is None else now + w.ttl
            # the value as its JSON decodes: a copy no caller holds, in the stored form
            value = json.loads(w.json)
            space.add(Item(w.namespace, w.key, value, w.text, created, now, deadline), w.unit)

    def _space(self, namespace: Namespace, path: str) -> Space:
        space = self._spaces.get(path)
        if space is None:
            space = self._spaces[path] = Space(namespace)
            bisect.insort(self._paths, path)
        return space

    def _drop_if_empty(self, path: str) -> None:
        space = self._spaces.get(path)
        if space is not None and not space.items:
            del self._spaces[path]
            self._paths.pop(bisect.bisect_left(self._paths, path))

    async def _delete_item(self, path: str, key: str) -> bool:
        space = self._spaces.get(path)
        if space is None:
            return False
        item = space.remove(key)
        self._drop_if_empty(path)
        return item is not None and not expired(item, self._clock())

    async def _clear_items(self, path: str) -> int:
        now = self._clock()
        count = 0
        for under in self._under(path):
            space = self._spaces.pop(under)
            count += sum(not expired(i, now) for i in space.items.values())
        self._paths = sorted(self._spaces)
        return count

    async def _sweep_items(self) -> int:
        return self._sweep(self._clock())

    def _sweep(self, now: float) -> int:
        removed = 0
        for path in [p for p, s in self._spaces.items() if s.expiring]:
            space = self._spaces[path]
            for key in [k for k, i in space.items.items() if expired(i, now)]:
                space.remove(key)
                removed += 1
            self._drop_if_empty(path)
        return removed

    # -- reads ------------------------------------------------------------------------------

    def _under(self, path: str) -> builtins.list[str]:
        low = bisect.bisect_left(self._paths, path)
        upper = path_upper(path)
        high = len(self._paths) if upper is None else bisect.bisect_left(self._paths, upper)
        return self._paths[low:high]

    async def _get_item(self, path: str, key: str) -> Item | None:
        space = self._spaces.get(path)
        item = None if space is None else space.items.get(key)
        return None if item is None or expired(item, self._clock()) else copy_item(item)

    async def _list_items(
        self, path: str, conditions: builtins.list[Condition], limit: int, offset: int
    ) -> builtins.list[Item]:
        spaces = (self._spaces[p] for p in self._under(path))
        return list_spaces(spaces, conditions, limit, offset, self._clock())

    async def _list_namespaces(self, path: str) -> builtins.list[Namespace]:
        now = self._clock()
        return [self._spaces[p].namespace for p in self._under(path) if self._spaces[p].live(now)]

    async def _search_items(self, query: Query) -> builtins.list[SearchHit]:
        spaces = [self._spaces[p] for p in self._under(query.path)]
        return search_spaces(spaces, query, self._clock())


def expired(item: Item, now: float) -> bool:
    """True if `item` has a deadline and it has passed."""
    return item.expires_at is not None and item.expires_at <= now


def copy_item(item: Item) -> Item:
    """A copy the caller may change without changing the store."""
    return Item(
        item.namespace,
        item.key,
        json.loads(json.dumps(item.value)),
        item.text,
        item.created_at,
        item.updated_at,
        item.expires_at,
    )
