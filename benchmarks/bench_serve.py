"""Serving benchmarks: what ``/v1/chat/completions`` adds to an agent run.

The served agent is a ChatAgent on a scripted model (instant answers), so what is measured
is the server: HTTP, JSON, the app's middleware and routes, and the message conversion.
`cantata serve` runs in a subprocess (access log off); the client is httpx with
keep-alive connections in this process, as a real client would be. The comparison ("in
process") is the same agent called directly: the ratio says how much of the request's
cost is the agent itself. Rows: latency of one request after another (and the latency
added to the in-process call), and requests per second with 16 clients at once.

The harness (the served agent, the subprocess server, the in-process peer, the concurrent
rate) is shared with ``bench_serve_a2a.py``, which imports it from here.
"""

from __future__ import annotations

import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from _harness import Row
from cantata.agents import ChatAgent, LocalThread
from cantata.core import Message
from cantata.models import ChatOptions, ScriptedChatClient

ROOT = Path(__file__).resolve().parents[1]
CONCURRENCY = 16
_START_TIMEOUT = 30.0
_COMMAND = (sys.executable, "-m", "cantata.cli", "serve", "benchmarks/bench_serve.py:agent")
NOTE = "scripted agent; server in a subprocess"


def _answer(messages: list[Message], options: ChatOptions) -> str:
    return f"you said: {messages[-1].text}"


agent = ChatAgent(ScriptedChatClient(_answer), name="bench")
"""What the server serves (``benchmarks/bench_serve.py:agent``)."""

_BODY = {"model": "bench", "messages": [{"role": "user", "content": "hello"}]}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def served_server() -> Iterator[str]:
    """`cantata serve` of `agent` in a subprocess (in-memory store, access log off), ready
    to answer; yields its base URL and stops it afterwards."""
    port = _free_port()
    proc = subprocess.Popen(
        [*_COMMAND, "--port", str(port), "--store", "memory://", "--log-level", "warning"],
        cwd=ROOT,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "benchmarks")]),
        },
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + _START_TIMEOUT
        while True:
            try:
                if httpx.get(f"{url}/v1/models", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"cantata serve did not start on {url}")
            time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


async def in_process_latency(n: int) -> list[float]:
    """Seconds of each of `n` calls of `agent` in this process, one after another."""
    times = []
    for _ in range(n):
        start = time.perf_counter()
        await agent.run("hello", thread=LocalThread())
        times.append(time.perf_counter() - start)
    return times


async def _served_latency(http: httpx.AsyncClient, url: str, n: int, **extra: Any) -> list[float]:
    times = []
    body = {**_BODY, **extra}
    for _ in range(n):
        start = time.perf_counter()
        reply = await http.post(f"{url}/v1/chat/completions", json=body)
        await reply.aread()
        times.append(time.perf_counter() - start)
        if reply.status_code != 200:
            raise RuntimeError(f"the server answered {reply.status_code}: {reply.text[:200]}")
    return times


async def rate(one_after_another: Callable[[int], Awaitable[object]], total: int) -> float:
    """Calls per second when `CONCURRENCY` clients each make their share of `total` calls
    one after another (`one_after_another(n)` makes n)."""
    per_client = total // CONCURRENCY
    start = time.perf_counter()
    await asyncio.gather(*(one_after_another(per_client) for _ in range(CONCURRENCY)))
    return per_client * CONCURRENCY / (time.perf_counter() - start)


def median_ms(values: list[float]) -> float:
    """The median of `values` (seconds) in milliseconds."""
    return statistics.median(values) * 1000


def rows(
    label: str, streamed_label: str, rate_label: str, figures: dict[str, float], note: str
) -> list[Row]:
    """The four rows of a serving benchmark from its figures (``served``, ``streamed``,
    ``local``, ``rate``, ``local_rate``)."""
    local = figures["local"]
    return [
        Row(
            f"serve: {label}, one at a time",
            "ms",
            figures["served"],
            peer=local,
            peer_name="in process",
            higher_is_better=False,
            note=note,
            headline=True,
        ),
        Row(
            f"serve: {label}, added latency",
            "ms",
            figures["served"] - local,
            higher_is_better=False,
            note="median served minus median in-process call",
        ),
        Row(
            f"serve: {streamed_label}, one at a time",
            "ms",
            figures["streamed"],
            peer=local,
            peer_name="in process",
            higher_is_better=False,
            note=note,
        ),
        Row(
            f"serve: {rate_label}, {CONCURRENCY} clients",
            "requests/s",
            figures["rate"],
            peer=figures["local_rate"],
            peer_name="in process",
            note=note,
            headline=True,
        ),
    ]


async def in_process_figures(n: int, total: int) -> dict[str, float]:
    """The in-process peer: median latency of `n` calls, and the rate over `total`."""
    return {
        "local": median_ms(await in_process_latency(n)),
        "local_rate": await rate(in_process_latency, total),
    }


async def collect(quick: bool) -> list[Row]:
    n = 200 if quick else 1000
    total = 800 if quick else 4000
    figures = await in_process_figures(n, total)
    limits = httpx.Limits(max_connections=CONCURRENCY, max_keepalive_connections=CONCURRENCY)
    with served_server() as url:
        async with httpx.AsyncClient(timeout=30, limits=limits) as http:
            await _served_latency(http, url, 50)  # warm-up: connections, first imports
            figures["served"] = median_ms(await _served_latency(http, url, n))
            figures["streamed"] = median_ms(await _served_latency(http, url, n, stream=True))
            figures["rate"] = await rate(lambda k: _served_latency(http, url, k), total)
    return rows(
        "chat completion",
        "chat completion streamed",
        "chat completions",
        figures,
        f"{NOTE}, httpx keep-alive client",
    )
