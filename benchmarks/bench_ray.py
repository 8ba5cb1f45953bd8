"""Ray runtime, rows from one local two-node cluster on 127.0.0.1:

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
   `RayRuntime`, its executors on both nodes, against the same workflow
   in one process (the default placement); reported with the cost per message (each
   executor invocation is one request and its result one reply; the events go through
   the directory to the driver's local subscriber, all over the direct streams).
4. many agents, against AutoGen's gRPC runtime hosting the same agents in two
   worker processes (its host gives an agent type to one worker, so there are two types,
   one on each) with its host in a third, all started by this run, driven from here:
   the first request to each of N new agents from one driver, 64 in flight (activations
   per second; also against the same activation on `LocalRuntime` in this process); the
   RSS of the processes that hold the agents, per idle agent (its growth over the
   activation; the fixed cost before it is reported apart); warm requests to agents
   picked at random among the N; and publication to S subscribers on the two nodes
   (deliveries per second; each subscriber is an agent type subscribed to the topic, as
   in AutoGen, and acknowledges the last publication of a round to a counting agent
   the driver asks). Agents are written as AutoGen users write them: `RoutedAgent`
   classes with async `@message_handler` methods. N is 100,000 and S 10,000 (quick:
   2,000 and 1,000); the environment can change them (see `_sizes`). On a `RayRuntime`
   whose agents share host processes (`hosts_per_node`, one per node unless set) ours run
   at N and S; on one that makes a process per agent, ours run at 20 agents and 10
   subscribers (the rows say so) while the peer runs at N and S. RSS is read from /proc
   (Linux).

The cluster is started once per process (head and one worker node, no dashboard, small
object stores, free ports) and shut down at exit; contenders take turns within each round
and the best round of each is kept. Run: `.venv/bin/python benchmarks/run.py --only ray`.
"""

from __future__ import annotations

import asyncio
import atexit
import gc
import inspect
import os
import random
import socket
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # stay on 127.0.0.1

import ray
from _harness import Row, peer_version
from cantata.core import register
from cantata.runtime import (
    AgentId,
    LocalRuntime,
    MessageContext,
    RoutedAgent,
    TopicId,
    message_handler,
    rpc,
    type_subscription,
)
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


def _pythonpath() -> list[str]:
    return [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]


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
        # This directory, and this driver's PYTHONPATH (a worktree's src: the same cantata).
        runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join([HERE, *_pythonpath()])}},
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
    from autogen_core import message_handler as ag_handler

    class AgCounter(AgRouted):
        """AutoGen's counter: the same work as `Counter`."""

        def __init__(self) -> None:
            super().__init__("counter")
            self.total = 0

        @ag_handler
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
        *try_get_known_serializers_for_type(AgNews),
        *try_get_known_serializers_for_type(AgHeard),
        *try_get_known_serializers_for_type(AgHowMany),
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


# -- 4: many agents ------------------------------------------------------------------------

IN_FLIGHT = 64
TYPES = ("tally_a", "tally_b")  # two agent types: AutoGen's host gives a type to one worker
PER_ACTOR_AGENTS = 20  # ours on a RayRuntime that makes an actor (a process) per agent
PER_ACTOR_SUBSCRIBERS = 10
BURSTS = 10  # publications per round of the publish row
ASK_TIMEOUT = 120.0


@dataclass(frozen=True)
class _Sizes:
    """The many-agent workloads. `agents` and `subscribers` are the peer's and
    `LocalRuntime`'s, and ours on a pool of hosts; on a runtime without `hosts_per_node`
    (an actor per agent) ours are capped, since each of ours is then a process."""

    agents: int
    subscribers: int
    warm: int
    hosts_per_node: int
    pooled: bool

    @property
    def ours_agents(self) -> int:
        return self.agents if self.pooled else min(self.agents, PER_ACTOR_AGENTS)

    @property
    def ours_subscribers(self) -> int:
        return self.subscribers if self.pooled else min(self.subscribers, PER_ACTOR_SUBSCRIBERS)


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = int(raw.replace("_", "").replace(",", ""))
    except ValueError:
        raise SystemExit(f"{name} must be a whole number, not {raw!r}") from None
    if value < 1:
        raise SystemExit(f"{name} must be 1 or more, not {value}")
    return value


