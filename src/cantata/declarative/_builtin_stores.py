"""Adapters of the server stores (PostgreSQL, Redis) and of the store checkpoint store.

A server's password is a secret: the DSN or URL is written without it (PostgreSQL then
reads ``PGPASSWORD``, as libpq does), and with ``include_secrets`` the password becomes a
separate ``password: ${Env:...}`` field, never its value (a PostgreSQL ``sslpassword``
likewise, as ``${Env:PGSSLPASSWORD}``). The drivers are optional extras:
when one is missing its provider still loads, and building it says which extra to install.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from ..core import ConfigurationError
from ._builtin_models import _fields, _typed
from .errors import SpecError
from .registry import ComponentAdapter, ConfigContext, _dump, build, register_component

__all__: list[str] = []

_PG = "cantata.stores.PostgresStore"
_REDIS = "cantata.stores.RedisStore"
_CHECKPOINTS = "cantata.workflows.StateStoreCheckpointStore"
PG_SECRETS = {"password": "PGPASSWORD", "sslpassword": "PGSSLPASSWORD"}
REDIS_SECRETS = {"password": "REDIS_PASSWORD"}


def _url_without_secrets(url: str, secrets: Mapping[str, str]) -> tuple[str, set[str]]:
    """`url` with the password taken out of its user part and the `secrets` out of its
    query; and the names of those it had."""
    parts = urlsplit(url)
    found = {"password"} if parts.password is not None else set()
    netloc = parts.netloc
    if found:
        userinfo, _, hostport = netloc.rpartition("@")
        user = userinfo.partition(":")[0]
        netloc = f"{user}@{hostport}" if user else hostport
    query = parse_qsl(parts.query, keep_blank_values=True)
    found |= {k for k, _ in query if k in secrets}
    kept = [(k, v) for k, v in query if k not in secrets]
    return urlunsplit(parts._replace(netloc=netloc, query=urlencode(kept))), found


def _url_with_password(url: str, password: str) -> str:
    """`url` (without a password) with `password` in its user part."""
    parts = urlsplit(url)
    userinfo, at, hostport = parts.netloc.rpartition("@")
    user = userinfo if at else ""
    netloc = f"{user}:{quote(password, safe='')}@{hostport if at else parts.netloc}"
    return urlunsplit(parts._replace(netloc=netloc))


def _pg_without_secrets(dsn: str) -> tuple[str, set[str]]:
    if dsn.startswith(("postgresql://", "postgres://")):
        return _url_without_secrets(dsn, PG_SECRETS)
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    info = conninfo_to_dict(dsn)
    found = {k for k in PG_SECRETS if info.pop(k, None) is not None}
    return make_conninfo("", **info), found


def _secrets(
    out: dict[str, Any], found: set[str], envs: Mapping[str, str], ctx: ConfigContext
) -> None:
    # the place of each secret, never the secret
    if ctx.include_secrets:
        out.update({k: "${Env:" + envs[k] + "}" for k in sorted(found)})


def _dump_postgres(store: Any, ctx: ConfigContext) -> dict[str, Any]:
    dsn, found = _pg_without_secrets(store.dsn)
    out: dict[str, Any] = {
        "dsn": dsn,
        "table_prefix": store.table_prefix,
        "min_size": store.min_size,
        "max_size": store.max_size,
        "connect_timeout": store.connect_timeout,
        "statement_timeout": store.statement_timeout,
    }
    _secrets(out, found, PG_SECRETS, ctx)
    return out


def _build_postgres(config: Mapping[str, Any], ctx: ConfigContext) -> Any:
    names = {"dsn", *PG_SECRETS, "table_prefix", "min_size", "max_size", "connect_timeout",
             "statement_timeout"}  # fmt: skip
    args = _fields(config, names, _PG, required={"dsn"})
    _typed(args, {"dsn": str, "table_prefix": str, **dict.fromkeys(PG_SECRETS, str)}, _PG)
    _typed(args, {"min_size": int, "max_size": int, "connect_timeout": float}, _PG)
    _typed(args, {"statement_timeout": float}, _PG)
    cls = _installed("postgres", "PostgresStore")
    secrets = {k: args.pop(k) for k in PG_SECRETS if args.get(k) is not None}
    if secrets:
        import psycopg
        from psycopg.conninfo import make_conninfo

        try:
            args["dsn"] = make_conninfo(args["dsn"], **secrets)
        except psycopg.ProgrammingError as exc:
            raise SpecError(f"{_PG}: 'dsn' is not a PostgreSQL DSN: {exc}") from exc
    return cls(**{k: v for k, v in args.items() if k not in PG_SECRETS})


def _dump_redis(store: Any, ctx: ConfigContext) -> dict[str, Any]:
    url, found = _url_without_secrets(store.url, REDIS_SECRETS)
    out: dict[str, Any] = {
        "url": url,
        "prefix": store.prefix,
        "connect_timeout": store.connect_timeout,
        "timeout": store.timeout,
    }
    _secrets(out, found, REDIS_SECRETS, ctx)
    return out


def _build_redis(config: Mapping[str, Any], ctx: ConfigContext) -> Any:
    names = {"url", "password", "prefix", "connect_timeout", "timeout"}
    args = _fields(config, names, _REDIS, required={"url"})
    _typed(args, {"url": str, "password": str, "prefix": str}, _REDIS)
    _typed(args, {"connect_timeout": float, "timeout": float}, _REDIS)
    cls = _installed("redis", "RedisStore")
    password = args.pop("password", None)
    if password is not None:
        try:
            bare = _url_without_secrets(args["url"], REDIS_SECRETS)[0]
            args["url"] = _url_with_password(bare, password)
        except ValueError as exc:  # urllib: a malformed host or port
            raise SpecError(f"{_REDIS}: 'url' is not a Redis URL: {exc}") from exc
    return cls(**args)


def _build_checkpoints(config: Mapping[str, Any], ctx: ConfigContext) -> Any:
    from ..stores import StateStore
    from ..workflows import StateStoreCheckpointStore

    args = _fields(config, {"store"}, _CHECKPOINTS, required={"store"})
    store = build(args["store"], ctx, where=f"{_CHECKPOINTS}.store")
    if not isinstance(store, StateStore):
        raise SpecError(f"{_CHECKPOINTS}: 'store' must be a store config, got {store!r:.80}")
    return StateStoreCheckpointStore(store)


class _NotInstalled:
    """Stands for a store class whose driver is not installed (no object can be one)."""


def _class(module: str, name: str) -> type:
    import importlib

    try:
        cls: type = getattr(importlib.import_module(f"cantata.stores.{module}"), name)
    except ImportError:  # the extra is missing; building says which to install
        return type(f"_NotInstalled{name}", (_NotInstalled,), {})
    return cls


def _installed(module: str, name: str) -> type:
    """The store class, or a `ConfigurationError` naming the extra to install."""
    cls = _class(module, name)
    if issubclass(cls, _NotInstalled):
        raise ConfigurationError(
            f"{name} needs its driver, which is not installed: pip install 'cantata[{module}]'"
        )
    return cls


def _register() -> None:
    from ..workflows import StateStoreCheckpointStore

    register_component(
        ComponentAdapter(_PG, "store", _class("postgres", "PostgresStore"), _dump_postgres,
                         _build_postgres)
    )  # fmt: skip
    register_component(
        ComponentAdapter(_REDIS, "store", _class("redis", "RedisStore"), _dump_redis,
                         _build_redis)
    )  # fmt: skip
    register_component(
        ComponentAdapter(_CHECKPOINTS, "checkpoint_store", StateStoreCheckpointStore,
                         lambda o, c: {"store": _dump(o.store, c)}, _build_checkpoints)
    )  # fmt: skip


_register()
