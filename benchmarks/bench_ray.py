"""Ray runtime: request/response through `RayRuntime` against raw Ray actor method calls
on the same local cluster, in the same run (issue 14: goal >= 0.8x the raw calls' rate).

Both sides make the same sequential round trips from the driver to one async actor that
adds a number and answers: raw Ray passes an int (pickled by Ray); cantata passes a
registered dataclass as a JSON envelope, numbered, through the agent's turn, with a
timeout. The cluster (one node on 127.0.0.1, no dashboard) is started by the benchmark
and shut down at the end; the contenders take turns within each round and the best round
of each is kept. Run alone: `.venv/bin/python benchmarks/run.py --only ray`.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # stay on 127.0.0.1

import ray
from _harness import Row, peer_version
from cantata.core import register
from cantata.runtime import AgentId, MessageContext, RoutedAgent, rpc
from cantata.runtime.ray import RayRuntime

HERE = os.path.dirname(os.path.abspath(__file__))


@register(name="bench.ray.Add")
@dataclass
class Add:
    n: int


class Counter(RoutedAgent):
    def __init__(self) -> None:
        super().__init__()
        self.total = 0

    @rpc
    async def add(self, message: Add, ctx: MessageContext) -> int:
        self.total += message.n
        return self.total


class RawCounter:
    """The raw Ray actor: the same work, an async method."""

    def __init__(self) -> None:
        self.total = 0

    async def add(self, n: int) -> int:
        self.total += n
        return self.total


async def _raw(handle: Any, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        await handle.add.remote(1)
    return calls / (time.perf_counter() - start)


async def _ours(rt: RayRuntime, agent: AgentId, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        await rt.send_message(Add(1), agent)
    return calls / (time.perf_counter() - start)


async def collect(quick: bool) -> list[Row]:
    calls, rounds = (300, 3) if quick else (1000, 5)
    started = not ray.is_initialized()
    if started:
        ray.init(
            num_cpus=2,
            include_dashboard=False,
            object_store_memory=80 * 1024 * 1024,
            log_to_driver=False,
            _node_ip_address="127.0.0.1",
            runtime_env={"env_vars": {"PYTHONPATH": HERE}},
        )
    try:
        raw = ray.remote(RawCounter).options(max_concurrency=1000).remote()
        async with RayRuntime(name="bench") as rt:
            await rt.register_factory("counter", Counter)
            agent = AgentId("counter", "bench")
            await _raw(raw, 50)  # warm both: actors started, handles cached
            await _ours(rt, agent, 50)
            best_raw = best_ours = 0.0
            for _ in range(rounds):
                best_raw = max(best_raw, await _raw(raw, calls))
                best_ours = max(best_ours, await _ours(rt, agent, calls))
        ray.kill(raw)
    finally:
        if started:
            ray.shutdown()
    return [
        Row(
            "ray request/response (driver to one agent's actor)",
            "requests/s",
            best_ours,
            peer=best_raw,
            peer_name="raw ray actor calls",
            peer_version=peer_version("ray"),
            goal=">= 0.8x",
            note=f"sequential round trips, best of {rounds} rounds of {calls}",
            headline=True,
        )
    ]
