"""Every SQLite connection a durable test opens is closed by the end of that test.

An `SQLiteStore` left open keeps its aiosqlite worker thread until the garbage collector
finds the connection, often in a later test; aiosqlite then stops the thread with a future
on whatever event loop it finds, and when that loop closes first the thread raises
"Event loop is closed" into the later test (a `PytestUnhandledThreadExceptionWarning` seen
once in CI on a test that uses no SQLite). This check names the test that leaked instead.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

# A closed connection's thread ends right after `close()` returns; this is a bound for a
# busy machine, not a measured time.
THREAD_EXIT_BOUND = 5.0


def aiosqlite_workers() -> set[threading.Thread]:
    # aiosqlite names no thread of its own; Python adds the target's name to the default.
    return {t for t in threading.enumerate() if t.name.endswith("(_connection_worker_thread)")}


@pytest.fixture(autouse=True)
def _sqlite_connections_closed() -> Iterator[None]:
    before = aiosqlite_workers()
    yield
    left = aiosqlite_workers() - before
    for thread in left:
        thread.join(THREAD_EXIT_BOUND)
    alive = [t.name for t in left if t.is_alive()]
    assert not alive, (
        f"{len(alive)} aiosqlite connection(s) opened by this test were never closed: "
        "close every SQLiteStore (async with store, or await store.close())"
    )
