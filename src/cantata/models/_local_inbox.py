"""Handing the decoder thread's output to an event loop with one wake-up per batch.

`loop.call_soon_threadsafe` writes to the loop's self-pipe on every call; with several
streams that is a system call and a GIL hand-off per token per stream. An inbox collects
what arrives while the loop has not yet run its drain, so one decoding step of eight
sequences wakes the loop once.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections import deque
from typing import Any

_inboxes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Inbox] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


class Inbox:
    """Items for one event loop's queues, put from any thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._items: deque[tuple[asyncio.Queue[Any], Any]] = deque()
        self._lock = threading.Lock()
        self._scheduled = False

    def put(self, queue: asyncio.Queue[Any], item: Any) -> bool:
        """Deliver `item` to `queue` on the loop; False when the loop is closed."""
        with self._lock:
            self._items.append((queue, item))
            if self._scheduled:
                return True
            self._scheduled = True
        try:
            self._loop.call_soon_threadsafe(self._drain)
        except RuntimeError:  # the loop is closed: nobody will read this
            with self._lock:
                self._items.clear()
                self._scheduled = False
            return False
        return True

    def _drain(self) -> None:
        with self._lock:
            items = list(self._items)
            self._items.clear()
            self._scheduled = False
        for queue, item in items:
            queue.put_nowait(item)


def inbox_for(loop: asyncio.AbstractEventLoop) -> Inbox:
    """The inbox of `loop` (one per loop, dropped with it)."""
    with _lock:
        inbox = _inboxes.get(loop)
        if inbox is None:
            inbox = _inboxes[loop] = Inbox(loop)
        return inbox
