"""cantata.stores: one durable-state abstraction (logs and keyed values) and its backends.

`PostgresStore` and `RedisStore` are imported on first access, so that the package works
without their optional dependencies (``cantata[postgres]``, ``cantata[redis]``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import StateStore
from .claims import held_claim, settle_claim, take_claim
from .errors import StoreClosedError, StoreCorruptionError, StoreSchemaError, StoreTimeoutError
from .integrity import checksum, seal, unseal
from .memory import MemoryStore
from .sqlite import SQLiteStore
from .url import open_store

if TYPE_CHECKING:
    from .postgres import PostgresStore
    from .redis import RedisStore

__all__ = [
    "MemoryStore",
    "PostgresStore",
    "RedisStore",
    "SQLiteStore",
    "StateStore",
    "StoreClosedError",
    "StoreCorruptionError",
    "StoreSchemaError",
    "StoreTimeoutError",
    "checksum",
    "held_claim",
    "open_store",
    "seal",
    "settle_claim",
    "take_claim",
    "unseal",
]

_LAZY = {"PostgresStore": "postgres", "RedisStore": "redis"}


def __getattr__(name: str) -> Any:
    extra = _LAZY.get(name)
    if extra is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from .url import _backend

    return _backend(extra, name)
