"""`cantata serve --workers 2` workers end with their parent, however it ends: after kill -9
of the parent (which cannot pass a stop on), no worker answers within two seconds and every
worker process is gone soon after (it drains as on SIGTERM)."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import httpx
import pytest

from ._servers import cli_server

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def _children(pid: int) -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rpartition(")")[2].split()[1]) == pid:
                found.add(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def _answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/v1/models", timeout=0.5).status_code == 200
    except httpx.TransportError:
        return False


def test_kill_9_of_the_parent_ends_its_workers(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'workers.db'}"
    workers: set[int] = set()
    try:
        with cli_server("tests/serve/_servers.py:echo", "--store", store, "--workers", "2") as (
            url,
            proc,
        ):
            deadline = time.monotonic() + 10
            while len(workers) < 2 and time.monotonic() < deadline:
                workers = _children(proc.pid)
                time.sleep(0.05)
            assert len(workers) >= 2, workers
            assert _answers(url)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(5)
            stopped = time.monotonic() + 2.0
            while _answers(url):
                assert time.monotonic() < stopped, "a worker still answers 2 s after kill -9"
                time.sleep(0.05)
            gone = time.monotonic() + 15.0  # the grace period (10 s) and a margin
            while any(_alive(w) for w in workers):
                assert time.monotonic() < gone, [w for w in workers if _alive(w)]
                time.sleep(0.1)
    finally:
        for pid in workers:  # ours: never leave one serving if the test fails
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_worker_whose_parent_is_gone_already_stops_at_once() -> None:
    """The parent died before the worker asked the kernel: the worker ends itself."""
    from cantata.cli.serve_worker import end_with_parent

    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            # The test process may have a handler of its own (an earlier in-process server's).
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            end_with_parent(os.getppid() + 1_000_000)  # not its parent: as if it had gone
            time.sleep(2)
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM
