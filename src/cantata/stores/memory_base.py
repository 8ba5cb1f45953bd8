"""What every item store does the same way: check the arguments, then call its backend.

`ItemStoreBase` holds the public methods of `ItemStore`. Each checks its arguments (the
namespace, key, value, TTL, filter, limit, vector size) and calls one primitive of the
backend with what it checked: an encoded namespace path, parsed filter conditions, a unit
vector. So every backend refuses the same bad input with the same typed error, and a
backend is only its storage: eight primitives (`_write_items`, `_get_item`, ...). The
search helpers below are the parts of a query that do not depend on where items live:
how deep each ranking goes, and how a vector ranking and a text ranking become one.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import numpy as np

from ._codec import encode
from .memory_errors import VectorSizeError
from .memory_filters import Condition, parse_filter
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
    unit_vector,
)
from .memory_text import fuse

__all__ = ["CheckedWrite", "ItemStoreBase", "Query", "candidates", "ranked"]

K = TypeVar("K", bound=Hashable)

CANDIDATES = 4
"""A hybrid query ranks ``CANDIDATES * limit`` (at least 40) items of each kind, then fuses."""

Ranked = tuple[K, float, float | None, float | None]
"""(id, score, cosine similarity or None, text relevance or None), best first."""


def candidates(limit: int) -> int:
    """How deep each ranking of a hybrid query goes."""
    return max(CANDIDATES * limit, 40)


@dataclass(frozen=True, slots=True)
class Query:
    """A checked search: the prefix's path, the filter, a unit vector or a text or both."""

    path: str
    conditions: builtins.list[Condition]
    vector: np.ndarray | None
    text: str | None
    limit: int

    @property
    def depth(self) -> int:
        """How deep each ranking goes: `limit` for one kind of query, more for a hybrid one."""
        return self.limit if self.vector is None or self.text is None else candidates(self.limit)

    def rank(
        self, vector_hits: builtins.list[tuple[K, float]], text_hits: builtins.list[tuple[K, float]]
    ) -> builtins.list[Ranked[K]]:
        """The query's ranking from its parts' (see `ranked`)."""
        return ranked(
            vector_hits,
            text_hits,
            vector=self.vector is not None,
            text=self.text is not None,
            limit=self.limit,
        )

    def sized(self, dimensions: int | None, *, store: str) -> Query:
        """The query against a store whose vector size was just learned (checked again)."""
        if self.vector is None or dimensions is None:
            return self
        return replace(self, vector=unit_vector(self.vector, dimensions, store=store))


def ranked(
    vector_hits: builtins.list[tuple[K, float]],
    text_hits: builtins.list[tuple[K, float]],
    *,
    vector: bool,
    text: bool,
    limit: int,
) -> builtins.list[Ranked[K]]:
    """One ranking from a query's parts: either one as it is, or both fused by rank."""
    if not text:
        return [(i, s, s, None) for i, s in vector_hits]
    if not vector:
        return [(i, s, None, s) for i, s in text_hits]
    return fuse(vector_hits, text_hits, limit)


def hits(fused: builtins.list[Ranked[K]], items: Mapping[K, Item]) -> builtins.list[SearchHit]:
    """The ranking as `SearchHit`s (an id whose item is gone meanwhile is skipped)."""
    return [SearchHit(items[i], s, v, t) for i, s, v, t in fused if i in items]


@dataclass(frozen=True, slots=True)
class CheckedWrite:
    """One write, checked: what every backend needs to store it."""

    namespace: Namespace
    path: str
    key: str
    value: dict[str, Any]
    json: str
    text: str | None
    unit: np.ndarray | None
    ttl: float | None

    @property
    def blob(self) -> bytes | None:
        """The unit vector as float32 bytes, as the SQL backends keep it."""
        return None if self.unit is None else self.unit.tobytes()


def check_writes(
    writes: Sequence[ItemWrite], dimensions: int | None, *, store: str
) -> tuple[builtins.list[CheckedWrite], int | None]:
    """Every write checked before any is applied, and the size of their vectors.

    The first vector fixes the size for the rest when the store has none yet, so a batch
    of mixed sizes is refused whole. Vectors are normalized together (one array
    operation a batch); a batch with a bad one is checked vector by vector, so the error
    names it.
    """
    units = _units(writes, dimensions, store=store)
    size = None if units is None else int(units.shape[1])
    paths: dict[Namespace, str] = {}
    checked: builtins.list[CheckedWrite] = []
    row = 0
    for w in writes:
        namespace = w.namespace
        path = paths.get(namespace) if _plain(namespace) else None
        if path is None:
            namespace = check_namespace(namespace, store=store)
            path = paths[namespace] = encode_path(namespace)
        key = check_key(w.key, store=store)
        value = check_value(w.value, store=store)
        text = check_text(w.text, store=store)
        unit = None
        if w.vector is not None and units is not None:
            unit = units[row]
            row += 1
        ttl = check_ttl(w.ttl, store=store)
        json = encode(value, store=store, where=f"the value of item {key!r}")
        checked.append(CheckedWrite(namespace, path, key, value, json, text, unit, ttl))
    return checked, size


def _plain(namespace: Any) -> bool:
    """True if `namespace` is a tuple of strs (so hashable): it may be looked up."""
    return type(namespace) is tuple and all(type(part) is str for part in namespace)


