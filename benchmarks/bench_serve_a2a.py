"""Serving benchmarks: what A2A ``SendMessage`` adds to an agent run.

The served agent is a ChatAgent on a scripted model (instant answers), so what is measured
is the server and the protocol: HTTP, JSON-RPC, the a2a-sdk request handler (a task per
message, saved after each of its events), the context's thread in the store, and the
conversions. `cantata serve` runs in a subprocess (in-memory store, access log off); the
client is the official a2a-sdk client over one keep-alive httpx client in this process.
Each request starts a new context, as the in-process peer runs on a new thread. Rows:
latency one request after another (and streamed), the latency added to the in-process
call, and requests per second with 16 clients at once. The server and the in-process
peer are ``bench_serve.py``'s (the same agent, served the same way).
"""

from __future__ import annotations

import time

import httpx
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.helpers import new_text_message
from a2a.types.a2a_pb2 import Role, SendMessageRequest, TaskState

from _harness import Row
from bench_serve import (
    CONCURRENCY,
    NOTE,
    UNSHED,
    in_process_figures,
    median_ms,
    rate,
    rows,
    served_server,
)


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


async def collect(quick: bool) -> list[Row]:
    n = 100 if quick else 500
    total = 320 if quick else 1600
    figures = await in_process_figures(n, total)
    limits = httpx.Limits(max_connections=CONCURRENCY, max_keepalive_connections=CONCURRENCY)
    with served_server(*UNSHED) as base:
        url = f"{base}/a2a/bench"
        async with httpx.AsyncClient(timeout=30, limits=limits) as http:
            card = await A2ACardResolver(http, url).get_agent_card()
            plain = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)
            streaming = ClientFactory(ClientConfig(streaming=True, httpx_client=http)).create(card)
            await _served_latency(plain, 30)  # warm-up: connections, first imports
            figures["served"] = median_ms(await _served_latency(plain, n))
            figures["streamed"] = median_ms(await _served_latency(streaming, n))
            figures["rate"] = await rate(lambda k: _served_latency(plain, k), total)
    return rows(
        "A2A message/send",
        "A2A message/stream",
        "A2A message/send",
        figures,
        f"{NOTE}, a2a-sdk client on keep-alive httpx",
    )
