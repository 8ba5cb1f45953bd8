"""What a serving process sets for itself: the embedded model decodes nicer than the event
loop that answers requests (a real `cantata serve` on the local model, its threads read from
/proc), and what lives from the server's start is out of the collector's sight."""

from __future__ import annotations

import asyncio
import gc
import sys
from pathlib import Path

import httpx
import pytest
import uvicorn
from hypothesis import given
from hypothesis import strategies as st

from cantata.core import ConfigurationError
from cantata.models import set_decode_niceness
from cantata.serve import build_app
from cantata.serve.drain import Drain
from cantata.serve.server import DECODE_NICENESS, _DrainingServer, listen_socket

from ._servers import START_TIMEOUT, STOP_TIMEOUT, cli_server, echo


def _threads(pid: int) -> dict[int, tuple[int, int]]:
    """Each thread of `pid`: (niceness, CPU ticks used), from /proc."""
    threads = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:  # the thread ended meanwhile
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # from field 3 (the state) on
        threads[int(task.name)] = (int(fields[16]), int(fields[11]) + int(fields[12]))
    return threads


@pytest.mark.local_model
@pytest.mark.skipif(sys.platform != "linux", reason="niceness per thread is Linux's")
def test_cantata_serve_decodes_on_threads_nicer_than_the_one_that_answers() -> None:
    with cli_server("examples/serve_agent.py:agent", "--store", "memory://") as (url, proc):
        reply = httpx.post(
            f"{url}/v1/chat/completions",
            json={"model": "assistant", "messages": [{"role": "user", "content": "Hi."}]},
            timeout=300,
        )
        assert reply.status_code == 200, reply.text
        threads = _threads(proc.pid)
    main_niceness = threads[proc.pid][0]
    assert main_niceness < 19, "the tests run at niceness 19: no thread can be nicer"
    nicer = [ticks for niceness, ticks in threads.values() if niceness > main_niceness]
    assert all(
        niceness == min(main_niceness + DECODE_NICENESS, 19)
        for niceness, _ in threads.values()
        if niceness != main_niceness
    )
    # the decode thread and its OpenMP workers: they did the decoding
    assert nicer and sum(nicer) > 0


@given(st.one_of(st.integers().filter(lambda n: not 0 <= n <= 19), st.floats(), st.text()))
def test_a_decode_niceness_out_of_range_is_refused(bad: object) -> None:
    with pytest.raises(ConfigurationError, match="decode niceness"):
        set_decode_niceness(bad)  # type: ignore[arg-type]


async def test_the_server_puts_what_lives_from_its_start_out_of_the_collectors_sight() -> None:
    gc.unfreeze()
    config = uvicorn.Config(build_app(echo, store="memory://"), log_level="warning")
    server = _DrainingServer(config, Drain(), 1.0)
    sock = listen_socket("127.0.0.1", 0)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        async with asyncio.timeout(START_TIMEOUT):
            while not server.started:
                assert not task.done(), "the server stopped before it started"
                await asyncio.sleep(0.01)
        assert gc.get_freeze_count() > 0
    finally:
        try:
            server.should_exit = True
            async with asyncio.timeout(STOP_TIMEOUT):
                await task
        finally:
            sock.close()
            gc.unfreeze()
