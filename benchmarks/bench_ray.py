"""Ray runtime (issue 14), four rows from one local two-node cluster on 127.0.0.1:

1. request/response through `RayRuntime` against raw Ray actor method calls on the same
   cluster (goal >= 0.8x the raw calls' rate). Both make the same sequential round trips
   from the driver to one async actor that adds a number and answers: raw Ray passes an
   int (pickled by Ray); cantata passes a registered dataclass as a JSON envelope,
   numbered, through the agent's turn, with a timeout, over the direct stream from the
   driver to the actor (direct.py). A second row makes the same requests through a
   `RayRuntime(direct=False)`, whose requests are Ray actor calls, in the same rounds.
2. the same figure against autogen-ext's gRPC worker runtime on the same cross-process
   workload (goal >= 2x), and both with 8 agents sent requests at once. AutoGen's
   `GrpcWorkerAgentRuntimeHost` and the `GrpcWorkerAgentRuntime` hosting its counter agent
   run in a subprocess started by this run; this process sends through its own
   `GrpcWorkerAgentRuntime` (so every request crosses to the other process and back
   through the host, as cantata's cross to the actor's process). Skipped when
   autogen-ext[grpc] is not installed.
3. a fan-out workflow (one split, 16 workers, one join) with ``placement="executor"`` on
   `RayRuntime`, its executors' actors spread over both nodes, against the same workflow
   in one process (the default placement); reported with the cost per message (each
   executor invocation is one request and its result one reply; the events go through
   the directory to the driver's local subscriber, all over the direct streams).

The cluster is started once per process (head and one worker node, no dashboard, small
object stores, free ports) and shut down at exit; contenders take turns within each round
and the best round of each is kept. Run: `.venv/bin/python benchmarks/run.py --only ray`.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import socket
import sys
import time
from dataclasses import dataclass
from typing import Any

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # stay on 127.0.0.1

import ray
from _harness import Row, peer_version
from cantata.core import register
from cantata.runtime import AgentId, MessageContext, RoutedAgent, rpc
from cantata.runtime.ray import RayRuntime
from cantata.workflows import Executor, Workflow, WorkflowBuilder, WorkflowContext, handler

HERE = os.path.dirname(os.path.abspath(__file__))
SELF = os.path.abspath(__file__)
FAN = 16
AGENTS = 8


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


# -- the cluster ---------------------------------------------------------------------------

_CLUSTER: Any = None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _node(**extra: Any) -> dict[str, Any]:
    return {
        "node_ip_address": "127.0.0.1",
        "num_cpus": 8,
        "object_store_memory": 80 * 1024 * 1024,
        "include_dashboard": False,
        "dashboard_agent_listen_port": _free_port(),
        "runtime_env_agent_port": _free_port(),
        "metrics_agent_port": _free_port(),
        "metrics_export_port": _free_port(),
        **extra,
    }


def _ensure_cluster() -> None:
    """Head and one worker node, joined by this driver; shut down when the process ends."""
    global _CLUSTER
    if _CLUSTER is not None:
        return
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args=_node(gcs_server_port=_free_port()))
    cluster.add_node(**_node())
    cluster.wait_for_nodes()
    ray.init(
        address=cluster.address,
        namespace="cantata-bench",
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": HERE}},
    )
    _CLUSTER = cluster

    def _down() -> None:
        ray.shutdown()
        cluster.shutdown()

    atexit.register(_down)


# -- row 1 and 2: request/response ---------------------------------------------------------


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


async def _ours_at_once(rt: RayRuntime, calls: int) -> float:
    """`AGENTS` agents, each sent its share of the calls one after another, all at once."""

    async def one(agent: AgentId) -> None:
        for _ in range(calls // AGENTS):
            await rt.send_message(Add(1), agent)

    start = time.perf_counter()
    await asyncio.gather(*(one(AgentId("counter", f"a{i}")) for i in range(AGENTS)))
    return calls // AGENTS * AGENTS / (time.perf_counter() - start)


# The AutoGen side: message types and the agent live at module level (its serializers
# and handler routing read the annotations); its classes are made only when it is there.


@dataclass
class AgAdd:
    n: int


@dataclass
class AgTotal:
    total: int


try:
    from autogen_core import MessageContext as AgContext
    from autogen_core import RoutedAgent as AgRouted
    from autogen_core import message_handler

    class AgCounter(AgRouted):
        """AutoGen's counter: the same work as `Counter`."""

        def __init__(self) -> None:
            super().__init__("counter")
            self.total = 0

        @message_handler
        async def on_add(self, message: AgAdd, ctx: AgContext) -> AgTotal:
            self.total += message.n
            return AgTotal(self.total)