def _sizes(quick: bool) -> _Sizes:
    """From the environment: CANTATA_BENCH_RAY_AGENTS (100,000; quick 2,000),
    CANTATA_BENCH_RAY_SUBSCRIBERS (10,000; quick 1,000), CANTATA_BENCH_RAY_WARM (warm
    requests, 20,000; quick 2,000), CANTATA_BENCH_RAY_HOSTS_PER_NODE (1: two host
    processes on the two nodes, as AutoGen's two workers)."""
    return _Sizes(
        agents=_env_int("CANTATA_BENCH_RAY_AGENTS", 2_000 if quick else 100_000),
        subscribers=_env_int("CANTATA_BENCH_RAY_SUBSCRIBERS", 1_000 if quick else 10_000),
        warm=_env_int("CANTATA_BENCH_RAY_WARM", 2_000 if quick else 20_000),
        hosts_per_node=_env_int("CANTATA_BENCH_RAY_HOSTS_PER_NODE", 1),
        pooled="hosts_per_node" in inspect.signature(RayRuntime).parameters,
    )


class Tally(RoutedAgent):
    """One of many agents, written as AutoGen users write one (a class, an async handler)."""

    def __init__(self) -> None:
        super().__init__()
        self.total = 0

    @message_handler
    async def on_add(self, message: Add, ctx: MessageContext) -> int:
        self.total += message.n
        return self.total


@register(name="bench.ray.News")
@dataclass
class News:
    ack_at: int  # a listener that has now heard this many acknowledges (once a round)


@register(name="bench.ray.Heard")
@dataclass
class Heard:
    pass


@register(name="bench.ray.HowMany")
@dataclass
class HowMany:
    pass


@type_subscription("news")
class Listener(RoutedAgent):
    """A subscriber; the last publication of a round it acknowledges to `Acks`."""

    def __init__(self) -> None:
        super().__init__()
        self.heard = 0

    @message_handler
    async def on_news(self, message: News, ctx: MessageContext) -> None:
        self.heard += 1
        if self.heard == message.ack_at:
            await self.publish_message(Heard(), TopicId("heard", "bench"))


@type_subscription("heard")
class Acks(RoutedAgent):
    """Counts the listeners' acknowledgements; the driver asks it how many."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    @message_handler
    async def on_heard(self, message: Heard, ctx: MessageContext) -> None:
        self.count += 1

    @message_handler
    async def on_how_many(self, message: HowMany, ctx: MessageContext) -> int:
        return self.count


Ask = Callable[[str, str], Awaitable[int]]


def _tally(i: int, prefix: str = "k") -> tuple[str, str]:
    return TYPES[i % 2], f"{prefix}{i}"


async def _lanes(n: int, call: Callable[[int], Awaitable[None]]) -> float:
    """`call(i)` for each i in range(n), `IN_FLIGHT` at a time; calls per second."""
    todo = iter(range(n))

    async def lane() -> None:
        for i in todo:
            await call(i)

    start = time.perf_counter()
    await asyncio.gather(*(lane() for _ in range(min(IN_FLIGHT, n))))
    return n / (time.perf_counter() - start)


async def _activate(n: int, ask: Ask, prefix: str = "k") -> float:
    """The first message to each of `n` new agents; activations per second."""

    async def call(i: int) -> None:
        got = await ask(*_tally(i, prefix))
        if got != 1:
            raise RuntimeError(f"agent {_tally(i, prefix)} was not new: it answered {got}")

    return await _lanes(n, call)


async def _warm(agents: int, requests: int, ask: Ask) -> float:
    """Requests to agents picked at random among `agents` live ones; requests per second."""
    rng = random.Random(24)
    picks = [rng.randrange(agents) for _ in range(requests)]

    async def call(i: int) -> None:
        got = await ask(*_tally(picks[i]))
        if got < 2:
            raise RuntimeError(f"agent {_tally(picks[i])} was not warm: it answered {got}")

    return await _lanes(requests, call)


async def _deliveries(
    publish: Callable[[int], Awaitable[None]],
    acked: Callable[[], Awaitable[int]],
    listeners: int,
    round_: int,
) -> float:
    """Round `round_` (from 1) of `BURSTS` publications to every listener, the last one
    acknowledged by each; deliveries per second until the acks are all counted."""
    target = listeners * round_
    start = time.perf_counter()
    for _ in range(BURSTS):
        await publish(BURSTS * round_)
    while (count := await acked()) < target:
        if time.perf_counter() - start > 600:
            raise RuntimeError(f"{count} of {target} listeners acknowledged in 600 s")
        await asyncio.sleep(0.005)
    if count != target:
        raise RuntimeError(f"{count} acknowledgements where {target} listeners listen")
    return BURSTS * listeners / (time.perf_counter() - start)


def _rss(pids: list[int]) -> int:
    """Resident bytes of these processes (Linux: /proc); a process gone counts nothing."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as status:
                for line in status:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
                        break
        except OSError:
            continue
    return total


