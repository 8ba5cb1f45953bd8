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
import gc
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from _harness import Row, peer_version
from cantata.agents import ChatAgent, LocalThread
from cantata.core import Message
from cantata.models import ChatOptions, ScriptedChatClient
from cantata.serve import DEFAULT_MAX_QUEUED, DEFAULT_MAX_RUNNING

ROOT = Path(__file__).resolve().parents[1]
CONCURRENCY = 16
UNSHED = ("--max-running", str(CONCURRENCY), "--max-queued", str(CONCURRENCY))
"""The latency and rate rows measure the server, not its admission (the load rows do):
every one of the `CONCURRENCY` clients gets a slot at once."""
MAX_RUNNING, MAX_QUEUED = DEFAULT_MAX_RUNNING, DEFAULT_MAX_QUEUED  # `cantata serve`'s
LOAD_CLIENTS = 2 * (MAX_RUNNING + MAX_QUEUED)  # twice what the server takes at once
_START_TIMEOUT = 90.0
_COMMAND = (sys.executable, "-m", "cantata.cli", "serve", "benchmarks/bench_serve.py:agent")
NOTE = "scripted agent; server in a subprocess"


def _answer(messages: list[Message], options: ChatOptions) -> str:
    return f"you said: {messages[-1].text}"


agent = ChatAgent(ScriptedChatClient(_answer), name="bench")
"""What the server serves (``benchmarks/bench_serve.py:agent``)."""

paced = ChatAgent(ScriptedChatClient(_answer, latency=0.05), name="bench")
"""A scripted model that takes 50 ms per answer (``benchmarks/bench_serve.py:paced``)."""


def _local_agent() -> ChatAgent:
    from cantata.models import LocalChatClient

    return ChatAgent(LocalChatClient(), name="bench")


def __getattr__(name: str) -> object:
    if name == "local":  # ``benchmarks/bench_serve.py:local``, loaded only when served
        return _local_agent()
    raise AttributeError(name)


async def _floor_endpoint(request: Any) -> Any:
    from starlette.responses import JSONResponse

    body = await request.json()
    text = f"you said: {body['messages'][-1]['content']}"
    return JSONResponse({"object": "chat.completion", "choices": [{"message": {"content": text}}]})


def _floor_app() -> Any:
    from starlette.applications import Starlette
    from starlette.routing import Route

    return Starlette(routes=[Route("/v1/chat/completions", _floor_endpoint, methods=["POST"])])


_BODY = {"model": "bench", "messages": [{"role": "user", "content": "hello"}]}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def served_server(*args: str, target: str | None = None) -> Iterator[str]:
    """`cantata serve` of `agent` (or `target`) in a subprocess (in-memory store, access log
    off), ready to answer; yields its base URL and stops it afterwards."""
    with _server_process(*args, target=target) as (url, _proc):
        yield url


@contextmanager
def _server_process(
    *args: str, target: str | None = None, floor: bool = False
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    port = _free_port()
    if floor:
        command = [sys.executable, "-m", "uvicorn", "bench_serve:_floor_app", "--factory"]
        command += ["--port", str(port), "--log-level", "warning"]
    else:
        command = [*_COMMAND[:-1], target or _COMMAND[-1], "--port", str(port)]
        command += ["--store", "memory://", "--log-level", "warning", *args]
    log = tempfile.TemporaryFile()  # noqa: SIM115 (closed below; read if the server fails)
    proc = subprocess.Popen(
        command,
        cwd=ROOT,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "benchmarks")]),
        },
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + _START_TIMEOUT
        while True:
            try:
                if httpx.get(f"{url}/v1/models", timeout=2).status_code in (200, 404):
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                proc.wait(10)
                log.seek(0)
                said = log.read().decode(errors="replace")[-2000:]
                raise RuntimeError(f"{command[2:5]} did not start on {url}: {said}")
            time.sleep(0.05)
        yield url, proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()


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
    with served_server(*UNSHED) as url:
        async with httpx.AsyncClient(timeout=30, limits=limits) as http:
            await _served_latency(http, url, 50)  # warm-up: connections, first imports
            figures["served"] = median_ms(await _served_latency(http, url, n))
            figures["streamed"] = median_ms(await _served_latency(http, url, n, stream=True))
            figures["rate"] = await rate(lambda k: _served_latency(http, url, k), total)
    floor = await floor_latency(n)
    overhead = Row(
        "serve: chat completion, overhead per request",
        "ms",
        figures["served"] - figures["local"],
        peer=floor,
        peer_name=f"Starlette echo endpoint (the floor), starlette {peer_version('starlette')}",
        higher_is_better=False,
        note="median served minus median in-process call, beside a plain Starlette "
        "endpoint's whole median latency on the same uvicorn and client",
    )
    served_rows = rows(
        "chat completion",
        "chat completion streamed",
        "chat completions",
        figures,
        f"{NOTE}, httpx keep-alive client",
    )
    return [*served_rows, overhead, *await collect_load(quick)]


# --- the floor: a plain Starlette endpoint ---------------------------------------------


async def floor_latency(n: int) -> float:
    """Median ms of `n` requests to a plain Starlette echo endpoint on uvicorn (subprocess)."""
    with _server_process(floor=True) as (url, _proc):
        async with httpx.AsyncClient(timeout=30) as http:
            await _served_latency(http, url, 50)
            return median_ms(await _served_latency(http, url, n))


# --- load: twice what the server takes at once ------------------------------------------


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