except ImportError:  # the peer is not installed: its row says so
    AgCounter = None  # type: ignore[assignment,misc]


def _autogen_serializers() -> list[Any]:
    from autogen_core import try_get_known_serializers_for_type

    return [
        *try_get_known_serializers_for_type(AgAdd),
        *try_get_known_serializers_for_type(AgTotal),
    ]


async def _autogen_peer(port: int) -> None:
    """The subprocess: the host and the worker that hosts the counter; until stdin closes."""
    from autogen_ext.runtimes.grpc import GrpcWorkerAgentRuntime, GrpcWorkerAgentRuntimeHost

    address = f"127.0.0.1:{port}"
    host = GrpcWorkerAgentRuntimeHost(address=address)
    host.start()
    worker = GrpcWorkerAgentRuntime(host_address=address)
    worker.add_message_serializer(_autogen_serializers())
    await worker.start()
    await AgCounter.register(worker, "counter", AgCounter)
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await worker.stop()
    await host.stop()


class _AutogenPeer:
    """The AutoGen side of row 2 from this process: a subprocess with the host and the
    agent's worker, and a client worker runtime here."""

    def __init__(self) -> None:
        self.port = _free_port()
        self.proc: asyncio.subprocess.Process | None = None
        self.client: Any = None

    async def start(self) -> None:
        from autogen_ext.runtimes.grpc import GrpcWorkerAgentRuntime

        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            SELF,
            "--autogen-peer",
            str(self.port),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            cwd=HERE,
        )
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), 60)
        if line.strip() != b"ready":
            raise RuntimeError(f"the AutoGen peer did not start (said {line!r})")
        self.client = GrpcWorkerAgentRuntime(host_address=f"127.0.0.1:{self.port}")
        self.client.add_message_serializer(_autogen_serializers())
        await self.client.start()

    async def rate(self, calls: int) -> float:
        from autogen_core import AgentId as AgId

        agent = AgId("counter", "bench")
        start = time.perf_counter()
        for _ in range(calls):
            await asyncio.wait_for(self.client.send_message(AgAdd(1), agent), 60)
        return calls / (time.perf_counter() - start)

    async def rate_at_once(self, calls: int) -> float:
        """As `_ours_at_once`: `AGENTS` agents of the peer's worker, all at once."""
        from autogen_core import AgentId as AgId

        async def one(agent: Any) -> None:
            for _ in range(calls // AGENTS):
                await asyncio.wait_for(self.client.send_message(AgAdd(1), agent), 60)

        start = time.perf_counter()
        await asyncio.gather(*(one(AgId("counter", f"a{i}")) for i in range(AGENTS)))
        return calls // AGENTS * AGENTS / (time.perf_counter() - start)

    async def stop(self) -> None:
        if self.client is not None:
            await self.client.stop()
        if self.proc is not None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                await asyncio.wait_for(self.proc.wait(), 30)
            except TimeoutError:
                self.proc.kill()
                await asyncio.wait_for(self.proc.wait(), 10)


def _has_autogen_grpc() -> bool:
    try:
        import autogen_ext.runtimes.grpc  # noqa: F401
    except ImportError:
        return False
    return True


# -- row 3: a fan-out workflow over two nodes ----------------------------------------------


class Split(Executor):
    @handler
    async def take(self, n: int, ctx: WorkflowContext[int]) -> None:
        await ctx.send_message(n)


class Work(Executor):
    @handler
    async def take(self, n: int, ctx: WorkflowContext[int]) -> None:
        await ctx.send_message(n + 1)


class Join(Executor):
    @handler
    async def take(self, values: list[int], ctx: WorkflowContext[None, int]) -> None:
        await ctx.yield_output(sum(values))


def fan_out(placement: str) -> Workflow:
    split, join = Split("split"), Join("join")
    workers = [Work(f"w{i}") for i in range(FAN)]
    return (
        WorkflowBuilder(split, placement=placement)  # type: ignore[arg-type]
        .add_fan_out_edges(split, workers)
        .add_fan_in_edges(workers, join)
        .build()
    )


async def _runs_per_s(wf: Workflow, runs: int, runtime: Any = None) -> float:
    start = time.perf_counter()
    for i in range(runs):
        result = await wf.run(i, runtime=runtime)
        if result.outputs != [FAN * (i + 1)]:
            raise RuntimeError(f"the fan-out workflow answered {result.outputs}")
    return runs / (time.perf_counter() - start)


async def collect(quick: bool) -> list[Row]:
    calls, rounds, runs = (300, 3, 5) if quick else (1000, 5, 20)
    _ensure_cluster()
    raw = ray.remote(RawCounter).options(max_concurrency=1000).remote()
    peer = _AutogenPeer() if _has_autogen_grpc() else None
    best_raw = best_ours = best_peer = best_many = best_peer_many = best_calls = 0.0
    best_local = best_fan = 0.0
    try:
        if peer is not None:
            await peer.start()
            await peer.rate(50)
        async with (
            RayRuntime(name=f"bench{os.getpid()}") as rt,
            RayRuntime(name=f"calls{os.getpid()}", direct=False) as by_calls,
        ):
            await rt.register_factory("counter", Counter)
            await by_calls.register_factory("counter", Counter)
            agent = AgentId("counter", "bench")
            await _raw(raw, 50)  # warm: actors started, handles cached
            await _ours(rt, agent, 50)
            await _ours(by_calls, agent, 50)
            await _ours_at_once(rt, AGENTS * 10)
            if peer is not None:
                await peer.rate_at_once(AGENTS * 10)
            for _ in range(rounds):
                best_raw = max(best_raw, await _raw(raw, calls))
                best_ours = max(best_ours, await _ours(rt, agent, calls))
                best_calls = max(best_calls, await _ours(by_calls, agent, calls))
                best_many = max(best_many, await _ours_at_once(rt, calls))
                if peer is not None:
                    best_peer = max(best_peer, await peer.rate(calls))
                    best_peer_many = max(best_peer_many, await peer.rate_at_once(calls))
        spread = {"scheduling_strategy": "SPREAD"}
        async with RayRuntime(name=f"fan{os.getpid()}", actor_options=spread) as rt:
            placed, local = fan_out("executor"), fan_out("run")
            await _runs_per_s(placed, 2, rt)  # warm: each executor's actor started
            await _runs_per_s(local, 2)
            nodes = {(await rt.where(a))[0] for a in await rt.live_agents()}
            for _ in range(rounds):
                best_fan = max(best_fan, await _runs_per_s(placed, runs, rt))
                best_local = max(best_local, await _runs_per_s(local, runs))
    finally:
        ray.kill(raw)
        if peer is not None:
            await peer.stop()
    messages = FAN + 2  # invocations per run: split, the workers, join
    per_message_ms = (1 / best_fan - 1 / best_local) / messages * 1000
    rows = [
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
        ),
        Row(
            "ray request/response as Ray calls (RayRuntime(direct=False))",
            "requests/s",
            best_calls,
            peer=best_raw,
            peer_name="raw ray actor calls",
            peer_version=peer_version("ray"),
            note=f"the same round trips without the direct stream, best of {rounds} rounds "
            f"of {calls}",
        ),
        Row(
            "ray request/response (cross-process, one agent)",
            "requests/s",
            best_ours,
            peer=best_peer if peer is not None else None,
            peer_name="autogen-ext gRPC worker runtime",
            peer_version=peer_version("autogen-ext"),
            goal=">= 2x",
            note=f"sequential round trips, best of {rounds} rounds of {calls}; AutoGen's "
            "host and agent worker in a subprocess, its client runtime here"
            + ("" if peer is not None else "; peer not installed (autogen-ext[grpc])"),
            headline=True,
        ),
        Row(
            f"ray request/response ({AGENTS} agents at once, cross-process)",
            "requests/s",
            best_many,
            peer=best_peer_many if peer is not None else None,
            peer_name="autogen-ext gRPC worker runtime",
            peer_version=peer_version("autogen-ext"),
            note=f"{AGENTS} agents, each sent its share of {calls} requests in turn, all at "
            f"once; ours: an actor (process) per agent; AutoGen's: one worker process; best "
            f"of {rounds} rounds",
        ),
        Row(
            f"fan-out workflow over 2 ray nodes (1 to {FAN} to 1)",
            "runs/s",
            best_fan,
            peer=best_local,
            peer_name="the same workflow in one process",
            note=f"placement='executor', actors spread over {len(nodes)} nodes; "
            f"{per_message_ms:.2f} ms more per executor invocation (one request, one "
            f"reply, its events); best of {rounds} rounds of {runs} runs",
            extra={"cost_per_message_ms": per_message_ms, "nodes": len(nodes)},
        ),
    ]
    return rows


if __name__ == "__main__" and sys.argv[1:2] == ["--autogen-peer"]:
    asyncio.run(_autogen_peer(int(sys.argv[2])))
