"""Choose a backend from a URL, so configuration files and CLIs name a store in one string."""

from __future__ import annotations

import importlib
from typing import Any

from ..core import ConfigurationError, short_repr
from .base import StateStore
from .memory import MemoryStore
from .sqlite import SQLiteStore

__all__ = ["open_store"]

_SUPPORTED = (
    "memory://, sqlite:///relative/path.db, sqlite:////absolute/path.db, sqlite://:memory:, "
    "postgresql://user@host:port/db, redis://host:port/db"
)
_EXTRAS = {"postgres": ("psycopg", "psycopg_pool"), "redis": ("redis",)}


def open_store(url: str, **options: Any) -> StateStore:
    """A store for `url`; keyword `options` go to the backend's constructor.

    The store connects on first use (or ``await store.open()``, or ``async with``). SQLite
    paths follow SQLAlchemy's form: three slashes for a relative path, four for an absolute
    one. Unknown schemes, and backends whose extra is not installed, raise
    `ConfigurationError` saying what to do.
    """
    if type(url) is not str:
        raise ConfigurationError(f"a store URL must be a string, got {type(url).__name__}")
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if not sep:
        scheme = ""
    if scheme == "memory":
        return MemoryStore(**options)
    if scheme == "sqlite":
        return SQLiteStore(_sqlite_path(url, rest), **options)
    if scheme in ("postgresql", "postgres"):
        cls = _backend("postgres", "PostgresStore")
        store: StateStore = cls(url, **options)
        return store
    if scheme in ("redis", "rediss", "unix"):
        cls = _backend("redis", "RedisStore")
        store = cls(url, **options)
        return store
    raise ConfigurationError(
        f"unknown store URL {short_repr(url, 200)}: the scheme must be one of memory, sqlite, "
        f"postgresql, redis (for example {_SUPPORTED})"
    )


def _sqlite_path(url: str, rest: str) -> str:
    if rest in ("", ":memory:", "/:memory:"):
        return ":memory:"
    if not rest.startswith("/"):
        raise ConfigurationError(
            f"store URL {short_repr(url, 200)} has no path: write sqlite:///relative.db, "
            "sqlite:////absolute/path.db or sqlite://:memory:"
        )
    return rest[1:]


def _backend(extra: str, name: str) -> Any:
    """The backend class, or a `ConfigurationError` naming the extra to install."""
    try:
        module = importlib.import_module(f"{__package__}.{extra}")
    except ModuleNotFoundError as exc:
        if exc.name not in _EXTRAS[extra]:
            raise
        raise ConfigurationError(
            f"{name} needs the {exc.name!r} package, which is not installed: "
            f"pip install 'cantata[{extra}]'"
        ) from exc
    return getattr(module, name)
