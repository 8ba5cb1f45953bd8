"""cantata.stores: one durable-state abstraction (logs and keyed values) and its backends,
and item stores (namespaced items with vector, full-text and hybrid search) on the same URLs.

`PostgresStore` and `RedisStore` are imported on first access, so that the package works
without their optional dependencies (``cantata[postgres]``, ``cantata[redis]``); so are the
item store backends, which need numpy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import StateStore
from .claims import held_claim, settle_claim, take_claim
from .errors import StoreClosedError, StoreCorruptionError, StoreSchemaError, StoreTimeoutError
from .integrity import checksum, seal, unseal
from .memory import MemoryStore
from .memory_errors import FilterError, NamespaceError, VectorSizeError
from .memory_items import Item, ItemStore, ItemWrite, Namespace, SearchHit
from .memory_url import open_item_store
from .sqlite import SQLiteStore
from .url import open_store

if TYPE_CHECKING:
    from .memory_local import InMemoryItemStore
    from .memory_postgres import PostgresItemStore
    from .memory_redis import RedisItemStore
    from .memory_sqlite import SQLiteItemStore
    from .postgres import PostgresStore
    from .redis import RedisStore

__all__ = [
    "FilterError",
    "InMemoryItemStore",
    "Item",
    "ItemStore",
    "ItemWrite",
    "MemoryStore",
    "Namespace",
    "NamespaceError",
    "PostgresItemStore",
    "PostgresStore",
    "RedisItemStore",
    "RedisStore",
    "SQLiteItemStore",
    "SQLiteStore",
    "SearchHit",
    "StateStore",
    "StoreClosedError",
    "StoreCorruptionError",
    "StoreSchemaError",
    "StoreTimeoutError",
    "VectorSizeError",
    "checksum",
    "held_claim",
    "open_item_store",
    "open_store",
    "seal",
    "settle_claim",
    "take_claim",
    "unseal",
]

_LAZY = {"PostgresStore": "postgres", "RedisStore": "redis"}
# The item stores need numpy, imported on first use so that `import cantata` stays light.
_LAZY_LOCAL = {"InMemoryItemStore": "memory_local", "SQLiteItemStore": "memory_sqlite"}
_LAZY_EXTRA = {
    "PostgresItemStore": ("postgres", "memory_postgres", "PostgresStore"),
    "RedisItemStore": ("redis", "memory_redis", "RedisStore"),
}


def __getattr__(name: str) -> Any:
    import importlib

    local = _LAZY_LOCAL.get(name)
    if local is not None:
        return getattr(importlib.import_module(f"{__name__}.{local}"), name)
    if name in _LAZY_EXTRA:
        from .url import _backend

        needs, module, state_store = _LAZY_EXTRA[name]
        _backend(needs, state_store)  # the extra's check, with what to install
        return getattr(importlib.import_module(f"{__name__}.{module}"), name)
    extra = _LAZY.get(name)
    if extra is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from .url import _backend

    return _backend(extra, name)