def _pool(sizes: _Sizes) -> dict[str, Any]:
    """`RayRuntime` options: the pool's size where the runtime has a pool of hosts."""
    return {"hosts_per_node": sizes.hosts_per_node} if sizes.pooled else {}


def _holding(sizes: _Sizes) -> str:
    if sizes.pooled:
        return f"{sizes.hosts_per_node} host process(es) per node on 2 nodes"
    return "an actor (process) per agent"


def _spread(sizes: _Sizes) -> dict[str, Any]:
    """`RayRuntime` options that put agents on both nodes: a pool has hosts on each; an
    actor per agent needs Ray's SPREAD (which would override a pool's node affinity)."""
    return _pool(sizes) if sizes.pooled else {"actor_options": {"scheduling_strategy": "SPREAD"}}


async def _agent_pids(rt: RayRuntime) -> list[int]:
    """The processes that hold the runtime's agents: its hosts, on a pool of hosts; else
    each live agent's own actor. (Not the cluster's other workers: those of runtimes
    closed before come and go on their own, and one is worth a kilobyte an agent here.)"""
    placement = getattr(rt, "placement", None)
    if placement is not None:
        return sorted({int(host["pid"]) for host in await placement() if "pid" in host})
    return sorted({(await rt.where(agent))[1] for agent in await rt.live_agents()})


async def _local_activation(agents: int) -> dict[str, float]:
    """The activation row's workload on `LocalRuntime` in this process: the rate, and the
    bytes per idle agent (this process's RSS before and after)."""
    rt = LocalRuntime()
    for agent_type in TYPES:
        await rt.register_factory(agent_type, Tally)
    await rt.start()

    async def ask(agent_type: str, key: str) -> int:
        return int(await rt.send_message(Add(1), AgentId(agent_type, key), timeout=ASK_TIMEOUT))

    try:
        await _activate(IN_FLIGHT, ask, "w")
        gc.collect()
        before = _rss([os.getpid()])
        rate = await _activate(agents, ask)
        gc.collect()
        grown = _rss([os.getpid()]) - before
    finally:
        await rt.close()
    return {"activations": rate, "bytes_per_agent": grown / agents}


async def _ours_many(sizes: _Sizes) -> dict[str, float]:
    """Ours: activation, memory, warm requests and publication on the cluster."""
    _ensure_cluster()
    options = _spread(sizes)
    got: dict[str, float] = {}
    n = sizes.ours_agents
    async with RayRuntime(name=f"many{os.getpid()}", **options) as rt:
        for agent_type in TYPES:
            await rt.register_factory(agent_type, Tally)

        async def ask(agent_type: str, key: str) -> int:
            answer = await rt.send_message(Add(1), AgentId(agent_type, key), timeout=ASK_TIMEOUT)
            return int(answer)

        await _activate(IN_FLIGHT if sizes.pooled else 2, ask, "w")  # streams open
        before = _rss(await _agent_pids(rt))
        got["activations"] = await _activate(n, ask)
        pids = await _agent_pids(rt)
        got["bytes_per_agent"] = (_rss(pids) - before) / n
        got["fixed_rss"] = before
        got["processes"] = len(pids) + 1  # and this driver
        got["warm"] = await _warm(n, sizes.warm, ask)
    # The listeners' types are registered before the runtime starts: one push, not S.
    news = RayRuntime(name=f"news{os.getpid()}", **options)
    listeners = sizes.ours_subscribers
    for i in range(listeners):
        await news.register_factory(f"sub{i}", Listener)
    await news.register_factory("acks", Acks)
    async with news:
        topic = TopicId("news", "bench")

        async def publish(ack_at: int) -> None:
            await news.publish_message(News(ack_at), topic)

        async def acked() -> int:
            return int(await news.send_message(HowMany(), AgentId("acks", "bench")))

        await _deliveries(publish, acked, listeners, 1)  # activates them
        got["deliveries"] = max([await _deliveries(publish, acked, listeners, r) for r in (2, 3)])
        got["nodes"] = len(await _listener_nodes(news, listeners))
    return got


