"""Conversation threads: where a conversation lives between agent calls.

Agents are stateless definitions; the thread is the state. A thread moves through three
states, ``new -> created -> deleted``: `create()` and `delete()` are idempotent,
`on_new_message()` creates the thread first when needed, and a deleted thread refuses all
use (its `id` raises `ThreadError`). Two kinds: `LocalThread` keeps its messages in a
`MessageStore`; `ServiceThread` is the base for a thread that lives on a server and is
known here only by its id (which the server may change after each turn).

Serialized threads carry ``schema_version``:

- 1: ``{"schema_version", "kind", "id", "state", ...}``; a local thread adds ``"store"``
  (its message store's state), a service thread nothing else; either may carry
  ``"context"``, what context providers keep for the conversation (absent when empty).
"""

from __future__ import annotations

import asyncio
import json
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, Literal, TypeAlias

from ..core import (
    InvalidMessageError,
    Message,
    SchemaVersionError,
    SerializationError,
    ThreadError,
    loads_json,
    new_id,
)
from .message_store import InMemoryMessageStore, MessageStore, MessageStoreFactory

__all__ = [
    "THREAD_SCHEMA_VERSION",
    "AgentThread",
    "LocalThread",
    "ServiceThread",
    "ThreadState",
    "load_thread_data",
]

THREAD_SCHEMA_VERSION = 1
ThreadState: TypeAlias = Literal["new", "created", "deleted"]


class AgentThread(ABC):
    """The state of one conversation, handed to `Agent.run` and returned on the response."""

    kind: str = "thread"

    def __init__(self) -> None:
        self._state: ThreadState = "new"
        self._transition: asyncio.Lock | None = None  # made on first create/delete
        self._context: dict[str, Any] | None = None  # made when a provider first asks

    @property
    def context_state(self) -> dict[str, Any]:
        """What context providers keep for this conversation: a JSON object per provider
        name, serialized with the thread."""
        if self._context is None:
            self._context = {}
        return self._context

    async def load_context_state(self) -> None:  # noqa: B027 (nothing to do by default)
        """Read the providers' state from where the thread keeps it (a thread whose
        messages live in a store keeps it there); an in-memory thread has it already."""

    async def save_context_state(self) -> None:
        """Write the providers' state where `load_context_state` reads it; it must be
        JSON (`SerializationError` says which provider's is not)."""
        if self._context:
            _context_json(self._context)

    def _lock(self) -> asyncio.Lock:
        if self._transition is None:
            self._transition = asyncio.Lock()
        return self._transition

    @property
    def state(self) -> ThreadState:
        """``"new"`` (nothing stored yet), ``"created"`` or ``"deleted"``."""
        return self._state

    @property
    def is_deleted(self) -> bool:
        """True once `delete()` ran; a deleted thread refuses all use."""
        return self._state == "deleted"

    @property
    @abstractmethod
    def id(self) -> str | None:
        """The thread's id; raises `ThreadError` once the thread is deleted."""

    def _check_usable(self, action: str) -> None:
        if self._state == "deleted":
            raise ThreadError(
                f"cannot {action} thread of kind `{type(self).__name__}`: it was deleted; "
                "create a new one with `agent.create_thread()`"
            )

    async def create(self) -> str | None:
        """Make sure the thread exists (idempotent); returns its id."""
        self._check_usable("create")
        if self._state == "new":
            # Two runs (or a run and the caller) may create the thread at once; a service
            # thread must be made on the server once, not once per caller.
            async with self._lock():
                self._check_usable("create")
                if self._state == "new":
                    await self._create()
                    self._state = "created"
        return self.id

    async def delete(self) -> None:
        """Delete the thread and its messages (idempotent); a deleted thread cannot be used."""
        if self._state == "deleted":
            return
        async with self._lock():
            if not self.is_deleted:  # another caller may have deleted it meanwhile
                await self._delete()
                self._state = "deleted"

    async def on_new_message(self, messages: Message | Sequence[Message]) -> None:
        """Record new messages of the conversation, creating the thread first if needed."""
        if self._state == "deleted":  # checked here: one call less on every turn
            self._check_usable("add messages to")
        batch = [messages] if isinstance(messages, Message) else list(messages)
        for item in batch:
            if not isinstance(item, Message):  # stored, it would fail only when restored
                raise InvalidMessageError(
                    f"thread of kind `{type(self).__name__}` records messages, got "
                    f"{type(item).__name__} {item!r:.60}; wrap text in Message('user', ...)"
                )
        if self._state == "new":
            await self.create()
        if batch:
            await self._on_new_messages(batch)

    async def get_messages(self) -> list[Message]:
        """The conversation so far, oldest first."""
        if self._state == "deleted":  # checked here: one call less on every turn
            self._check_usable("read")
        return await self._get_messages()

    async def serialize(self) -> dict[str, Any]:
        """JSON data that `agent.deserialize_thread` turns back into this conversation."""
        self._check_usable("serialize")
        data: dict[str, Any] = {
            "schema_version": THREAD_SCHEMA_VERSION,
            "kind": self.kind,
            "id": self.id,
            "state": self._state,
        }
        data.update(await self._serialize())
        if self._context:
            data["context"] = json.loads(_context_json(self._context))
        return data

    @abstractmethod
    async def _create(self) -> None: ...

    @abstractmethod
    async def _delete(self) -> None: ...

    @abstractmethod
    async def _on_new_messages(self, messages: list[Message]) -> None: ...

    @abstractmethod
    async def _get_messages(self) -> list[Message]: ...

    @abstractmethod
    async def _serialize(self) -> dict[str, Any]: ...


