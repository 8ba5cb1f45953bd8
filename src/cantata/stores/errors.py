"""Errors of the stores, all under `cantata.core.StoreError` so one `except` catches them."""

from __future__ import annotations

from ..core import SchemaVersionError, StoreError, TimeoutError

__all__ = ["StoreClosedError", "StoreCorruptionError", "StoreSchemaError", "StoreTimeoutError"]


class StoreClosedError(StoreError, ValueError):
    """The store was closed; open a new one (closing twice is fine, using it is not).

    Also a `ValueError`, as an operation on a closed file is.
    """


class StoreTimeoutError(StoreError, TimeoutError):
    """A store operation waited past its bound (a lock held by another connection, a slow
    server); also `cantata.core.TimeoutError` and the builtin `TimeoutError`."""


class StoreCorruptionError(StoreError):
    """A stored value or log entry is not valid JSON; nothing was returned."""


class StoreSchemaError(StoreError, SchemaVersionError):
    """The database holds a store schema version this code does not know.

    Also a `SchemaVersionError`, so code that guards every persisted format catches it.
    """
