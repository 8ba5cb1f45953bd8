"""cantata.stores: one durable-state abstraction (logs and keyed values) and its backends."""

from .base import StateStore
from .errors import StoreClosedError, StoreCorruptionError, StoreSchemaError
from .memory import MemoryStore
from .sqlite import SQLiteStore

__all__ = [
    "MemoryStore",
    "SQLiteStore",
    "StateStore",
    "StoreClosedError",
    "StoreCorruptionError",
    "StoreSchemaError",
]