class LocalThread(AgentThread):
    """A thread whose messages live here, in a `MessageStore` (memory, SQLite, PostgreSQL,
    Redis). Its id is known from the start."""

    kind = "local"

    def __init__(
        self,
        message_store: MessageStore | None = None,
        *,
        id: str | None = None,
        message_store_factory: MessageStoreFactory | None = None,
    ) -> None:
        super().__init__()
        self._id = id or new_id()
        if message_store is None:
            factory = message_store_factory or _memory_store
            message_store = factory(self._id)
        self.message_store: MessageStore = message_store
        self._stored_context: str | None = None  # the providers' state as last read or written

    @property
    def id(self) -> str:
        self._check_usable("read the id of")
        return self._id

    async def on_new_message(self, messages: Message | Sequence[Message]) -> None:
        """Record new messages (see `AgentThread.on_new_message`); in memory, at once."""
        if type(messages) is list and append_now(self, messages):
            return
        await super().on_new_message(messages)

    async def get_messages(self) -> list[Message]:
        """The conversation so far, oldest first (a new list)."""
        now = messages_now(self)
        if now is not None:
            return now
        return await super().get_messages()

    async def _create(self) -> None:
        pass

    async def _delete(self) -> None:
        await self.message_store.clear()

    async def _on_new_messages(self, messages: list[Message]) -> None:
        await self.message_store.add_messages(messages)

    async def _get_messages(self) -> list[Message]:
        return await self.message_store.list_messages()

    async def _serialize(self) -> dict[str, Any]:
        return {"store": await self.message_store.serialize()}

    async def load_context_state(self) -> None:
        """Read the providers' state from the message store, when it keeps one (a
        `StateStoreMessageStore` does: another process's thread on the same log sees it)."""
        load = getattr(self.message_store, "load_context", None)
        if load is None:
            return
        found = await load()
        if found is not None:
            self._context = _context_data(found)
            self._stored_context = _context_json(found)

    async def save_context_state(self) -> None:
        """Write the providers' state to the message store, when it keeps one and the state
        changed since it was read or written (a turn that changed nothing writes nothing)."""
        save = getattr(self.message_store, "save_context", None)
        if not self._context:
            return
        text = _context_json(self._context)
        if save is not None and text != self._stored_context:
            await save(json.loads(text))
            self._stored_context = text

    @classmethod
    async def deserialize(
        cls, data: Any, *, message_store_factory: MessageStoreFactory | None = None
    ) -> LocalThread:
        """Rebuild a thread that `serialize` wrote; bad data raises `SerializationError`."""
        fields = load_thread_data(data, cls.kind)
        store_state = fields.get("store")
        if type(store_state) is not dict:
            raise SerializationError("a serialized local thread needs a 'store' object")
        thread_id = fields["id"]
        if type(thread_id) is not str or not thread_id:
            raise SerializationError("a serialized local thread needs a non-empty string 'id'")
        store = (message_store_factory or _memory_store)(thread_id)
        await store.restore(store_state)
        thread = cls(store, id=thread_id)
        thread._state = fields["state"]
        thread._context = _context_data(fields.get("context"))
        return thread


class ServiceThread(AgentThread):
    """Base of a thread that lives on a server: here only an id, which may roll.

    Subclasses implement `_create_on_service` (returns the new id), `_delete_on_service`,
    and optionally `_on_new_messages` (e.g. to record a rolling id with `_set_id`) and
    `_get_messages` (to read the history from the server).
    """

    kind = "service"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__()
        self._id = id
        if id is not None:
            self._state = "created"

    @property
    def id(self) -> str | None:
        self._check_usable("read the id of")
        return self._id

    def _set_id(self, value: str) -> None:
        """Record the id the service gave after a turn (for services whose id rolls)."""
        self._check_usable("change the id of")
        self._id = value
        self._state = "created"

    @abstractmethod
    async def _create_on_service(self) -> str: ...

    @abstractmethod
    async def _delete_on_service(self, thread_id: str) -> None: ...

    async def _create(self) -> None:
        if self._id is None:
            self._id = await self._create_on_service()

    async def _delete(self) -> None:
        if self._id is not None:
            await self._delete_on_service(self._id)

    async def _on_new_messages(self, messages: list[Message]) -> None:
        pass  # the service records the conversation as it answers

    async def _get_messages(self) -> list[Message]:
        if self._id is None:
            return []
        raise ThreadError(
            f"thread of kind `{type(self).__name__}` keeps its messages on the service; "
            "read them through the service's API"
        )

    async def _serialize(self) -> dict[str, Any]:
        return {}

    @classmethod
    async def deserialize(cls, data: Any, **kwargs: Any) -> ServiceThread:
        """Rebuild from `serialize` data: the id is all there is; `kwargs` go to the
        constructor (a client, for example)."""
        fields = load_thread_data(data, cls.kind)
        thread_id = fields["id"]
        if thread_id is not None and (type(thread_id) is not str or not thread_id):
            raise SerializationError("a serialized service thread's 'id' must be a string")
        thread = cls(id=thread_id, **kwargs)
        thread._state = fields["state"] if thread_id is not None else "new"
        thread._context = _context_data(fields.get("context"))
        return thread


