"""The thread lifecycle as a state machine (new -> created -> deleted), one test per
transition, and serialization of local and service threads."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from cantata.agents import (
    THREAD_SCHEMA_VERSION,
    ChatAgent,
    InMemoryMessageStore,
    LocalThread,
    ServiceThread,
    StateStoreMessageStore,
)
from cantata.core import (
    InvalidMessageError,
    Message,
    SchemaVersionError,
    SerializationError,
    ThreadError,
)
from cantata.models import ScriptedChatClient
from cantata.stores import MemoryStore


class RecordingServiceThread(ServiceThread):
    """A service thread against a fake in-process 'server' (a dict of conversations)."""

    def __init__(self, server: dict[str, list[Message]], *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.server = server
        self.creates = 0

    async def _create_on_service(self) -> str:
        self.creates += 1
        thread_id = f"srv-{len(self.server)}"
        self.server[thread_id] = []
        return thread_id

    async def _delete_on_service(self, thread_id: str) -> None:
        self.server.pop(thread_id, None)

    async def _on_new_messages(self, messages: list[Message]) -> None:
        assert self._id is not None
        self.server[self._id].extend(messages)
        # the service rolls the id after each turn, as response-chaining APIs do
        rolled = f"{self._id}+"
        self.server[rolled] = self.server.pop(self._id)
        self._set_id(rolled)


# --- local thread: transitions ----------------------------------------------------------


async def test_new_thread_has_id_and_no_messages() -> None:
    thread = LocalThread()
    assert thread.state == "new"
    assert isinstance(thread.id, str) and thread.id
    assert await thread.get_messages() == []


async def test_create_moves_new_to_created_and_is_idempotent() -> None:
    thread = LocalThread()
    first = await thread.create()
    second = await thread.create()
    assert thread.state == "created"
    assert first == second == thread.id


async def test_on_new_message_creates_the_thread_first() -> None:
    thread = LocalThread()
    await thread.on_new_message(Message("user", "hi"))
    assert thread.state == "created"
    assert [m.text for m in await thread.get_messages()] == ["hi"]


async def test_on_new_message_with_empty_list_still_creates() -> None:
    thread = LocalThread()
    await thread.on_new_message([])
    assert thread.state == "created"


async def test_delete_moves_created_to_deleted_and_clears_messages() -> None:
    store = InMemoryMessageStore()
    thread = LocalThread(store)
    await thread.on_new_message([Message("user", "a"), Message("assistant", "b")])
    await thread.delete()
    assert thread.state == "deleted"
    assert len(store) == 0


async def test_delete_is_idempotent() -> None:
    thread = LocalThread()
    await thread.create()
    await thread.delete()
    await thread.delete()
    assert thread.is_deleted


async def test_delete_from_new_goes_straight_to_deleted() -> None:
    thread = LocalThread()
    await thread.delete()
    assert thread.state == "deleted"


@pytest.mark.parametrize(
    "action",
    ["id", "create", "on_new_message", "get_messages", "serialize"],
)
async def test_deleted_thread_refuses_every_use(action: str) -> None:
    thread = LocalThread()
    await thread.create()
    await thread.delete()
    with pytest.raises(ThreadError, match="deleted"):
        if action == "id":
            _ = thread.id
        elif action == "create":
            await thread.create()
        elif action == "on_new_message":
            await thread.on_new_message(Message("user", "x"))
        elif action == "get_messages":
            await thread.get_messages()
        else:
            await thread.serialize()


async def test_messages_keep_their_order_across_batches() -> None:
    thread = LocalThread()
    await thread.on_new_message([Message("user", "1"), Message("assistant", "2")])
    await thread.on_new_message(Message("user", "3"))
    assert [m.text for m in await thread.get_messages()] == ["1", "2", "3"]


async def test_get_messages_returns_a_copy() -> None:
    thread = LocalThread()
    await thread.on_new_message(Message("user", "1"))
    got = await thread.get_messages()
    got.append(Message("user", "intruder"))
    assert len(await thread.get_messages()) == 1


async def test_reopening_a_durable_thread_by_id_sees_its_messages() -> None:
    store = MemoryStore()
    first = LocalThread(message_store_factory=StateStoreMessageStore.factory(store))
    await first.on_new_message(Message("user", "persisted"))
    reopened = LocalThread(StateStoreMessageStore(store, first.id), id=first.id)
    assert [m.text for m in await reopened.get_messages()] == ["persisted"]


# --- local thread: serialization --------------------------------------------------------


async def test_serialized_local_thread_is_json_with_schema_version() -> None:
    thread = LocalThread()
    await thread.on_new_message([Message("user", "hello"), Message("assistant", "hi")])
    data = await thread.serialize()
    text = json.dumps(data)
    assert json.loads(text)["schema_version"] == THREAD_SCHEMA_VERSION
    assert data["kind"] == "local" and data["id"] == thread.id


async def test_local_thread_round_trip_keeps_messages_id_and_state() -> None:
    thread = LocalThread()
    msgs = [Message("user", "hello", metadata={"k": [1, 2]}), Message("assistant", "hi")]
    await thread.on_new_message(msgs)
    restored = await LocalThread.deserialize(json.dumps(await thread.serialize()))
    assert restored.id == thread.id
    assert restored.state == "created"
    assert await restored.get_messages() == msgs


async def test_new_thread_round_trips_as_new() -> None:
    restored = await LocalThread.deserialize(await LocalThread().serialize())
    assert restored.state == "new"


async def test_durable_thread_serializes_as_a_reference_not_the_messages() -> None:
    store = MemoryStore()
    thread = LocalThread(message_store_factory=StateStoreMessageStore.factory(store))
    await thread.on_new_message(Message("user", "secret-content"))
    data = await thread.serialize()
    assert "secret-content" not in json.dumps(data)
    assert data["store"] == {"kind": "state_store", "log": f"thread:{thread.id}"}
    restored = await LocalThread.deserialize(
        data, message_store_factory=StateStoreMessageStore.factory(store)
    )
    assert [m.text for m in await restored.get_messages()] == ["secret-content"]


async def test_restoring_into_the_wrong_store_kind_names_both_kinds() -> None:
    thread = LocalThread()
    await thread.on_new_message(Message("user", "x"))
    data = await thread.serialize()
    with pytest.raises(SerializationError, match=r"'memory'.*'state_store'"):
        await LocalThread.deserialize(
            data, message_store_factory=StateStoreMessageStore.factory(MemoryStore())
        )


@pytest.mark.parametrize("version", [THREAD_SCHEMA_VERSION + 1, 0, None, True, 1.0, "1"])
async def test_unknown_schema_version_is_refused(version: Any) -> None:
    data = await LocalThread().serialize()
    data["schema_version"] = version
    with pytest.raises(SchemaVersionError, match="schema_version"):
        await LocalThread.deserialize(data)


async def test_thread_of_another_kind_is_refused() -> None:
    data = await RecordingServiceThread({}, id="abc").serialize()
    with pytest.raises(SerializationError, match=r"'service'.*'local'"):
        await LocalThread.deserialize(data)


@pytest.mark.parametrize(
    "bad", ["not json", "[]", b"\xff", "{}", '{"schema_version": 1}', "[" * 100_000]
)
async def test_malformed_serialized_thread_raises_serialization_error(bad: Any) -> None:
    with pytest.raises(SerializationError):
        await LocalThread.deserialize(bad)


# --- service thread ----------------------------------------------------------------


async def test_service_thread_has_no_id_until_created() -> None:
    server: dict[str, list[Message]] = {}
    thread = RecordingServiceThread(server)
    assert thread.id is None
    await thread.create()
    await thread.create()
    assert thread.id == "srv-0" and thread.creates == 1


async def test_concurrent_creates_and_deletes_reach_the_service_once() -> None:
    class Slow(RecordingServiceThread):
        """The server answers only once every caller is inside create() (or delete())."""

        deletes = 0
        callers = 0
        everyone_in = asyncio.Event()

        def _arrive(self, expected: int) -> None:
            self.callers += 1
            if self.callers == expected:
                self.everyone_in.set()

        async def create(self) -> str | None:
            self._arrive(3)
            return await super().create()

        async def delete(self) -> None:
            self._arrive(2)
            await super().delete()

        async def _create_on_service(self) -> str:
            await self.everyone_in.wait()
            return await super()._create_on_service()

        async def _delete_on_service(self, thread_id: str) -> None:
            self.deletes += 1
            await self.everyone_in.wait()
            await super()._delete_on_service(thread_id)

    server: dict[str, list[Message]] = {}
    thread = Slow(server)
    ids = await asyncio.gather(thread.create(), thread.create(), thread.create())
    assert thread.creates == 1 and ids[0] == ids[1] == ids[2] == thread.id and len(server) == 1
    thread.callers = 0
    thread.everyone_in = asyncio.Event()
    await asyncio.gather(thread.delete(), thread.delete())
    assert thread.deletes == 1 and server == {} and thread.is_deleted


async def test_service_thread_id_rolls_after_each_message() -> None:
    server: dict[str, list[Message]] = {}
    thread = RecordingServiceThread(server)
    await thread.on_new_message(Message("user", "one"))
    await thread.on_new_message(Message("user", "two"))
    assert thread.id == "srv-0++"
    assert [m.text for m in server["srv-0++"]] == ["one", "two"]


async def test_service_thread_delete_removes_it_on_the_server() -> None:
    server: dict[str, list[Message]] = {}
    thread = RecordingServiceThread(server)
    await thread.create()
    await thread.delete()
    await thread.delete()
    assert server == {}
    with pytest.raises(ThreadError, match="RecordingServiceThread"):
        _ = thread.id


async def test_service_thread_messages_live_on_the_service() -> None:
    thread = RecordingServiceThread({}, id="abc")
    with pytest.raises(ThreadError, match="on the service"):
        await thread.get_messages()


async def test_service_thread_serializes_its_id_only() -> None:
    thread = RecordingServiceThread({}, id="conv-7")
    data = await thread.serialize()
    assert data == {
        "schema_version": THREAD_SCHEMA_VERSION,
        "kind": "service",
        "id": "conv-7",
        "state": "created",
    }
    restored = await RecordingServiceThread.deserialize(data, server={})
    assert restored.id == "conv-7" and restored.state == "created"


async def test_only_messages_are_recorded() -> None:
    thread = LocalThread()
    with pytest.raises(InvalidMessageError, match="str"):
        await thread.on_new_message([Message("user", "a"), "b"])  # type: ignore[list-item]
    assert await thread.get_messages() == []


@pytest.mark.parametrize("data", [{"foo": 1}, {}, '{"kind": "local", "id": "x"}'])
async def test_data_that_is_no_serialized_thread_is_named_so(data: Any) -> None:
    with pytest.raises(SerializationError, match="not a serialized thread") as caught:
        await ChatAgent(ScriptedChatClient([])).deserialize_thread(data)
    assert not isinstance(caught.value, SchemaVersionError)
    assert "thread.serialize()" in str(caught.value)
