"""A writer process killed with SIGKILL loses nothing it was told was committed, and never
leaves half an append behind (principle 8 of docs/architecture.md)."""

from __future__ import annotations

import asyncio
import multiprocessing
import runpy
import time
from pathlib import Path
from typing import Any

import pytest

WORKER = Path(__file__).with_name("_crash_worker.py")


def _run_and_kill(backend: Any, progress: Path) -> int:
    ctx = multiprocessing.get_context("spawn")
    config = {
        "url": backend.url,
        "options": backend.options,
        "log": "crash",
        "progress": str(progress),
    }
    process = ctx.Process(
        target=runpy.run_path,
        args=(str(WORKER),),
        kwargs={"run_name": "cantata_crash_worker", "init_globals": {"CONFIG": config}},
    )
    process.start()
    try:
        # Wait (up to a minute, a limit for a hung worker, not a measured time) until the
        # worker has committed a good number of appends, then kill it mid-stream.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and process.is_alive():
            if progress.exists() and int(progress.read_text() or 0) >= 500:
                break
            time.sleep(0.01)
        if not process.is_alive():
            pytest.fail(f"the writer exited on its own with code {process.exitcode}")
        process.kill()
    finally:
        process.join()
    return int(progress.read_text())


async def test_a_killed_writer_loses_no_committed_append(durable: Any, tmp_path: Path) -> None:
    acknowledged = await asyncio.to_thread(_run_and_kill, durable, tmp_path / "progress")
    async with durable.store() as store:
        entries = await store.read("crash")
        assert len(entries) >= acknowledged >= 500
        assert len(entries) % 10 == 0  # never half an append
        assert entries == list(range(len(entries)))
        assert await store.append("crash", ["after"]) == len(entries) + 1
