"""Open an item store from the same URLs as `open_store`, so one setting names both."""

from __future__ import annotations

from typing import Any

from ..core import ConfigurationError, short_repr
from .memory_items import ItemStore
from .url import _backend, _sqlite_path

__all__ = ["open_item_store"]


def open_item_store(url: str, **options: Any) -> ItemStore:
    """An item store for `url` (``memory://``, ``sqlite:///path.db``,
    ``postgresql://user@host/db``, ``redis://host:port/db``).

    Keyword `options` go to the backend (``dimensions=384``, for one). The store connects
    on first use, or on ``await store.open()`` or ``async with``. A URL whose scheme has no
    item store, or whose extra is not installed, raises `ConfigurationError`.
    """
    if type(url) is not str:
        raise ConfigurationError(f"a store URL must be a string, got {type(url).__name__}")
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower() if sep else ""
    if scheme == "memory":
        from .memory_local import InMemoryItemStore  # numpy on first use only

        return InMemoryItemStore(**options)
    if scheme == "sqlite":
        from .memory_sqlite import SQLiteItemStore

        return SQLiteItemStore(_sqlite_path(url, rest), **options)
    if scheme in ("postgresql", "postgres"):
        _backend("postgres", "PostgresStore")  # psycopg installed, or the extra to install
        from .memory_postgres import PostgresItemStore

        return PostgresItemStore(url, **options)
    if scheme in ("redis", "rediss", "unix"):
        _backend("redis", "RedisStore")  # redis-py installed, or the extra to install
        from .memory_redis import RedisItemStore

        return RedisItemStore(url, **options)
    raise ConfigurationError(
        f"no item store for URL {short_repr(url, 200)}: the scheme must be memory, sqlite, "
        "postgresql or redis (memory://, sqlite:///relative/path.db, "
        "sqlite:////absolute/path.db, sqlite://:memory:, postgresql://user@host:port/db, "
        "redis://host:port/db)"
    )
