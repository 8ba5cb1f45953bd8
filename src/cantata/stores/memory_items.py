"""Namespaced items with vector and full-text search: the protocol every item store keeps.

An item lives at (namespace, key). A namespace is a tuple of strings, such as
``("user", user_id, "facts")``; every read takes a namespace *prefix* and the backends put
that prefix into the query itself (an index range over the encoded path), so an item
outside the prefix is never read, scored or returned: a scope is enforced by the store,
not filtered afterwards. Values are JSON objects (dicts); metadata filters match their
fields. An item may carry a text (indexed for full-text search) and a vector (for cosine
similarity); both are replaced whole by the next `put` of the same key.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..core import UsageError, short_repr
from .memory_errors import NamespaceError, VectorSizeError

if TYPE_CHECKING:
    import numpy as np

__all__ = ["Item", "ItemStore", "ItemWrite", "Namespace", "SearchHit"]

Namespace = tuple[str, ...]
"""A namespace: a tuple of non-empty strings, from the widest scope to the narrowest."""

SEP = "\x1f"
"""Ends every component of an encoded namespace path (never allowed inside one)."""

MAX_COMPONENT = 1_000
RRF_K = 60
"""Reciprocal-rank fusion's constant, as in Cormack et al. (2009) and most peers."""


@dataclass(frozen=True, slots=True)
class Item:
    """One stored item. Times are seconds since the epoch; `expires_at` is None without TTL."""

    namespace: Namespace
    key: str
    value: dict[str, Any]
    text: str | None
    created_at: float
    updated_at: float
    expires_at: float | None = None


@dataclass(frozen=True, slots=True)
class SearchHit:
    """An item found by `search`, best first.

    `score` is what the hits are ordered by: the cosine similarity for a vector query, the
    full-text relevance for a text query, and the reciprocal-rank fusion of both for a
    hybrid one. `similarity` and `text_score` are the parts (None where not computed).
    """

    item: Item
    score: float
    similarity: float | None = None
    text_score: float | None = None


@dataclass(frozen=True, slots=True)
class ItemWrite:
    """One write of `ItemStore.put_many`: the arguments of `put`, as data."""

    namespace: Namespace
    key: str
    value: dict[str, Any]
    text: str | None = None
    vector: Sequence[float] | None = None
    ttl: float | None = None


