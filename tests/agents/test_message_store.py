"""Message stores: in memory and on a StateStore (MemoryStore here; real backends in
test_store_backends.py), plus fuzzing of bad serialized threads."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cantata.agents import (
    InMemoryMessageStore,
    LocalThread,
    MessageStore,
    StateStoreMessageStore,
)
from cantata.core import (
    FunctionCallContent,
    FunctionResultContent,
    Message,
    SerializationError,
    StoreError,
    to_json,
)
from cantata.stores import MemoryStore


def _conversation() -> list[Message]:
    return [
        Message("user", "weather in Paris?", message_id="m1", metadata={"agent_id": "a1"}),
        Message(
            "assistant",
            [FunctionCallContent("c1", "weather", {"city": "Paris"})],
            message_id="m2",
        ),
        Message("tool", [FunctionResultContent("c1", {"temp": 21})], message_id="m3"),
        Message("assistant", "21 degrees", author_name="helper", message_id="m4"),
    ]


def test_both_stores_satisfy_the_protocol() -> None:
    assert isinstance(InMemoryMessageStore(), MessageStore)
    assert isinstance(StateStoreMessageStore(MemoryStore(), "t"), MessageStore)


async def test_state_store_message_store_round_trips_all_content_kinds() -> None:
    store = MemoryStore(copy=True)
    messages = StateStoreMessageStore(store, "t1")
    await messages.add_messages(_conversation())
    fresh = StateStoreMessageStore(store, "t1")
    assert await fresh.list_messages() == _conversation()


async def test_state_store_reads_only_new_entries_and_sees_other_writers() -> None:
    store = MemoryStore()
    mine = StateStoreMessageStore(store, "t")
    other = StateStoreMessageStore(store, "t")
    await mine.add_messages([Message("user", "1")])
    assert [m.text for m in await mine.list_messages()] == ["1"]
    await other.add_messages([Message("assistant", "2")])
    first = await mine.list_messages()
    assert [m.text for m in first] == ["1", "2"]
    # decoded messages are reused, not decoded again
    again = await mine.list_messages()
    assert all(a is b for a, b in zip(first, again, strict=True))


async def test_state_store_clear_deletes_the_log() -> None:
    store = MemoryStore()
    messages = StateStoreMessageStore(store, "t")
    await messages.add_messages([Message("user", "1")])
    await messages.clear()
    assert await store.length("thread:t") == 0
    assert await messages.list_messages() == []


async def test_state_store_rejects_a_foreign_entry_in_the_log() -> None:
    store = MemoryStore()
    await store.append("thread:t", [{"not": "a message"}])
    with pytest.raises(StoreError, match="thread:t"):
        await StateStoreMessageStore(store, "t").list_messages()


async def test_state_store_restore_refuses_another_log() -> None:
    with pytest.raises(SerializationError, match="thread:other"):
        await StateStoreMessageStore(MemoryStore(), "t").restore(
            {"kind": "state_store", "log": "thread:other"}
        )


async def test_empty_thread_id_is_refused() -> None:
    with pytest.raises(StoreError, match="thread_id"):
        StateStoreMessageStore(MemoryStore(), "")


async def test_concurrent_tasks_lose_nothing_and_keep_each_writers_order() -> None:
    store = MemoryStore()
    writers, per_writer = 8, 200

    async def write(w: int) -> None:
        messages = StateStoreMessageStore(store, "shared")
        for i in range(per_writer):
            await messages.add_messages([Message("user", f"{w}:{i}")])
            await asyncio.sleep(0)

    await asyncio.gather(*(write(w) for w in range(writers)))
    got = [m.text for m in await StateStoreMessageStore(store, "shared").list_messages()]
    assert len(got) == writers * per_writer
    for w in range(writers):
        mine = [int(t.split(":")[1]) for t in got if t.startswith(f"{w}:")]
        assert mine == list(range(per_writer))


# --- fuzzing bad serialized threads ---------------------------------------------------

_json_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=8)
)
_json = st.recursive(
    _json_leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*prefix, i))
    return out


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _replace(value[head], rest, new)}
    copied = list(value)
    copied[head] = _replace(value[head], rest, new)
    return copied


def _delete(value: Any, path: tuple[Any, ...]) -> Any:
    if len(path) == 1:
        if isinstance(value, dict):
            return {k: v for k, v in value.items() if k != path[0]}
        return [v for i, v in enumerate(value) if i != path[0]]
    head = path[0]
    if isinstance(value, dict):
        return {**value, head: _delete(value[head], path[1:])}
    copied = list(value)
    copied[head] = _delete(value[head], path[1:])
    return copied


async def _original() -> tuple[LocalThread, dict[str, Any]]:
    thread = LocalThread(id="fuzzed")
    await thread.on_new_message(_conversation())
    return thread, await thread.serialize()


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
async def test_fuzzed_serialized_threads_fail_typed_and_lose_nothing(data: st.DataObject) -> None:
    thread, good = await _original()
    before = await thread.get_messages()
    paths = _paths(good)
    path = data.draw(st.sampled_from(paths), label="path")
    if path and data.draw(st.booleans(), label="delete"):
        bad = _delete(good, path)
    else:
        bad = _replace(good, path, data.draw(_json, label="new value"))
    payload: Any = json.dumps(bad) if data.draw(st.booleans(), label="as text") else bad
    try:
        restored = await LocalThread.deserialize(payload)
    except SerializationError:
        pass
    else:
        for message in await restored.get_messages():
            assert isinstance(message, Message)
    assert await thread.get_messages() == before
    assert await thread.serialize() == good


@settings(max_examples=100, deadline=None)
@given(text=st.text(max_size=40) | st.binary(max_size=40))
async def test_fuzzed_serialized_text_fails_typed(text: str | bytes) -> None:
    with contextlib.suppress(SerializationError):
        await LocalThread.deserialize(text)


class _GatedStore(MemoryStore):
    """A MemoryStore whose first read waits for a gate, to interleave two readers."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.first_read_started = asyncio.Event()
        self._reads = 0

    async def read(self, log: str, start: int = 0, stop: int | None = None) -> list[Any]:
        self._reads += 1
        if self._reads == 1:
            self.first_read_started.set()
            await self.gate.wait()
        return await super().read(log, start, stop)


