"""Serving benchmarks: what A2A ``SendMessage`` adds to an agent run.

The served agent is a ChatAgent on a scripted model (instant answers), so what is measured
is the server and the protocol: HTTP, JSON-RPC, the a2a-sdk request handler (a task per
message, saved after each of its events), the context's thread in the store, and the
conversions. `cantata serve` runs in a subprocess (in-memory store, access log off); the
client is the official a2a-sdk client over one keep-alive httpx client in this process.
Each request starts a new context, as the in-process peer runs on a new thread. Rows:
latency one request after another (and streamed), the latency added to the in-process
call, and requests per second with 16 clients at once.
"""

from __future__ import annotations

import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.helpers import new_text_message
from a2a.types.a2a_pb2 import Role, SendMessageRequest, TaskState

from _harness import Row
from cantata.agents import ChatAgent, LocalThread
from cantata.core import Message
from cantata.models import ChatOptions, ScriptedChatClient

ROOT = Path(__file__).resolve().parents[1]
CONCURRENCY = 16
_START_TIMEOUT = 30.0
_COMMAND = (sys.executable, "-m", "cantata.cli", "serve", "benchmarks/bench_serve_a2a.py:agent")


def _answer(messages: list[Message], options: ChatOptions) -> str:
    return f"you said: {messages[-1].text}"


agent = ChatAgent(ScriptedChatClient(_answer), name="bench")
"""What the server serves (``benchmarks/bench_serve_a2a.py:agent``)."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def _server() -> Iterator[str]:
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
        yield f"{url}/a2a/bench"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


async def _in_process_latency(n: int) -> list[float]:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        await agent.run("hello", thread=LocalThread())
        times.append(time.perf_counter() - start)
    return times


async def _served_latency(client: Client, n: int) -> list[float]:
    times = []
    for _ in range(n):
        request = SendMessageRequest(message=new_text_message("hello", role=Role.ROLE_USER))
        start = time.perf_counter()
        last = None
        async for event in client.send_message(request):
            last = event
        times.append(time.perf_counter() - start)
        state = (
            last.task.status.state
            if last is not None and last.HasField("task")
            else last.status_update.status.state
            if last is not None
            else None
        )
        if state != TaskState.TASK_STATE_COMPLETED:
            raise RuntimeError(f"the A2A server did not complete the task: {last}")
    return times


async def _rate(client: Client, total: int) -> float:
    per_client = total // CONCURRENCY
    start = time.perf_counter()
    await asyncio.gather(*(_served_latency(client, per_client) for _ in range(CONCURRENCY)))
    return per_client * CONCURRENCY / (time.perf_counter() - start)


async def _in_process_rate(total: int) -> float:
    per_client = total // CONCURRENCY
    start = time.perf_counter()
    await asyncio.gather(*(_in_process_latency(per_client) for _ in range(CONCURRENCY)))
    return per_client * CONCURRENCY / (time.perf_counter() - start)


def _ms(values: list[float]) -> float:
    return statistics.median(values) * 1000


async def collect(quick: bool) -> list[Row]:
    n = 100 if quick else 500
    total = 320 if quick else 1600
    local = _ms(await _in_process_latency(n))
    local_rate = await _in_process_rate(total)
    limits = httpx.Limits(max_connections=CONCURRENCY, max_keepalive_connections=CONCURRENCY)
    with _server() as url:
        async with httpx.AsyncClient(timeout=30, limits=limits) as http:
            card = await A2ACardResolver(http, url).get_agent_card()
            plain = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)
            streaming = ClientFactory(ClientConfig(streaming=True, httpx_client=http)).create(card)
            await _served_latency(plain, 30)  # warm-up: connections, first imports
            served = _ms(await _served_latency(plain, n))
            streamed = _ms(await _served_latency(streaming, n))
            rate = await _rate(plain, total)
    note = "scripted agent; server in a subprocess, a2a-sdk client on keep-alive httpx"
    return [
        Row(
            "serve: A2A message/send, one at a time",
            "ms",
            served,
            peer=local,
            peer_name="in process",
            higher_is_better=False,
            note=note,
            headline=True,
        ),
        Row(
            "serve: A2A message/send, added latency",
            "ms",
            served - local,
            higher_is_better=False,
            note="median served minus median in-process call",
        ),
        Row(
            "serve: A2A message/stream, one at a time",
            "ms",
            streamed,
            peer=local,
            peer_name="in process",
            higher_is_better=False,
            note=note,
        ),
        Row(
            f"serve: A2A message/send, {CONCURRENCY} clients",
            "requests/s",
            rate,
            peer=local_rate,
            peer_name="in process",
            note=note,
            headline=True,
        ),
    ]
