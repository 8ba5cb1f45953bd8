"""Threads on the real durable backends: SQLite (a file), PostgreSQL and Redis on
127.0.0.1. Many concurrent writers, tasks and processes, lose no message and keep each
writer's order; a durable thread serializes as a reference and resumes in a new store."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from cantata.agents import ChatAgent, StateStoreMessageStore
from cantata.core import Message, new_id
from cantata.models import ScriptedChatClient

BACKENDS = [
    "sqlite",
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("redis", marks=pytest.mark.redis),
]

# How a child process opens the same namespace: backend name and constructor arguments.
_CHILD = """
import asyncio, json, sys
from cantata.agents import StateStoreMessageStore
from cantata.core import Message

async def main(spec, thread_id, writer, count):
    kind, args, kwargs = spec
    if kind == "sqlite":
        from cantata.stores import SQLiteStore as Store
    elif kind == "postgres":
        from cantata.stores import PostgresStore as Store
    else:
        from cantata.stores import RedisStore as Store
    store = Store(*args, **kwargs)
    messages = StateStoreMessageStore(store, thread_id)
    for i in range(count):
        await messages.add_messages([Message("user", f"{writer}:{i}")])
    await store.close()

asyncio.run(main(json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])))
"""


class Opener:
    """Opens new store objects (each with its own connection) on one isolated namespace."""

    def __init__(self, kind: str, args: list[Any], kwargs: dict[str, Any]) -> None:
        self.spec = (kind, args, kwargs)
        self.opened: list[Any] = []

    def __call__(self) -> Any:
        kind, args, kwargs = self.spec
        if kind == "sqlite":
            from cantata.stores import SQLiteStore as Store
        elif kind == "postgres":
            from cantata.stores import PostgresStore as Store
        else:
            from cantata.stores import RedisStore as Store
        store = Store(*args, **kwargs)
        self.opened.append(store)
        return store


@pytest.fixture(params=BACKENDS)
async def opener(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Opener]:
    kind = request.param
    cleanup: Callable[[], None] = lambda: None  # noqa: E731
    if kind == "sqlite":
        found = Opener(kind, [str(tmp_path / "threads.db")], {})
    elif kind == "postgres":
        import psycopg

        dsn = request.getfixturevalue("postgres_dsn")
        prefix = f"ag{new_id()[:10]}_"
        found = Opener(kind, [dsn], {"table_prefix": prefix})

        def cleanup() -> None:
            with psycopg.connect(dsn, autocommit=True) as conn:
                for table in ("meta", "log_heads", "log_entries", "values"):
                    conn.execute(f'DROP TABLE IF EXISTS "{prefix}{table}"'.encode())

    else:
        import redis

        url = request.getfixturevalue("redis_url")
        prefix = f"cantata-agents-test:{new_id()[:12]}:"
        found = Opener(kind, [url], {"prefix": prefix})

        def cleanup() -> None:
            client = redis.Redis.from_url(url)
            for key in client.scan_iter(match=f"{prefix}*"):
                client.delete(key)
            client.close()

    try:
        yield found
    finally:
        for store in found.opened:
            await store.close()
        cleanup()


def _check_order(texts: list[str], writers: int, per_writer: int) -> None:
    assert len(texts) == writers * per_writer, "a message was lost or duplicated"
    by_writer: dict[str, list[int]] = {}
    for text in texts:
        writer, index = text.split(":")
        by_writer.setdefault(writer, []).append(int(index))
    assert len(by_writer) == writers
    for indexes in by_writer.values():
        assert indexes == list(range(per_writer))


async def test_eight_concurrent_writers_times_1000_appends(opener: Opener) -> None:
    writers, per_writer = 8, 1000
    thread_id = new_id()

    async def write(writer: int) -> None:
        messages = StateStoreMessageStore(opener(), thread_id)
        for i in range(per_writer):
            await messages.add_messages([Message("user", f"w{writer}:{i}")])

    await asyncio.gather(*(write(w) for w in range(writers)))
    stored = await StateStoreMessageStore(opener(), thread_id).list_messages()
    _check_order([m.text for m in stored], writers, per_writer)


async def test_concurrent_processes_lose_nothing_and_keep_order(opener: Opener) -> None:
    processes, per_process = 2, 200
    thread_id = new_id()
    spec = json.dumps(opener.spec)
    children = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            _CHILD,
            spec,
            thread_id,
            f"p{p}",
            str(per_process),
            stderr=asyncio.subprocess.PIPE,
        )
        for p in range(processes)
    ]
    # One reader in this process reads incrementally (its cache) while the children write.
    reader = StateStoreMessageStore(opener(), thread_id)
    waits = [asyncio.ensure_future(child.communicate()) for child in children]
    reads = 0
    while not all(w.done() for w in waits):
        await reader.list_messages()
        reads += 1
    for child, wait in zip(children, waits, strict=True):
        assert child.returncode == 0, wait.result()[1].decode()
    stored = await StateStoreMessageStore(opener(), thread_id).list_messages()
    _check_order([m.text for m in stored], processes, per_process)
    cached = await reader.list_messages()  # no entry twice in the cache, none missing
    assert [m.message_id for m in cached] == [m.message_id for m in stored] and reads


async def test_durable_thread_resumes_from_a_reference_in_a_new_store(opener: Opener) -> None:
    first_store = opener()
    client = ScriptedChatClient(["your code word is noted", "it was heron"])
    agent = ChatAgent(
        client, name="memo", message_store_factory=StateStoreMessageStore.factory(first_store)
    )
    first = await agent.run("the code word is heron")
    data = json.dumps(await first.thread.serialize())  # type: ignore[union-attr]
    assert "heron" not in data  # a reference, not the messages
    await first_store.close()

    second_store = opener()  # as if in another process, later
    resumed_agent = ChatAgent(
        client, name="memo", message_store_factory=StateStoreMessageStore.factory(second_store)
    )
    thread = await resumed_agent.deserialize_thread(data)
    answer = await resumed_agent.run("what was the code word?", thread=thread)
    assert answer.text == "it was heron"
    sent = [m.text for m in client.calls[1].messages]
    assert sent == [
        "the code word is heron",
        "your code word is noted",
        "what was the code word?",
    ]
    assert len(await thread.get_messages()) == 4


async def test_deleting_a_durable_thread_removes_its_log(opener: Opener) -> None:
    store = opener()
    agent = ChatAgent(
        ScriptedChatClient(["hi"]),
        name="a",
        message_store_factory=StateStoreMessageStore.factory(store),
    )
    response = await agent.run("hello")
    thread = response.thread
    assert thread is not None
    log = f"thread:{thread.id}"
    assert await store.length(log) == 2
    await thread.delete()
    assert await opener().length(log) == 0
