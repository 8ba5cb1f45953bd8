"""`cantata serve --workers 2`: one scrape of ``/metrics`` counts the whole server. Workers
share one socket, so nobody can scrape them one by one; each writes its values to files and
every worker's ``/metrics`` sums them (a worker killed with -9 keeps its counts)."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import time
from pathlib import Path

import httpx

from ._servers import cli_server

WAIT = 30.0
REQUESTS = 16


def _admitted(text: str) -> float:
    (value,) = re.findall(r"^cantata_serve_admitted_requests_total (\S+)$", text, re.M)
    return float(value)


def _workers_counted(metrics: Path) -> set[int]:
    return {int(p.stem.rsplit("_", 1)[1]) for p in metrics.glob("counter_*.db")}


async def _stream(url: str) -> None:
    body = {"model": "quick", "stream": True, "messages": [{"role": "user", "content": "go"}]}
    async with (
        httpx.AsyncClient(timeout=WAIT) as http,  # a connection of its own
        http.stream("POST", f"{url}/v1/chat/completions", json=body) as reply,
    ):
        assert reply.status_code == 200
        async for _line in reply.aiter_lines():
            pass


async def _scrape(url: str) -> str:
    async with httpx.AsyncClient(timeout=WAIT) as http:
        reply = await http.get(f"{url}/metrics")
        assert reply.status_code == 200
        return reply.text


async def test_every_scrape_counts_every_worker_even_one_killed(tmp_path: Path) -> None:
    metrics = tmp_path / "metrics"
    metrics.mkdir()
    env = {"PROMETHEUS_MULTIPROC_DIR": str(metrics)}
    args = ("--workers", "2", "--max-running", str(REQUESTS), "--max-queued", "0")
    with cli_server("tests/serve/_slow.py:agents", *args, env=env) as (url, _proc):
        sent = 0
        for _ in range(3):  # concurrent half-second streams: both workers take some
            await asyncio.gather(*(_stream(url) for _ in range(REQUESTS)))
            sent += REQUESTS
            if len(_workers_counted(metrics)) == 2:
                break
        workers = _workers_counted(metrics)
        assert len(workers) == 2, "the kernel gave every connection to one worker"
        scrapes = [_admitted(await _scrape(url)) for _ in range(6)]
        assert set(scrapes) == {float(sent)}, (scrapes, sent)
        os.kill(min(workers), signal.SIGKILL)  # its counts stay in its file
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            try:  # a new connection goes to a live worker (the other, or the replacement)
                await _stream(url)
            except httpx.HTTPError:
                await asyncio.sleep(0.2)
                continue
            sent += 1
            if len(_workers_counted(metrics)) == 3 or sent >= 3 * REQUESTS:
                break
        after = [_admitted(await _scrape(url)) for _ in range(6)]
        assert set(after) == {float(sent)}, (after, sent)
