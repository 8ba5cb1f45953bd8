"""The model's view of a conversation, converted once per message, not once per turn.

An agent calls the loop with its whole thread every turn. Converting the whole thread
each time (dropping approval contents, closing calls left without results) made a turn
cost grow with the thread. `ViewMemo` remembers, for recent conversations, the messages
seen and their view; a run on a conversation that starts with messages seen before
(after leading system messages, which agents put in front afresh each turn) converts only
the messages after them. The answer is always the one a full conversion gives: whenever
new messages could change the view of older ones, everything is converted again.
"""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from ..core import (
    DataContent,
    FunctionApprovalRequestContent,
    FunctionApprovalResponseContent,
    FunctionCallContent,
    Message,
    TextContent,
)
from ._approvals import close_open_calls, holds, model_view

_MAX_LEAD = 8
_PLAIN = (TextContent, DataContent)
_NOT_PLAIN = (
    FunctionApprovalRequestContent,
    FunctionApprovalResponseContent,
    FunctionCallContent,
)
"""What makes a message's view differ from it (approvals) or may need a result (a call)."""


@dataclass(slots=True)
class _Seen:  # never changed once made (not frozen: a frozen class costs more to make)
    messages: list[Message]
    """Held, so the id of the first one cannot be reused while the entry lives."""
    view: list[Message]
    closed: frozenset[str]
    """Ids of the calls `view` gives a "not run" result."""
    held: frozenset[str]
    """Ids of calls `view` leaves without a result because they were pending."""


class ViewMemo:
    """Recent conversations and their views, for one `FunctionInvokingChatClient`.

    Holds the messages of its last `size` conversations (keyed by the first message after
    the leading system messages, compared by identity, then by value). It relies on a
    message's role and contents not being changed in place once a run was given it (a
    changed message is a new message); threads only ever append.
    """

    def __init__(self, size: int = 64) -> None:
        self._size = size
        # no lock (a client stays picklable and copyable): each dict operation is atomic,
        # an entry is immutable and right about its messages, so a race costs a miss
        self._entries: dict[int, _Seen] = {}

    def view(self, messages: list[Message], pending: AbstractSet[str]) -> list[Message]:
        """The messages as the model may see them (see `close_open_calls`); `pending` are
        the ids of calls answered in this run. A new list the caller may change."""
        lead = _lead(messages)
        rest = messages[lead:]  # a new list: what the memo keeps is never the caller's
        if not rest:
            return list(messages)
        seen = self._entries.get(id(rest[0]))
        extended = _extend(seen, rest, pending) if seen is not None else None
        if extended is None:
            extended = _Seen(rest, *close_open_calls(model_view(rest), pending))
        self._remember(extended)
        return [*messages[:lead], *extended.view]

    def _remember(self, seen: _Seen) -> None:
        key = id(seen.messages[0])
        entries = self._entries
        entries.pop(key, None)  # re-inserted: the oldest entries come first
        entries[key] = seen
        while len(entries) > self._size:
            try:
                del entries[next(iter(entries))]
            except (KeyError, RuntimeError, StopIteration):  # another thread evicted it
                break


def _extend(seen: _Seen, rest: list[Message], pending: AbstractSet[str]) -> _Seen | None:
    """What `rest` is and looks like, from what its first messages looked like; None when
    `rest` does not start with them or its new messages could change their view."""
    count = len(seen.messages)
    if len(rest) < count or rest[:count] != seen.messages:  # identity first: C speed
        return None
    if seen.held:
        return None  # calls left open as pending: their results may be anywhere now
    if not pending.isdisjoint(seen.closed):
        return None  # a call closed as "not run" was answered after all
    tail = rest[count:]
    if not tail:
        return _Seen(rest, seen.view, seen.closed, seen.held)
    if not seen.closed and not holds(tail, _NOT_PLAIN):
        # the usual turn: new text only; its view is itself (what model_view and
        # close_open_calls find, in one scan)
        return _Seen(rest, [*seen.view, *tail], seen.closed, seen.held)
    # the view of the tail, not the tail: an approval request the model never sees may
    # stand between the closed calls and a tool message that then follows them directly
    tail_view = model_view(tail)
    if seen.closed:
        if tail_view and tail_view[0].role == "tool":
            return None  # its "not run" result would go after this tool message
        if any(r.call_id in seen.closed for m in tail_view for r in m.function_results):
            return None
    view, closed, held = close_open_calls(tail_view, pending)
    return _Seen(rest, [*seen.view, *view], seen.closed | closed, held)


def _lead(messages: Sequence[Message]) -> int:
    """How many leading system messages hold only text or data (their view is themselves)."""
    count = 0
    for message in messages[:_MAX_LEAD]:
        if message.role != "system" or any(type(c) not in _PLAIN for c in message.contents):
            break
        count += 1
    return count
