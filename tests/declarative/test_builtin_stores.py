"""Configs of the server stores on the real PostgreSQL and Redis of 127.0.0.1 (skipped when
down, failing under CI), and of the store checkpoint store: a round trip gives a store that
reads what the first one wrote; passwords are left out or written as placeholders."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from cantata.core import ConfigurationError, new_id
from cantata.declarative import SpecError, UnresolvedPlaceholderError, from_config, to_config
from cantata.stores import MemoryStore, PostgresStore, RedisStore, SQLiteStore
from cantata.workflows import StateStoreCheckpointStore


def _through_json(obj: Any, **options: Any) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(json.dumps(to_config(obj, **options)))
    return loaded


@pytest.fixture
async def pg_prefix(postgres_dsn: str) -> AsyncIterator[str]:
    import psycopg

    prefix = f"t{new_id()[:12]}_"
    yield prefix
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        names = ", ".join(f'"{prefix}{t}"' for t in ("meta", "log_heads", "log_entries", "values"))
        conn.execute(f"DROP TABLE IF EXISTS {names}".encode())


@pytest.fixture
async def redis_prefix(redis_url: str) -> AsyncIterator[str]:
    import redis

    prefix = f"cantata-test:{new_id()[:12]}:"
    yield prefix
    client = redis.Redis.from_url(redis_url)
    for key in client.scan_iter(match=f"{prefix}*"):
        client.delete(key)
    client.close()


async def _reads_what_the_first_wrote(first: Any, config: dict[str, Any]) -> Any:
    async with first:
        await first.put("k", {"v": 1})
        await first.append("log", ["a", "b"])
    back = from_config(config)
    assert type(back) is type(first)
    assert to_config(back) == config
    async with back:
        assert await back.get("k") == {"v": 1}
        assert await back.read("log") == ["a", "b"]
    return back


@pytest.mark.postgres
async def test_postgres_round_trip_on_the_real_server(postgres_dsn: str, pg_prefix: str) -> None:
    store = PostgresStore(
        postgres_dsn, table_prefix=pg_prefix, max_size=2, connect_timeout=5.0,
        statement_timeout=None,
    )  # fmt: skip
    config = _through_json(store)
    assert config["provider"] == "cantata.stores.PostgresStore"
    assert config["config"]["statement_timeout"] is None
    back = await _reads_what_the_first_wrote(store, config)
    assert (back.table_prefix, back.max_size, back.connect_timeout) == (pg_prefix, 2, 5.0)


@pytest.mark.redis
async def test_redis_round_trip_on_the_real_server(redis_url: str, redis_prefix: str) -> None:
    store = RedisStore(redis_url, prefix=redis_prefix, connect_timeout=3.0, timeout=7.0)
    config = _through_json(store)
    assert config["provider"] == "cantata.stores.RedisStore"
    back = await _reads_what_the_first_wrote(store, config)
    assert (back.prefix, back.connect_timeout, back.timeout) == (redis_prefix, 3.0, 7.0)


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://alice:s%40cret@127.0.0.1:5432/test?sslmode=disable",
        "postgresql://alice@127.0.0.1/test?password=s%40cret",
        "host=127.0.0.1 user=alice password='s@cret' dbname=test",
    ],
)
def test_a_postgres_password_is_left_out_or_a_placeholder(dsn: str) -> None:
    from psycopg.conninfo import conninfo_to_dict

    store = PostgresStore(dsn)
    plain = json.dumps(to_config(store))
    assert "cret" not in plain and "password" not in plain
    written = to_config(store, include_secrets=True)
    assert "cret" not in json.dumps(written)
    assert written["config"]["password"] == "${Env:PGPASSWORD}"
    back = from_config(written, env={"PGPASSWORD": "new 'pw'@:/"})
    info = conninfo_to_dict(back.dsn)
    assert (info["password"], info["user"], info["dbname"]) == ("new 'pw'@:/", "alice", "test")
    with pytest.raises(UnresolvedPlaceholderError, match="PGPASSWORD"):
        from_config(written, env={})


@pytest.mark.parametrize(
    "url", ["redis://:s%40cret@127.0.0.1:6379/2", "redis://bob:x@127.0.0.1:6379/2?password=s"]
)
def test_a_redis_password_is_left_out_or_a_placeholder(url: str) -> None:
    store = RedisStore(url)
    plain = to_config(store)
    assert plain["config"]["url"].startswith(("redis://127.0.0.1", "redis://bob@127.0.0.1"))
    assert "password" not in json.dumps(plain) and ":x@" not in json.dumps(plain)
    written = to_config(store, include_secrets=True)
    assert written["config"]["password"] == "${Env:REDIS_PASSWORD}"
    back = from_config(written, env={"REDIS_PASSWORD": "p:w@/%"})
    assert back._client is not None
    kwargs = back._client.connection_pool.connection_kwargs
    assert (kwargs["password"], kwargs["host"], kwargs["db"]) == ("p:w@/%", "127.0.0.1", 2)


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://al@127.0.0.1/test?sslpassword=k3y&sslmode=require",
        "host=127.0.0.1 user=al dbname=test sslpassword=k3y sslmode=require",
    ],
)
def test_a_postgres_sslpassword_is_a_secret_too(dsn: str) -> None:
    from psycopg.conninfo import conninfo_to_dict

    store = PostgresStore(dsn)
    assert "k3y" not in json.dumps(to_config(store))
    written = to_config(store, include_secrets=True)
    assert written["config"]["sslpassword"] == "${Env:PGSSLPASSWORD}"
    assert "password" not in written["config"]
    back = from_config(written, env={"PGSSLPASSWORD": "other"})
    info = conninfo_to_dict(back.dsn)
    assert (info["sslpassword"], info["sslmode"]) == ("other", "require")


def test_a_store_without_a_password_writes_no_password_field() -> None:
    config = to_config(RedisStore("redis://127.0.0.1:6379/0"), include_secrets=True)
    assert "password" not in config["config"]


async def test_checkpoint_store_round_trip_with_its_store(tmp_path: Any) -> None:
    for inner in (MemoryStore(), SQLiteStore(str(tmp_path / "c.db"))):
        config = _through_json(StateStoreCheckpointStore(inner))
        assert config["component_type"] == "checkpoint_store"
        back = from_config(config)
        assert isinstance(back, StateStoreCheckpointStore)
        assert type(back.store) is type(inner)
        assert to_config(back) == config


@pytest.mark.parametrize(
    ("provider", "config", "match"),
    [
        ("cantata.stores.PostgresStore", {}, "missing field"),
        ("cantata.stores.PostgresStore", {"dsn": 5}, "'dsn' must be str"),
        ("cantata.stores.PostgresStore", {"dsn": "host=x", "max_size": "4"}, "must be int"),
        ("cantata.stores.PostgresStore", {"dsn": "host=x", "pool": 1}, "unknown field"),
        ("cantata.stores.PostgresStore", {"dsn": "host=x", "table_prefix": "A-"}, "prefix"),
        ("cantata.stores.RedisStore", {"url": "redis://h", "timeout": True}, "must be float"),
        ("cantata.stores.RedisStore", {"url": "nope://h"}, "Redis URL"),
        ("cantata.workflows.StateStoreCheckpointStore", {"store": {"provider": 1}}, "provider"),
        (
            "cantata.workflows.StateStoreCheckpointStore",
            {"store": {"provider": "cantata.teams.RoundRobin"}},
            "must be a store config",
        ),
    ],
)
def test_bad_store_configs_are_typed_errors(
    provider: str, config: dict[str, Any], match: str
) -> None:
    with pytest.raises(ConfigurationError, match=match):
        from_config({"provider": provider, "config": config})
    assert issubclass(SpecError, ConfigurationError)