async def _listener_nodes(rt: RayRuntime, listeners: int) -> set[str]:
    placement = getattr(rt, "placement", None)
    if placement is not None:  # a pool of hosts: the nodes of the hosts that hold agents
        return {str(h.get("node")) for h in await placement() if h.get("agents", 0) > 0}
    return {(await rt.where(AgentId(f"sub{i}", "bench")))[0] for i in range(listeners)}


# AutoGen's side: the same agents and messages, its way.


@dataclass
class AgNews:
    ack_at: int


@dataclass
class AgHeard:
    pass


@dataclass
class AgHowMany:
    pass


try:
    from autogen_core import MessageContext as AgContext
    from autogen_core import RoutedAgent as AgRouted
    from autogen_core import TopicId as AgTopicId
    from autogen_core import message_handler as ag_handler
    from autogen_core import type_subscription as ag_type_subscription

    @ag_type_subscription(topic_type="news")
    class AgListener(AgRouted):
        def __init__(self) -> None:
            super().__init__("listener")
            self.heard = 0

        @ag_handler
        async def on_news(self, message: AgNews, ctx: AgContext) -> None:
            self.heard += 1
            if self.heard == message.ack_at:
                await self.publish_message(AgHeard(), AgTopicId("heard", "bench"))

    @ag_type_subscription(topic_type="heard")
    class AgAcks(AgRouted):
        def __init__(self) -> None:
            super().__init__("acks")
            self.count = 0

        @ag_handler
        async def on_heard(self, message: AgHeard, ctx: AgContext) -> None:
            self.count += 1

        @ag_handler
        async def on_how_many(self, message: AgHowMany, ctx: AgContext) -> AgTotal:
            return AgTotal(self.count)

except ImportError:
    AgListener = AgAcks = None  # type: ignore[assignment,misc]


async def _autogen_host(port: int) -> None:
    """A subprocess: AutoGen's host alone, until stdin closes."""
    from autogen_ext.runtimes.grpc import GrpcWorkerAgentRuntimeHost

    host = GrpcWorkerAgentRuntimeHost(address=f"127.0.0.1:{port}")
    host.start()
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await host.stop()


async def _autogen_worker(port: int, role: int, listeners: int) -> None:
    """A subprocess: one AutoGen worker with its tally type, its half of the listeners'
    types (and, the first, the acks' type), until stdin closes."""
    from autogen_ext.runtimes.grpc import GrpcWorkerAgentRuntime

    worker = GrpcWorkerAgentRuntime(host_address=f"127.0.0.1:{port}")
    worker.add_message_serializer(_autogen_serializers())
    await worker.start()
    await AgCounter.register(worker, TYPES[role], AgCounter)
    for i in range(role, listeners, 2):
        await AgListener.register(worker, f"sub{i}", AgListener)
    if role == 0:
        await AgAcks.register(worker, "acks", AgAcks)
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await worker.stop()


async def _spawn(*args: str) -> asyncio.subprocess.Process:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        SELF,
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        cwd=HERE,
    )
    assert proc.stdout is not None
    try:
        line = await asyncio.wait_for(proc.stdout.readline(), 900)
        if line.strip() != b"ready":
            raise RuntimeError(f"the AutoGen process {args} did not start (said {line!r})")
    except BaseException:
        proc.kill()
        await asyncio.wait_for(proc.wait(), 10)
        raise
    return proc


async def _end(proc: asyncio.subprocess.Process) -> None:
    assert proc.stdin is not None
    proc.stdin.close()
    try:
        await asyncio.wait_for(proc.wait(), 30)
    except TimeoutError:
        proc.kill()
        await asyncio.wait_for(proc.wait(), 10)