async def _load_round(url: str, per_client: int, body: dict[str, Any]) -> dict[str, Any]:
    """`LOAD_CLIENTS` clients, each sending `per_client` requests back to back (a refused
    one counts and the client goes on to its next, as a client that retries later would).
    Each opens its keep-alive connection first with a ``GET /v1/models`` (not model work,
    never refused, not timed): the latencies are of requests, not of TCP connects."""
    accepted: list[float] = []
    refused: list[float] = []
    timed_out: list[float] = []
    other: list[str] = []
    limits = httpx.Limits(max_connections=LOAD_CLIENTS, max_keepalive_connections=LOAD_CLIENTS)
    async with httpx.AsyncClient(timeout=300, limits=limits) as http:

        async def client() -> None:
            (await http.get(f"{url}/v1/models")).raise_for_status()
            for _ in range(per_client):
                start = time.perf_counter()
                try:
                    reply = await http.post(f"{url}/v1/chat/completions", json=body)
                except httpx.HTTPError as exc:
                    other.append(type(exc).__name__)
                    continue
                took = time.perf_counter() - start
                if reply.status_code == 200:
                    accepted.append(took)
                elif reply.status_code == 429 and "retry-after" in reply.headers:
                    # refused at once ("at capacity"), or after the bounded wait ("waited")
                    waited = "waited" in reply.json()["error"]["message"]
                    (timed_out if waited else refused).append(took)
                else:
                    other.append(str(reply.status_code))

        start = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(LOAD_CLIENTS)))
        wall = time.perf_counter() - start
    return {
        "accepted": accepted,
        "refused": refused,
        "timed_out": timed_out,
        "other": other,
        "wall": wall,
    }


def _pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


async def load_figures(
    target: str, per_client: int, rounds: int, body: dict[str, Any]
) -> dict[str, Any]:
    """The load figures of `rounds` rounds against one `cantata serve` of `target`."""
    args = ("--max-running", str(MAX_RUNNING), "--max-queued", str(MAX_QUEUED))
    with _server_process(*args, target=target) as (url, proc):
        async with httpx.AsyncClient(timeout=300) as http:
            await http.post(f"{url}/v1/chat/completions", json=body)  # warm-up (loads a model)
        # this process's imports out of the collector's sight while the rounds run, as the
        # server does with its own: a full collection over them held every request in
        # flight here for 60 ms (given back after, for the benchmarks that run next here)
        gc.collect()
        gc.freeze()
        try:
            rss = [_rss_mb(proc.pid)]
            results = []
            for _ in range(rounds):
                results.append(await _load_round(url, per_client, body))
                rss.append(_rss_mb(proc.pid))
        finally:
            gc.unfreeze()
    accepted = [t for r in results for t in r["accepted"]]
    refused = [t for r in results for t in r["refused"]]
    timed_out = [t for r in results for t in r["timed_out"]]
    other = [e for r in results for e in r["other"]]
    return {
        "rate": len(accepted) / sum(r["wall"] for r in results),
        "p50": _pct(accepted, 0.50),
        "p99": _pct(accepted, 0.99),
        "refused": len(refused),
        "refused_p50": _pct(refused, 0.50),
        "refused_p99": _pct(refused, 0.99),
        "timed_out": len(timed_out),
        "total": LOAD_CLIENTS * per_client * rounds,
        "other": len(other),
        "other_kinds": sorted(set(other))[:5],
        "rss": [round(x, 1) for x in rss],
    }


def load_rows(label: str, figures: dict[str, Any], note: str) -> list[Row]:
    """The rows of one load run."""
    keys = ("p50", "p99", "refused", "timed_out", "total", "other_kinds", "rss")
    extra = {k: figures[k] for k in keys}
    rss = figures["rss"]
    return [
        Row(
            f"serve load: {label}, {LOAD_CLIENTS} clients (2x overload), accepted",
            "requests/s",
            figures["rate"],
            note=f"{note}; p50 {figures['p50']:.0f} ms, p99 {figures['p99']:.0f} ms; "
            f"{figures['refused']} of {figures['total']} refused at once (429), "
            f"{figures['timed_out']} after waiting the queue timeout (429)",
            extra=extra,
            headline=True,
        ),
        Row(
            f"serve load: {label}, p99 of a 429 at once",
            "ms",
            figures["refused_p99"],
            higher_is_better=False,
            goal="<= 50 ms",
            note=f"{figures['refused']} refused at once, p50 {figures['refused_p50']:.0f} ms",
        ),
        Row(
            f"serve load: {label}, errors other than 429",
            "requests",
            figures["other"],
            higher_is_better=False,
            goal="<= 0 requests",
            note=", ".join(figures["other_kinds"]) or "none",
        ),
        Row(
            f"serve load: {label}, RSS growth over the rounds after the first",
            "MB",
            rss[-1] - rss[1],
            higher_is_better=False,
            note=f"RSS before and after each round: {rss} MB",
        ),
    ]


async def collect_load(quick: bool) -> list[Row]:
    """The load rows: the scripted 50 ms model, then the embedded model."""
    rows_out: list[Row] = []
    scripted = await load_figures("benchmarks/bench_serve.py:paced", 5 if quick else 20, 3, _BODY)
    rows_out += load_rows("scripted 50 ms model", scripted, NOTE)
    if peer_version("llama-cpp-python") is not None:
        local_body = {**_BODY, "max_tokens": 16}
        local = await load_figures(
            "benchmarks/bench_serve.py:local", 1 if quick else 2, 3, local_body
        )
        rows_out += load_rows("embedded model", local, "SmolLM2-135M, 16 tokens per answer")
    return rows_out
