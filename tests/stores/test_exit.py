"""A store left open never keeps the interpreter from exiting (issue 8).

Before the fix, an `SQLiteStore` never closed (or an exception before `close()`) hung the
process at exit forever: aiosqlite's worker thread is not a daemon, and the interpreter
waits for such threads before anything else at exit.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

WORKER = Path(__file__).with_name("_unclosed_worker.py")
# A bound for a hung interpreter, not a measured time: the exit itself takes well under one
# second; the rest is for starting Python on a busy machine.
EXIT_BOUND = 60.0


def run_worker(backend: Any, mode: str) -> subprocess.CompletedProcess[str]:
    args = [sys.executable, str(WORKER), backend.url, json.dumps(backend.options), mode]
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=EXIT_BOUND)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(
            f"a {backend.name} store left open kept the interpreter from exiting "
            f"(mode {mode}, killed after {EXIT_BOUND}s); stderr: {exc.stderr!r}"
        )


@pytest.mark.parametrize("mode", ["return", "unawaited"])
def test_an_unclosed_store_lets_the_process_exit(backend: Any, mode: str) -> None:
    done = run_worker(backend, mode)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr


def test_an_exception_before_close_lets_the_process_exit(backend: Any) -> None:
    done = run_worker(backend, "raise")
    assert done.returncode == 1
    assert "RuntimeError: failed before close" in done.stderr


async def test_stores_are_async_context_managers(backend: Any) -> None:
    store = backend.store()
    async with store as opened:
        assert opened is store
        await opened.put("k", 1)
        assert await opened.get("k") == 1
    assert store.closed
