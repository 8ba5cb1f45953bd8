"""`cantata serve --workers 2` drains as one process does: SIGTERM to the parent reaches
every worker, a stream under way ends with its protocol's terminal event, and the log has no
traceback; the parent exits once its workers have."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

import httpx

from ._servers import STOP_TIMEOUT, cli_server

WAIT = 30.0


async def test_sigterm_to_a_two_worker_server_ends_the_stream_with_a_terminal_event(
    tmp_path: Path,
) -> None:
    store = f"sqlite:///{tmp_path / 'workers.db'}"
    target = "tests/serve/_slow.py:agents"
    with cli_server(target, "--store", store, "--workers", "2", "--grace", "3") as (url, proc):
        body = {"model": "slow", "stream": True, "messages": [{"role": "user", "content": "go"}]}
        lines: list[str] = []
        started = asyncio.Event()

        async def stream(http: httpx.AsyncClient) -> None:
            async with http.stream("POST", f"{url}/v1/chat/completions", json=body) as reply:
                assert reply.status_code == 200
                async for line in reply.aiter_lines():
                    if line.startswith("data: "):
                        lines.append(line[6:])
                        if "word" in line:
                            started.set()

        async with httpx.AsyncClient(timeout=WAIT) as http:
            task = asyncio.create_task(stream(http))
            async with asyncio.timeout(WAIT):
                await started.wait()
            proc.send_signal(signal.SIGTERM)
            async with asyncio.timeout(WAIT):
                await task
        assert proc.wait(STOP_TIMEOUT) is not None
        log = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
    assert lines[-1] == "[DONE]"
    assert json.loads(lines[-2])["error"]["code"] == "server_shutting_down"
    assert "Traceback" not in log, log
    assert "stopped a run at shutdown" in log