async def _autogen_many(sizes: _Sizes) -> dict[str, float]:
    """AutoGen's side: its host and two workers, each a process, and a client runtime in
    this process as the driver (4 processes), on the same workloads as `_ours_many`."""
    from autogen_core import AgentId as AgId
    from autogen_ext.runtimes.grpc import GrpcWorkerAgentRuntime

    port = _free_port()
    procs = [await _spawn("--autogen-host", str(port))]
    client: Any = None
    got: dict[str, float] = {}
    try:
        # Both at once: registering thousands of listener types takes AutoGen minutes.
        started = await asyncio.gather(
            *(
                _spawn("--autogen-worker", str(port), str(role), str(sizes.subscribers))
                for role in (0, 1)
            ),
            return_exceptions=True,
        )
        procs += [p for p in started if isinstance(p, asyncio.subprocess.Process)]
        for failed in started:
            if isinstance(failed, BaseException):
                raise failed
        workers = [p.pid for p in procs[1:]]
        client = GrpcWorkerAgentRuntime(host_address=f"127.0.0.1:{port}")
        client.add_message_serializer(_autogen_serializers())
        await client.start()

        async def ask(agent_type: str, key: str) -> int:
            answer = await asyncio.wait_for(
                client.send_message(AgAdd(1), AgId(agent_type, key)), ASK_TIMEOUT
            )
            return int(answer.total)

        await _activate(IN_FLIGHT, ask, "w")
        before = _rss(workers)
        got["host_rss_before"] = _rss([procs[0].pid])
        got["activations"] = await _activate(sizes.agents, ask)
        got["bytes_per_agent"] = (_rss(workers) - before) / sizes.agents
        got["fixed_rss"] = before
        got["host_rss"] = _rss([procs[0].pid])
        got["processes"] = len(procs) + 1  # and this driver
        got["warm"] = await _warm(sizes.agents, sizes.warm, ask)
        topic = AgTopicId("news", "bench")

        async def publish(ack_at: int) -> None:
            await asyncio.wait_for(client.publish_message(AgNews(ack_at), topic), ASK_TIMEOUT)

        async def acked() -> int:
            answer = await asyncio.wait_for(
                client.send_message(AgHowMany(), AgId("acks", "bench")), ASK_TIMEOUT
            )
            return int(answer.total)

        await _deliveries(publish, acked, sizes.subscribers, 1)
        got["deliveries"] = max(
            [await _deliveries(publish, acked, sizes.subscribers, r) for r in (2, 3)]
        )
    finally:
        if client is not None:
            await client.stop()
        for proc in reversed(procs):
            await _end(proc)
    return got