def _units(writes: Sequence[ItemWrite], dimensions: int | None, *, store: str) -> np.ndarray | None:
    """The unit vectors of the writes that have one, as rows of one float32 matrix."""
    vectors = [w.vector for w in writes if w.vector is not None]
    if not vectors:
        return None
    try:
        matrix = np.asarray(vectors, dtype=np.float32)
        if matrix.ndim == 2 and matrix.shape[1] and dimensions in (None, matrix.shape[1]):
            with np.errstate(all="ignore"):
                norms = np.linalg.norm(matrix, axis=1)
            if np.isfinite(norms).all() and norms.all():
                return np.ascontiguousarray(matrix / norms[:, None], dtype=np.float32)
    except (TypeError, ValueError):
        pass
    # one is bad: find it, and refuse with what is wrong with it
    units = []
    for vector in vectors:
        unit = unit_vector(vector, dimensions, store=store)
        dimensions = unit.size
        units.append(unit)
    return np.stack(units)  # every vector was fine after all (it cannot get here otherwise)


class ItemStoreBase:
    """The public methods of `ItemStore`: checks, then the backend's primitive.

    A backend sets `_label`, `_dimensions` and `_clock`, and implements `_begin` (open, or
    refuse when closed) and the primitives, which receive checked arguments only.
    """

    _label: str
    _dimensions: int | None
    _clock: Callable[[], float]

    @property
    def dimensions(self) -> int | None:
        """The size of the store's vectors, or None until the first vector fixes it."""
        return self._dimensions

    # -- the public methods -----------------------------------------------------------------

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
        """Create or replace the item at (namespace, key); `ttl` in seconds."""
        await self.put_many([ItemWrite(namespace, key, value, text, vector, ttl)])  # type: ignore[arg-type]

    async def put_many(self, writes: Sequence[ItemWrite]) -> None:
        """Several puts in one transaction, all checked before any is applied: all or none."""
        await self._begin()  # first: opening reads the size of the stored vectors
        checked, size = check_writes(writes, self._dimensions, store=self._label)
        if checked:
            await self._write_items(checked, size)

    async def get(self, namespace: Namespace, key: str) -> Item | None:
        """The live item at (namespace, key), or None."""
        path = encode_path(check_namespace(namespace, store=self._label))
        check_key(key, store=self._label)
        await self._begin()
        return await self._get_item(path, key)

    async def delete(self, namespace: Namespace, key: str) -> bool:
        """Remove an item; True if a live one was there."""
        path = encode_path(check_namespace(namespace, store=self._label))
        check_key(key, store=self._label)
        await self._begin()
        return await self._delete_item(path, key)

    async def clear(self, prefix: Namespace) -> int:
        """Remove every item under `prefix`; returns how many live ones there were."""
        path = encode_path(check_namespace(prefix, store=self._label, prefix=True))
        await self._begin()
        return await self._clear_items(path)

    async def sweep(self) -> int:
        """Remove expired items now; returns how many."""
        await self._begin()
        return await self._sweep_items()

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
        await self._begin()
        return await self._list_items(path, conditions, limit, offset)

    async def namespaces(self, prefix: Namespace = ()) -> builtins.list[Namespace]:
        """The namespaces under `prefix` that hold live items, sorted."""
        path = encode_path(check_namespace(prefix, store=self._label, prefix=True))
        await self._begin()
        return await self._list_namespaces(path)

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
        await self._begin()
        if vector is None and query_text is None:
            items = await self._list_items(path, conditions, limit, 0)
            return [SearchHit(i, 0.0) for i in items]
        query = None if vector is None else unit_vector(vector, self._dimensions, store=label)
        return await self._search_items(Query(path, conditions, query, query_text, limit))

    # -- what a backend implements ----------------------------------------------------------

    async def _begin(self) -> None:
        """Open the store on first use; raise `StoreClosedError` once it is closed."""
        raise NotImplementedError

    async def _write_items(self, writes: builtins.list[CheckedWrite], size: int | None) -> None:
        """Apply checked writes in one transaction; `size`: their vectors' size, if any."""
        raise NotImplementedError

    async def _get_item(self, path: str, key: str) -> Item | None:
        raise NotImplementedError

    async def _delete_item(self, path: str, key: str) -> bool:
        raise NotImplementedError

    async def _clear_items(self, path: str) -> int:
        raise NotImplementedError

    async def _sweep_items(self) -> int:
        raise NotImplementedError

    async def _list_items(
        self, path: str, conditions: builtins.list[Condition], limit: int, offset: int
    ) -> builtins.list[Item]:
        raise NotImplementedError

    async def _list_namespaces(self, path: str) -> builtins.list[Namespace]:
        raise NotImplementedError

    async def _search_items(self, query: Query) -> builtins.list[SearchHit]:
        """A vector, text or hybrid query (at least one of its vector and text is set)."""
        raise NotImplementedError


def settled_size(stored: str | None, size: int, *, store: str) -> int:
    """The store's vector size once vectors of `size` are written: the stored one, if any.

    Backends call it inside the write's transaction, so two processes that each write a
    store's first vectors, of different sizes, cannot both succeed.
    """
    dimensions = size if stored is None else int(stored)
    if size != dimensions:
        unit_vector(np.ones(size), dimensions, store=store)  # raises VectorSizeError
    return dimensions


def opened_size(stored: str | bytes | None, given: int | None, *, store: str) -> int | None:
    """The vector size of a store being opened: the one its data holds, else the one given.

    A store opened with ``dimensions=`` other than its data's is refused: its vectors
    would never match the stored ones.
    """
    if stored is None:
        return given
    size = int(stored)
    if given is not None and size != given:
        raise VectorSizeError(
            f"{store}: the data holds vectors of {size} dimensions, the store was opened "
            f"with dimensions={given}; embed with the same model, or use another store",
            expected=size,
            got=given,
        )
    return size
