"""cantata.stores: one durable-state abstraction (logs and keyed values) and its backends."""

from .base import StateStore
from .memory import MemoryStore

__all__ = ["MemoryStore", "StateStore"]