async def test_concurrent_reads_of_one_store_object_do_not_duplicate() -> None:
    store = _GatedStore()
    messages = StateStoreMessageStore(store, "t")
    await messages.add_messages([Message("user", "1"), Message("user", "2")])
    slow = asyncio.create_task(messages.list_messages())
    await store.first_read_started.wait()
    fast = await messages.list_messages()  # completes while the first read is held
    store.gate.set()
    assert [m.text for m in fast] == ["1", "2"]
    assert [m.text for m in await slow] == ["1", "2"]
    assert [m.text for m in await messages.list_messages()] == ["1", "2"]


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
async def test_fuzzed_durable_references_fail_typed_and_leave_the_log_alone(
    data: st.DataObject,
) -> None:
    store = MemoryStore()
    factory = StateStoreMessageStore.factory(store)
    thread = LocalThread(id="durable", message_store_factory=factory)
    await thread.on_new_message(_conversation())
    good = await thread.serialize()
    path = data.draw(st.sampled_from(_paths(good)), label="path")
    if path and data.draw(st.booleans(), label="delete"):
        bad = _delete(good, path)
    else:
        bad = _replace(good, path, data.draw(_json, label="new value"))
    try:
        restored = await LocalThread.deserialize(bad, message_store_factory=factory)
    except SerializationError:
        pass
    else:
        assert await restored.get_messages() == _conversation()
    assert await store.read("thread:durable") == [to_json(m) for m in _conversation()]


async def test_collector_is_resumed_after_bulk_conversion_even_on_error() -> None:
    import gc

    big = [Message("user", str(i)) for i in range(1500)]
    thread = LocalThread()
    await thread.on_new_message(big)
    data = await thread.serialize()
    assert gc.isenabled()
    restored = await LocalThread.deserialize(data)
    assert len(await restored.get_messages()) == 1500
    assert gc.isenabled()
    data["store"]["messages"][1200] = {"$type": "nope"}
    with pytest.raises(SerializationError):
        await LocalThread.deserialize(data)
    assert gc.isenabled()


async def test_a_paused_collector_stays_paused() -> None:
    import gc

    thread = LocalThread()
    await thread.on_new_message([Message("user", str(i)) for i in range(1500)])
    gc.disable()
    try:
        await LocalThread.deserialize(await thread.serialize())
        assert not gc.isenabled()
    finally:
        gc.enable()
