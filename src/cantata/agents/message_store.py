"""Where a local thread keeps its messages: in memory, or in a durable `StateStore`.

A `MessageStore` is the one seam between a `LocalThread` and storage, so a thread can live
in a dict, a SQLite file, PostgreSQL or Redis without the agent knowing. Messages travel as
JSON through the core type registry; nothing is pickled.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, runtime_checkable

from ..core import Message, SerializationError, StoreError, from_json, to_json
from ..stores import StateStore

__all__ = [
    "InMemoryMessageStore",
    "MessageStore",
    "MessageStoreFactory",
    "StateStoreMessageStore",
]


@runtime_checkable
class MessageStore(Protocol):
    """The messages of one thread: append, read back, clear, and save as JSON.

    `serialize` returns JSON data that `restore` (on a store made by the same factory for
    the same thread id) turns back into the same conversation; it may be the messages
    themselves or only a reference to where they live.
    """

    async def add_messages(self, messages: Sequence[Message]) -> None:
        """Append messages, in order, atomically."""
        ...

    async def list_messages(self) -> list[Message]:
        """Every message, oldest first (a new list the caller may change)."""
        ...

    async def clear(self) -> None:
        """Remove every message."""
        ...

    async def serialize(self) -> dict[str, Any]:
        """JSON data from which `restore` rebuilds this store's conversation."""
        ...

    async def restore(self, state: dict[str, Any]) -> None:
        """Load what `serialize` wrote; raises `SerializationError` and changes nothing on
        bad data."""
        ...


MessageStoreFactory = Callable[[str], MessageStore]
"""Makes the store of a new or restored thread, given the thread's id."""


_CONTEXT_SUFFIX = ":context"
"""The key of a thread's context-provider state: its log's name and this."""

_BULK = 1000
"""From this many messages on, encoding and decoding run with the cyclic collector paused."""


@contextlib.contextmanager
def _collector_paused(size: int) -> Iterator[None]:
    """Pause the cyclic garbage collector while a large batch is converted.

    Converting a thread allocates tens of thousands of objects that form no cycles; the
    collector would scan the whole heap several times meanwhile for nothing (about a third
    of the time of restoring a 10,000-message thread). The block never awaits, so no other
    task runs while the collector is paused; it is resumed at once afterwards.
    """
    if size < _BULK or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _decode_messages(data: Any) -> list[Message]:
    if type(data) is not list:
        raise SerializationError(
            f"the serialized messages must be a list, got {type(data).__name__}"
        )
    out: list[Message] = []
    with _collector_paused(len(data)):
        for index, item in enumerate(data):
            message = from_json(item)
            if type(message) is not Message:
                raise SerializationError(
                    f"serialized message #{index} is a {type(message).__name__}, not a message"
                )
            out.append(message)
    return out


def _encode_messages(messages: Sequence[Message]) -> list[Any]:
    with _collector_paused(len(messages)):
        return [to_json(m) for m in messages]


def _check_kind(state: Any, expected: str) -> dict[str, Any]:
    if type(state) is not dict:
        raise SerializationError(f"message store state must be an object, got {type(state)}")
    kind = state.get("kind")
    if kind != expected:
        raise SerializationError(
            f"this thread was saved from a message store of kind {kind!r}, but the agent's "
            f"message_store_factory makes stores of kind {expected!r}; restore it with an "
            "agent whose factory makes the same kind of store"
        )
    return state