def _context_json(state: dict[str, Any]) -> str:
    """The providers' state as JSON text; a provider whose state is not JSON is named."""
    try:
        return json.dumps(state, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        for name, value in state.items():
            try:
                json.dumps(value, allow_nan=False)
            except (TypeError, ValueError):
                raise SerializationError(
                    f"context provider {name!r} keeps state that is not JSON ({exc}); keep "
                    "only dicts, lists, strings, numbers, booleans and None in run.state"
                ) from None
        raise SerializationError(f"the context state is not JSON: {exc}") from None


def _context_data(data: Any) -> dict[str, Any] | None:
    if data is None:
        return None
    if type(data) is not dict or not all(type(v) is dict for v in data.values()):
        raise SerializationError(
            "a thread's 'context' must be an object of one object per context provider"
        )
    return data


def _memory_store(thread_id: str) -> MessageStore:
    return InMemoryMessageStore()


def append_now(thread: AgentThread, messages: list[Message]) -> bool:
    """Append `messages` to a created `LocalThread` whose store is the in-memory one, at
    once; False (nothing done) for any other thread, store or state, whose caller then
    awaits `on_new_message`. Agents record every turn's messages: without the three
    coroutines of the general path (thread, hook, store), a turn is cheaper."""
    if type(thread) is not LocalThread or thread._state != "created":
        return False
    store = thread.message_store
    if type(store) is not InMemoryMessageStore:
        return False
    for item in messages:
        if type(item) is not Message:  # a subclass or a wrong item: the general path
            return False
    store._messages.extend(messages)
    return True


def messages_now(thread: AgentThread) -> list[Message] | None:
    """The messages of a `LocalThread` whose store is the in-memory one, at once (a new
    list); None for any other thread or store, or a deleted thread (whose caller then
    awaits `get_messages`, which raises)."""
    if type(thread) is not LocalThread or thread._state == "deleted":
        return None
    store = thread.message_store
    if type(store) is not InMemoryMessageStore:
        return None
    return store._messages.copy()


def load_thread_data(data: Any, kind: str) -> dict[str, Any]:
    """Parse and check the envelope of a serialized thread; raises `SerializationError`."""
    if isinstance(data, str | bytes | bytearray):
        try:
            data = loads_json(data)  # bounded depth; bad UTF-8 and surrogates are refused
        except SerializationError as exc:
            raise SerializationError(f"serialized thread is not valid JSON: {exc}") from exc
    if type(data) is not dict:
        raise SerializationError(
            f"a serialized thread must be a JSON object, got {type(data).__name__}"
        )
    if "schema_version" not in data:
        raise SerializationError(
            f"this is not a serialized thread: it has no 'schema_version' field (it has "
            f"{_keys(data)}); pass what `thread.serialize()` returned"
        )
    version = data.get("schema_version")
    if type(version) is not int or version != THREAD_SCHEMA_VERSION:  # True == 1.0 == 1
        raise SchemaVersionError(
            f"thread schema_version {version!r} is not supported (this cantata reads version "
            f"{THREAD_SCHEMA_VERSION}); upgrade cantata or re-create the thread"
        )
    found = data.get("kind")
    if found != kind:
        raise SerializationError(
            f"serialized thread is of kind {found!r}, but a thread of kind {kind!r} was expected; "
            "restore it with an agent that uses that kind of thread"
        )
    if "id" not in data:
        raise SerializationError("serialized thread has no 'id' field")
    state = data.get("state")
    if state not in ("new", "created"):
        raise SerializationError(
            f"serialized thread has state {state!r}; expected 'new' or 'created'"
        )
    return data


def _keys(data: dict[Any, Any]) -> str:
    """The first few keys of `data`, for an error message (never the values)."""
    if not data:
        return "no fields"
    shown = ", ".join(repr(str(k))[:40] for k in list(data)[:5])
    return f"fields {shown}{', ...' if len(data) > 5 else ''}"
