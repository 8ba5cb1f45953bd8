"""The messages a chat middleware gets: copies, made only of the messages it reads.

A middleware may change its request's messages in place (``context.messages[-1].metadata``)
without changing the conversation, so it must get copies. Copying every message of a long
thread for every model call made each turn cost more than the one before, even when the
middleware only passed the call on. `RequestMessages` is a list that holds the
conversation's own messages and hands out a copy of each the first time it is read (by
index, slice, iteration, pop...), the same copy every later time (also through a slice of
it). A middleware that reads nothing costs nothing; one that reads k messages pays k copies.
The model client then gets `request_list(...)`: the messages themselves, or the copies where
any were made.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, SupportsIndex, overload

from ..core import Message

__all__ = ["RequestMessages", "request_list"]


class _Shared:
    """What a list and the slices taken of it share: which objects are the conversation's
    (everything not put in later, nor a copy made here) and the copies made of them."""

    __slots__ = ("copies", "copy_ids", "foreign", "pinned")

    def __init__(self, pinned: list[Message]) -> None:
        self.pinned = pinned  # keeps the originals alive, so their ids stay theirs
        self.copies: dict[int, Message] = {}  # by the id of the original
        self.copy_ids: set[int] = set()
        self.foreign: dict[int, Message] = {}  # put in by the middleware (held: ids stay)

    def own(self, message: Message) -> Message:
        """The copy of an original (made on first need); anything else as it is."""
        key = id(message)
        copy = self.copies.get(key)
        if copy is not None:
            return copy
        if key in self.copy_ids or key in self.foreign:
            return message
        copy = self.copies[key] = message.copy()
        self.copy_ids.add(id(copy))
        return copy

    def adopt(self, items: Iterable[Message]) -> list[Message]:
        """Mark what a middleware puts in as its own: it is never copied."""
        out = list(items)
        for item in out:
            self.foreign[id(item)] = item
        return out


class RequestMessages(list[Message]):
    """A list of one request's messages that copies each message on first read."""

    __slots__ = ("_shared",)

    def __init__(self, messages: Iterable[Message] = (), *, _shared: _Shared | None = None):
        super().__init__(messages)
        self._shared = _shared if _shared is not None else _Shared(list.copy(self))

    @overload
    def __getitem__(self, index: SupportsIndex) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...

    def __getitem__(self, index: SupportsIndex | slice) -> Message | list[Message]:
        if isinstance(index, slice):
            return RequestMessages(list.__getitem__(self, index), _shared=self._shared)
        return self._shared.own(list.__getitem__(self, index))

    def __iter__(self) -> Iterator[Message]:
        own = self._shared.own
        for message in list.__iter__(self):
            yield own(message)

    def __reversed__(self) -> Iterator[Message]:
        own = self._shared.own
        for message in list.__reversed__(self):
            yield own(message)

    def append(self, message: Message) -> None:
        list.append(self, *self._shared.adopt([message]))

    def insert(self, index: SupportsIndex, message: Message) -> None:
        list.insert(self, index, *self._shared.adopt([message]))

    def extend(self, messages: Iterable[Message]) -> None:
        list.extend(self, self._shared.adopt(messages))

    def __iadd__(self, messages: Iterable[Message]) -> RequestMessages:  # type: ignore[override]
        self.extend(messages)
        return self

    @overload
    def __setitem__(self, index: SupportsIndex, value: Message) -> None: ...

    @overload
    def __setitem__(self, index: slice, value: Iterable[Message]) -> None: ...

    def __setitem__(self, index: SupportsIndex | slice, value: Any) -> None:
        if isinstance(index, slice):
            list.__setitem__(self, index, self._shared.adopt(value))
        else:
            list.__setitem__(self, index, *self._shared.adopt([value]))

    def pop(self, index: SupportsIndex = -1) -> Message:
        return self._shared.own(list.pop(self, index))

    def copy(self) -> list[Message]:
        return RequestMessages(list.copy(self), _shared=self._shared)

    def __add__(self, other: Iterable[Message]) -> list[Message]:  # type: ignore[override]
        return [*self, *other]

    def __radd__(self, other: Iterable[Message]) -> list[Message]:
        return [*other, *self]

    def __mul__(self, times: SupportsIndex) -> list[Message]:
        return list(self) * times

    __rmul__ = __mul__

    def sort(self, *args: Any, **kwargs: Any) -> None:
        """Sorts the copies (a key function may read, and change, what it is given)."""
        own = self._shared.own
        list.__setitem__(self, slice(None), [own(m) for m in list.__iter__(self)])
        list.sort(self, *args, **kwargs)

    def __reduce_ex__(self, protocol: SupportsIndex) -> Any:
        return (list, (list(self),))


def request_list(messages: list[Message]) -> list[Message]:
    """What the model client gets: for `RequestMessages`, the messages as the middleware
    left them (the conversation's own where it read none, its copies where it did); any
    other list as it is."""
    if type(messages) is not RequestMessages:
        return messages
    shared = messages._shared
    items = list.copy(messages)
    if not shared.copies:
        return items
    copies = shared.copies
    return [copies.get(id(m), m) for m in items]
