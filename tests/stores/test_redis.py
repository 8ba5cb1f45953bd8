"""What is specific to `RedisStore`: the key layout, its schema version, connections."""

from __future__ import annotations

from typing import Any

import pytest

from cantata.core import ConfigurationError, SchemaVersionError, StoreError
from cantata.stores import StoreSchemaError

pytestmark = pytest.mark.redis


@pytest.fixture
def client(redis_url: str) -> Any:
    import redis

    with redis.Redis.from_url(redis_url) as conn:
        yield conn


async def test_logs_are_lists_and_values_are_strings(redis_backend: Any, client: Any) -> None:
    prefix = redis_backend.options["prefix"]
    async with redis_backend.store() as store:
        await store.append("log", [{"a": 1}, 2])
        await store.put("k", [1])
    assert client.lrange(f"{prefix}log:log", 0, -1) == [b'{"a":1}', b"2"]
    assert client.get(f"{prefix}val:k") == b"[1]"
    assert client.get(f"{prefix}schema_version") == b"1"


async def test_unknown_schema_version_is_refused(redis_backend: Any, client: Any) -> None:
    client.set(f"{redis_backend.options['prefix']}schema_version", "5")
    store = redis_backend.store()
    with pytest.raises(StoreSchemaError, match="'5'") as info:
        await store.get("k")
    assert isinstance(info.value, SchemaVersionError)


async def test_prefixes_keep_stores_apart(redis_backend: Any, redis_url: str, client: Any) -> None:
    from cantata.stores import RedisStore

    other = redis_backend.options["prefix"] + "b:"
    try:
        async with redis_backend.store() as one, RedisStore(redis_url, prefix=other) as two:
            await one.put("k", "one")
            await one.append("log", [1])
            assert await two.get("k") is None
            assert await two.length("log") == 0
            # The second prefix starts with the first: its keys must not leak into one's.
            await two.put("x", 1)
            assert await one.keys() == ["k"]
    finally:
        for key in client.scan_iter(match=f"{other}*"):
            client.delete(key)


async def test_glob_characters_in_key_prefixes(redis_backend: Any) -> None:
    async with redis_backend.store() as store:
        await store.put_many({"a*b": 1, "axb": 2, "a?": 3, "a[x]": 4, "ax]": 5, "a\\": 6})
        assert await store.keys("a*") == ["a*b"]
        assert await store.keys("a?") == ["a?"]
        assert await store.keys("a[") == ["a[x]"]
        assert await store.keys("a\\") == ["a\\"]


async def test_an_unreachable_server_is_reported(redis_url: str) -> None:
    from cantata.stores import RedisStore

    store = RedisStore("redis://127.0.0.1:1/0", connect_timeout=2)
    with pytest.raises(StoreError, match=r"cannot connect to Redis at 127\.0\.0\.1:1/0"):
        await store.get("k")
    await store.close()


def test_a_malformed_url_is_refused(redis_url: str) -> None:
    from cantata.stores import RedisStore

    with pytest.raises(ConfigurationError, match="Redis URL"):
        RedisStore("redis://127.0.0.1:port/0")


async def test_a_server_that_never_answers_is_a_store_timeout() -> None:
    import asyncio
    import socket

    from cantata.stores import RedisStore, StoreTimeoutError

    # A listening socket that accepts connections (the kernel's backlog) and never answers.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    port = silent.getsockname()[1]
    store = RedisStore(f"redis://127.0.0.1:{port}/0", connect_timeout=0.3, timeout=0.3)
    try:
        # wait_for only keeps a regression from hanging the suite.
        with pytest.raises(StoreTimeoutError, match=r"127\.0\.0\.1") as info:
            await asyncio.wait_for(store.put("k", 1), 60)
        assert isinstance(info.value, TimeoutError)
    finally:
        await store.close()
        silent.close()


async def test_a_key_that_is_not_utf8_is_corruption(redis_backend: Any, client: Any) -> None:
    from cantata.stores import StoreCorruptionError

    prefix = redis_backend.options["prefix"]
    async with redis_backend.store() as store:
        await store.put("fine", 1)
        client.set(f"{prefix}val:".encode() + b"\xff\xfe", b"1")
        with pytest.raises(StoreCorruptionError, match="not UTF-8"):
            await store.keys()
