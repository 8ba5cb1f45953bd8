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
    """What a list and the slices taken of it share: the originals and their copies."""

    __slots__ = ("copies", "originals", "pinned")

    def __init__(self, pinned: list[Message]) -> None:
        self.pinned = pinned  # keeps the originals alive, so their ids stay theirs
        self.originals: frozenset[int] | None = None
        self.copies: dict[int, Message] = {}

    def own(self, message: Message) -> Message:
        """The copy of an original (made on first need); anything else as it is."""
        key = id(message)
        copy = self.copies.get(key)
        if copy is not None:
            return copy
        originals = self.originals
        if originals is None:
            originals = self.originals = frozenset(map(id, self.pinned))
        if key not in originals:
            return message  # put in by the middleware, or a copy already
        copy = self.copies[key] = message.copy()
        return copy


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
