"""A cancelled open or close of an `SQLiteStore` leaves no aiosqlite worker thread behind.

Before the fix, a cancelled open returned while aiosqlite's worker was still connecting:
the thread then reported to the event loop after it had closed ("Event loop is closed" in
the thread, a `PytestUnhandledThreadExceptionWarning` in whatever test ran then). A close
cancelled while it waited for the store's lock marked the store closed and never closed
its connection; a second close did nothing.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

from cantata.stores import SQLiteStore

# A bound for a busy machine, not a measured time: the open takes milliseconds.
OPEN_BOUND = 30.0


def workers() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.endswith("(_connection_worker_thread)")}


async def cancel_after(coro: Awaitable[Any], steps: int) -> bool:
    """Run `coro` as a task, cancel it after `steps` loop turns; True if it was cancelled."""
    task = asyncio.ensure_future(coro)
    for _ in range(steps):
        await asyncio.sleep(0)
    task.cancel()
    try:
        await asyncio.wait_for(asyncio.shield(task), OPEN_BOUND)
    except asyncio.CancelledError:
        return True
    return False


async def test_a_cancelled_open_waits_for_the_worker_thread(tmp_path: Path) -> None:
    cancelled = 0
    for i in range(40):
        before = workers()
        store = SQLiteStore(tmp_path / f"{i}.db")
        if await cancel_after(store.open(), i % 4 + 1):
            cancelled += 1
            # checked at once: the cancelled open has waited for its thread
            assert not (workers() - before), f"round {i}: a worker outlived the cancelled open"
        await store.close()
        assert not [t for t in workers() - before if t.is_alive()]
    assert cancelled > 0  # the test met the path it is for


async def test_a_cancelled_close_still_closes_the_connection(tmp_path: Path) -> None:
    cancelled = 0
    for i in range(40):
        before = workers()
        store = SQLiteStore(tmp_path / f"{i}.db")
        await store.put("k", i)
        # a write in flight: the close waits for the store's lock, and is cancelled there
        # or later, depending on the round
        writing = asyncio.ensure_future(store.put("k", i + 1))
        await asyncio.sleep(0)
        if await cancel_after(store.close(), i % 4 + 1):
            cancelled += 1
        await asyncio.wait_for(writing, OPEN_BOUND)
        assert store.closed
        assert not (workers() - before), f"round {i}: the connection outlived close()"
    assert cancelled > 0