@runtime_checkable
class ItemStore(Protocol):
    """Namespaced items with metadata filters, TTL, vector, full-text and hybrid search.

    Every method that reads takes the namespace prefix it may read, and nothing outside it
    is touched. A write is atomic (`put_many` too: all items or none). Filters map a field
    of the value (dotted for nested fields) to a value (equality) or to operators:
    ``{"kind": "fact", "score": {"$gte": 3}, "tag": {"$in": ["a", "b"]}}``; the operators
    are ``$eq $ne $gt $gte $lt $lte $in $nin``, and any other raises `FilterError`. An
    expired item is invisible at once and removed by the next write or `sweep()`.
    """

    @property
    def dimensions(self) -> int | None:
        """The size of the store's vectors, or None until the first vector fixes it."""
        ...

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
        ...

    async def put_many(self, writes: Sequence[ItemWrite]) -> None:
        """Several puts in one transaction: all or none."""
        ...

    async def get(self, namespace: Namespace, key: str) -> Item | None:
        """The live item at (namespace, key), or None."""
        ...

    async def delete(self, namespace: Namespace, key: str) -> bool:
        """Remove an item; True if one was there."""
        ...

    async def clear(self, prefix: Namespace) -> int:
        """Remove every item under `prefix`; returns how many."""
        ...

    async def list(
        self,
        prefix: Namespace,
        *,
        filter: Mapping[str, Any] | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> builtins.list[Item]:
        """Live items under `prefix` that match `filter`, by namespace then key."""
        ...

    async def namespaces(self, prefix: Namespace = ()) -> builtins.list[Namespace]:
        """The namespaces under `prefix` that hold live items, sorted."""
        ...

    async def search(
        self,
        prefix: Namespace,
        *,
        vector: Sequence[float] | None = None,
        text: str | None = None,
        filter: Mapping[str, Any] | None = None,
        limit: int = 10,
    ) -> builtins.list[SearchHit]:
        """The best `limit` live items under `prefix` that match `filter`.

        With `vector`: exact cosine top-k. With `text`: full-text relevance. With both:
        the two rankings fused by reciprocal rank. With neither: like `list`.
        """
        ...

    async def sweep(self) -> int:
        """Remove expired items now; returns how many."""
        ...

    async def close(self) -> None:
        """Release what the store holds; idempotent."""
        ...


# -- checks shared by the backends -----------------------------------------------------------


def check_namespace(namespace: Any, *, store: str, prefix: bool = False) -> Namespace:
    """`namespace` as a tuple, or `NamespaceError` saying what is wrong with it."""
    what = "namespace prefix" if prefix else "namespace"
    if type(namespace) is not tuple:
        raise NamespaceError(
            f"{store}: a {what} must be a tuple of strings such as ('user', 'u1', 'facts'), "
            f"got {type(namespace).__name__} {short_repr(namespace)}"
        )
    if not namespace and not prefix:
        raise NamespaceError(f"{store}: an item's namespace needs at least one component")
    for part in namespace:
        if type(part) is not str or not part:
            raise NamespaceError(
                f"{store}: every component of a {what} must be a non-empty str, got "
                f"{short_repr(part)} in {short_repr(namespace)}"
            )
        if len(part) > MAX_COMPONENT or "\x00" in part or SEP in part or not _utf8(part):
            raise NamespaceError(
                f"{store}: the {what} component {short_repr(part)} is longer than "
                f"{MAX_COMPONENT} characters or holds a NUL, a \\x1f or a lone surrogate"
            )
    return namespace


def check_key(key: Any, *, store: str) -> str:
    """`key` if it is a non-empty str the backends can keep."""
    if type(key) is not str or not key or "\x00" in key or not _utf8(key):
        raise NamespaceError(
            f"{store}: an item key must be a non-empty str without NUL or lone surrogates, "
            f"got {short_repr(key)}"
        )
    return key


def check_ttl(ttl: Any, *, store: str) -> float | None:
    """A TTL in seconds (> 0, finite), or None."""
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not 0 < ttl < 1e12:
        raise UsageError(f"{store}: ttl must be a number of seconds > 0, got {short_repr(ttl)}")
    return float(ttl)


def check_limit(limit: Any, offset: Any, *, store: str) -> None:
    """`limit` >= 1 and `offset` >= 0, both ints."""
    for name, value, low in (("limit", limit, 1), ("offset", offset, 0)):
        if type(value) is not int or value < low:
            raise UsageError(f"{store}: {name} must be an int >= {low}, got {short_repr(value)}")


def check_text(text: Any, *, store: str) -> str | None:
    """A text to index (a str without lone surrogates), or None."""
    if text is None:
        return None
    if type(text) is not str or not _utf8(text):
        raise UsageError(f"{store}: text must be a str of valid Unicode, got {short_repr(text)}")
    return text


def encode_path(namespace: Namespace) -> str:
    """The path a backend indexes: every component followed by `SEP`.

    A prefix's path is then a string prefix of the path of every namespace under it, and
    of no other (``("a",)`` is ``"a\\x1f"``, which ``("ab",)`` does not start with).
    """
    return "".join(part + SEP for part in namespace)


def decode_path(path: str) -> Namespace:
    """The namespace of an encoded path."""
    return tuple(path.split(SEP)[:-1])


def path_upper(path: str) -> str | None:
    """The least string greater than every string that starts with `path` (None: no bound).

    Paths end with `SEP`, so the bound is the path with its last character raised by one.
    """
    if not path:
        return None
    return path[:-1] + chr(ord(path[-1]) + 1)


def unit_vector(vector: Any, dimensions: int | None, *, store: str) -> np.ndarray:
    """`vector` as a normalized float32 array of the store's size (`VectorSizeError` else)."""
    import numpy as np  # imported when vectors are first used: `import cantata` stays light

    try:
        array = np.asarray(vector, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise VectorSizeError(
            f"{store}: a vector must be a sequence of numbers, got {short_repr(vector)}"
        ) from exc
    if array.ndim != 1 or array.size == 0:
        raise VectorSizeError(
            f"{store}: a vector must be one flat sequence of numbers, got shape {array.shape}"
        )
    if dimensions is not None and array.size != dimensions:
        raise VectorSizeError(
            f"{store}: the vector has {array.size} dimensions, the store's have {dimensions}; "
            "embed with the model the store was filled with, or use another store",
            expected=dimensions,
            got=int(array.size),
        )
    norm = float(np.linalg.norm(array))
    if not math.isfinite(norm) or norm == 0.0:
        raise VectorSizeError(
            f"{store}: the vector's norm is {norm}: a vector for cosine similarity must be "
            "finite and not all zeros"
        )
    return np.ascontiguousarray(array / norm, dtype=np.float32)


def check_value(value: Any, *, store: str) -> dict[str, Any]:
    """The value as a dict (an item's value is a JSON object, so filters can match it)."""
    if not isinstance(value, Mapping):
        raise UsageError(
            f"{store}: an item's value must be a dict (a JSON object), got "
            f"{type(value).__name__}; wrap it, for example {{'value': ...}}"
        )
    return dict(value)


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
