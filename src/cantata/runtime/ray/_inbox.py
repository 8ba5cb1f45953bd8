"""Acknowledged delivery of a process's local subscribers' items (the directory's `take`).

A poll's reply can be lost with its stream (or its Ray call) while the directory and the
process both live on, so the directory does not drop what it hands out: each item of an
inbox has a number, one more than the item before, and stays until the process's next poll
acknowledges it (`Inbox.take(ack, ...)`: the number the process expects next). A poll with
an older acknowledgement gets the unacknowledged items again; the process (`Taken`) passes
on only the items numbered from the one it expects, so each reaches its subscriber once,
in order.

A reply is ``[first, *items]``: the number of its first item, then the items (one int more
than a bare list). An inbox made anew for a process (after `close_inbox`) numbers from
where every closed inbox had got to, so it never reuses a number the process has seen.
"""

from __future__ import annotations

import asyncio
from typing import Any

__all__: list[str] = []


class Inbox:
    """What waits for one process's local subscribers, numbered, and its poll's wake-up.

    Bounded as before: a poll drops what the process acknowledged, so what stays is what
    came since its last poll, and the one batch it is handling."""

    __slots__ = ("first", "items", "wake")

    def __init__(self, first: int = 0) -> None:
        self.items: list[Any] = []
        self.first = first  # the number of items[0] (of the next item, when none waits)
        self.wake: asyncio.Event | None = None

    @property
    def end(self) -> int:
        """The number the next item put here will have."""
        return self.first + len(self.items)

    def put(self, item: Any) -> None:
        self.items.append(item)
        if self.wake is not None:
            self.wake.set()

    def ack(self, upto: int) -> None:
        """Drop the items numbered below `upto`: the process has them. An `upto` past the
        end numbers what waits from there: the process saw none of it (its numbers came
        from an inbox before this one)."""
        done = upto - self.first
        if done > 0:
            if done <= len(self.items):
                del self.items[:done]
            self.first = upto

    def batch(self) -> list[Any]:
        """Every unacknowledged item, after the number of the first: a poll's reply."""
        return [self.first, *self.items]

    async def take(self, ack: int, wait: float) -> list[Any]:
        """Drop what `ack` acknowledges, then the unacknowledged items (`batch`), waiting up
        to `wait` seconds for one when none waits."""
        self.ack(ack)
        if not self.items:
            wake = self.wake
            if wake is None:
                wake = self.wake = asyncio.Event()
            wake.clear()
            try:
                async with asyncio.timeout(wait):
                    await wake.wait()
            except TimeoutError:
                pass
        return self.batch()


class Taken:
    """The process's side: the number of the item it expects next (its acknowledgement),
    and the items of a reply it has not had yet."""

    __slots__ = ("next",)

    def __init__(self) -> None:
        self.next = 0

    def fresh(self, reply: list[Any]) -> list[Any]:
        """The items of `reply` (``[first, *items]``) numbered from `next` on, in order;
        `next` moves past them."""
        first = int(reply[0])
        end = first + len(reply) - 1
        start = self.next - first
        if end > self.next:
            self.next = end
        return reply[start + 1 :] if start > 0 else reply[1:]