def _scale_rows(
    sizes: _Sizes, local: dict[str, float], ours: dict[str, float], peer: dict[str, float] | None
) -> list[Row]:
    version = peer_version("autogen-ext")
    peer_name = "autogen-ext gRPC worker runtime (host, 2 workers)"
    n, listeners = sizes.ours_agents, sizes.ours_subscribers
    pool = _holding(sizes)
    caveat = (
        ""
        if sizes.pooled
        else f"; OURS AT {n:,} AGENTS / {listeners:,} LISTENERS: this RayRuntime has no "
        "hosts_per_node (a process per agent)"
    )
    if peer is None:
        caveat += "; peer not installed (autogen-ext[grpc])"

    def theirs(key: str) -> float | None:
        return None if peer is None else peer[key]

    def mb(key: str, of: dict[str, float] | None) -> str:
        return "-" if of is None else f"{of[key] / 2**20:,.0f} MB"

    return [
        Row(
            f"ray: activate {sizes.agents:,} agents from one driver ({IN_FLIGHT} in flight)",
            "activations/s",
            ours["activations"],
            peer=theirs("activations"),
            peer_name=peer_name,
            peer_version=version,
            goal=">= 5,000 activations/s and >= 2x",
            note=f"the first request to each new agent, of two agent types; ours: {pool}; "
            f"AutoGen: one type on each worker{caveat}",
            extra={"ours_agents": n, "peer_agents": sizes.agents},
            headline=True,
        ),
        Row(
            f"ray: activate agents, against LocalRuntime ({IN_FLIGHT} in flight)",
            "activations/s",
            ours["activations"],
            peer=local["activations"],
            peer_name="the same activation on LocalRuntime (one process)",
            goal=">= 0.2x",
            note=f"goal: within 5x; LocalRuntime at {sizes.agents:,} agents, "
            f"{local['bytes_per_agent']:,.0f} bytes of RSS per idle agent{caveat}",
            extra={"local_agents": sizes.agents, **{f"local_{k}": v for k, v in local.items()}},
        ),
        Row(
            f"ray: memory per idle agent at {sizes.agents:,} agents (RSS of worker processes)",
            "bytes",
            ours["bytes_per_agent"],
            peer=theirs("bytes_per_agent"),
            peer_name=peer_name,
            peer_version=version,
            higher_is_better=False,
            goal="<= 1024 bytes",
            note=f"RSS growth of the processes holding agents over the activation, per agent; "
            f"fixed cost apart: ours {mb('fixed_rss', ours)} before it (then "
            f"{ours['processes'] - 1:.0f} processes holding agents, and the driver), "
            f"AutoGen's workers {mb('fixed_rss', peer)} (and its host "
            f"{mb('host_rss', peer)}; 4 processes with the driver){caveat}",
            extra={
                "ours_fixed_rss": ours["fixed_rss"],
                "ours_processes": ours["processes"],
                **({} if peer is None else {f"peer_{k}": v for k, v in peer.items()}),
            },
            headline=True,
        ),
        Row(
            f"ray: warm requests to random agents of {sizes.agents:,} ({IN_FLIGHT} in flight)",
            "requests/s",
            ours["warm"],
            peer=theirs("warm"),
            peer_name=peer_name,
            peer_version=version,
            goal=">= 2x",
            note=f"{sizes.warm:,} requests, each to an agent picked at random among the live "
            f"ones{caveat}",
            headline=True,
        ),
        Row(
            f"ray: publish to {sizes.subscribers:,} subscribers on two nodes",
            "deliveries/s",
            ours["deliveries"],
            peer=theirs("deliveries"),
            peer_name=peer_name,
            peer_version=version,
            goal=">= 20,000 deliveries/s",
            note=f"{BURSTS} publications a round, each to every subscriber (an agent type "
            "each, subscribed by type); each acknowledges the last one to a counting agent "
            f"(not counted as deliveries); best of 2 rounds after one to activate; ours on "
            f"{ours['nodes']:.0f} nodes, AutoGen's on its 2 workers{caveat}",
            headline=True,
        ),
    ]


async def collect(quick: bool) -> list[Row]:
    sizes = _sizes(quick)
    local = await _local_activation(sizes.agents)  # first: this process's RSS is its alone
    rows = await _small_rows(quick, sizes)
    peer = await _autogen_many(sizes) if _has_autogen_grpc() else None
    ours = await _ours_many(sizes)
    return [*rows, *_scale_rows(sizes, local, ours, peer)]


async def _small_rows(quick: bool, sizes: _Sizes) -> list[Row]:
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
            RayRuntime(name=f"bench{os.getpid()}", **_pool(sizes)) as rt,
            RayRuntime(name=f"calls{os.getpid()}", direct=False, **_pool(sizes)) as by_calls,
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
        async with RayRuntime(name=f"fan{os.getpid()}", **_spread(sizes)) as rt:
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
            f"once; ours: {_holding(sizes)}; AutoGen's: one worker process; best of "
            f"{rounds} rounds",
        ),
        Row(
            f"fan-out workflow over 2 ray nodes (1 to {FAN} to 1)",
            "runs/s",
            best_fan,
            peer=best_local,
            peer_name="the same workflow in one process",
            note=f"placement='executor', executors on {len(nodes)} nodes; "
            f"{per_message_ms:.2f} ms more per executor invocation (one request, one "
            f"reply, its events); best of {rounds} rounds of {runs} runs",
            extra={"cost_per_message_ms": per_message_ms, "nodes": len(nodes)},
        ),
    ]
    return rows


if __name__ == "__main__" and sys.argv[1:2] == ["--autogen-peer"]:
    asyncio.run(_autogen_peer(int(sys.argv[2])))
elif __name__ == "__main__" and sys.argv[1:2] == ["--autogen-host"]:
    asyncio.run(_autogen_host(int(sys.argv[2])))
elif __name__ == "__main__" and sys.argv[1:2] == ["--autogen-worker"]:
    asyncio.run(_autogen_worker(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])))