class InMemoryMessageStore:
    """Messages in a Python list: the default, and what `serialize` writes out in full."""

    kind = "memory"
    __slots__ = ("_messages",)

    def __init__(self, messages: Sequence[Message] = ()) -> None:
        self._messages: list[Message] = list(messages)

    async def add_messages(self, messages: Sequence[Message]) -> None:
        """Append to the list (the objects themselves, not copies)."""
        self._messages.extend(messages)

    async def list_messages(self) -> list[Message]:
        """A new list of the stored messages."""
        return self._messages.copy()

    async def clear(self) -> None:
        """Forget every message."""
        self._messages.clear()

    async def serialize(self) -> dict[str, Any]:
        """The messages themselves, as registry JSON."""
        return {"kind": self.kind, "messages": _encode_messages(self._messages)}

    async def restore(self, state: dict[str, Any]) -> None:
        """Replace the messages with the serialized ones (all decoded before any is kept)."""
        checked = _check_kind(state, self.kind)
        if "messages" not in checked:
            raise SerializationError("message store state has no 'messages' field")
        self._messages = _decode_messages(checked["messages"])

    def __len__(self) -> int:
        return len(self._messages)


class StateStoreMessageStore:
    """Messages as an append-only log in a `cantata.stores.StateStore` (SQLite, PostgreSQL,
    Redis, memory).

    Each message is one log entry (its registry JSON), so concurrent writers from many
    tasks or processes never lose a message and each writer's messages stay in order.
    Reads are incremental: messages already decoded are kept, and only entries appended
    since the last read are fetched, so a long conversation costs the same per turn as a
    short one. Serializing gives a reference to the log, not the messages.
    """

    kind = "state_store"
    __slots__ = ("_cache", "_log", "_store", "thread_id")

    def __init__(self, store: StateStore, thread_id: str, *, prefix: str = "thread:") -> None:
        if not thread_id:
            raise StoreError("StateStoreMessageStore needs a non-empty thread_id")
        self._store = store
        self.thread_id = thread_id
        self._log = f"{prefix}{thread_id}"
        self._cache: list[Message] = []

    @property
    def log(self) -> str:
        """The name of the log in the state store."""
        return self._log

    @classmethod
    def factory(cls, store: StateStore, *, prefix: str = "thread:") -> MessageStoreFactory:
        """A `message_store_factory` for agents whose threads live in `store`."""

        def make(thread_id: str) -> MessageStore:
            return cls(store, thread_id, prefix=prefix)

        return make

    async def add_messages(self, messages: Sequence[Message]) -> None:
        """One atomic append of all the messages, contiguous in the log."""
        if messages:
            await self._store.append(self._log, _encode_messages(messages))

    async def list_messages(self) -> list[Message]:
        """Every message, fetching and decoding only entries appended since the last read.

        The log is append-only, so the decoded prefix stays valid; if another process
        clears the log, re-open the thread to read it afresh.
        """
        cache = self._cache
        start = len(cache)
        fresh = await self._store.read(self._log, start)
        fresh = fresh[len(cache) - start :]  # a concurrent read may have added some already
        if fresh:
            try:
                cache.extend(_decode_messages(fresh))
            except SerializationError as exc:
                raise StoreError(
                    f"log {self._log!r} holds an entry that is not a message: {exc}"
                ) from exc
        return cache.copy()

    async def clear(self) -> None:
        """Delete the log (and what context providers kept beside it)."""
        await self._store.delete_log(self._log)
        await self._store.delete(self._log + _CONTEXT_SUFFIX)
        self._cache = []

    async def load_context(self) -> dict[str, Any] | None:
        """What context providers keep for this thread, stored beside its log."""
        found = await self._store.get(self._log + _CONTEXT_SUFFIX)
        return found if isinstance(found, dict) else None

    async def save_context(self, state: dict[str, Any]) -> None:
        """Store what context providers keep for this thread beside its log."""
        await self._store.put(self._log + _CONTEXT_SUFFIX, state)

    async def serialize(self) -> dict[str, Any]:
        """A reference to the log; the messages stay in the store."""
        return {"kind": self.kind, "log": self._log}

    async def restore(self, state: dict[str, Any]) -> None:
        """Check that the reference points at this store's log (nothing is copied)."""
        checked = _check_kind(state, self.kind)
        log = checked.get("log")
        if log != self._log:
            raise SerializationError(
                f"this thread's messages are in log {log!r}, but the store made for thread "
                f"{self.thread_id!r} reads log {self._log!r}; use the same log prefix"
            )
        self._cache = []
