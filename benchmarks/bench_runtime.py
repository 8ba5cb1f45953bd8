"""Actor runtime: cantata's LocalRuntime against autogen-core's SingleThreadedAgentRuntime
on the same workloads in the same run, and against bare asyncio as the floor.

Workloads: publish to a topic with 10 subscribers (deliveries per second;
the headline row); direct request/response to one agent; the first message to 20,000 new
keyed agents (rate, and memory per idle agent measured with tracemalloc). Agents are
written the way autogen-core users write them: `RoutedAgent` classes with an `__init__`
and `async def` `@message_handler` methods (a variant with `@event` and `__slots__` shows
what that buys). Within one run (one `collect`) each figure is the best of a few rounds,
the contenders taking turns in each round; `run.py` repeats runs and reports the median
and the worst. Setup (creating and starting a runtime) is outside the timed part.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from _harness import Row, peer_version
from cantata.runtime import (
    AgentId,
    LocalRuntime,
    MessageContext,
    RoutedAgent,
    TopicId,
    TypeSubscription,
    event,
    message_handler,
)

SUBSCRIBERS = 10


@dataclass
class Ping:
    n: int


# -- cantata ----------------------------------------------------------------------------


class _Echo(RoutedAgent):
    def __init__(self) -> None:
        super().__init__()

    @message_handler
    async def on_ping(self, message: Ping, ctx: MessageContext) -> int:
        return message.n


class _Subscriber(RoutedAgent):
    """A subscriber as autogen-core users write one."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    @message_handler
    async def on_ping(self, message: Ping, ctx: MessageContext) -> None:
        self.count += 1


class _Sink(RoutedAgent):
    """The same, tuned: broadcast-only handler, no instance dict."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0

    @event
    async def on_ping(self, message: Ping, ctx: MessageContext) -> None:
        self.count += 1


async def _ours_rpc(n: int) -> float:
    runtime = LocalRuntime()
    await runtime.register_factory("echo", _Echo)
    await runtime.start()
    target = AgentId("echo", "a")
    await runtime.send_message(Ping(-1), target)
    start = time.perf_counter()
    for i in range(n):
        await runtime.send_message(Ping(i), target)
    elapsed = time.perf_counter() - start
    await runtime.close()
    return elapsed


async def _ours_publish(n: int, agent_class: type[_Subscriber | _Sink]) -> float:
    runtime = LocalRuntime()
    for s in range(SUBSCRIBERS):
        await runtime.register_factory(f"sink{s}", agent_class)
        await runtime.add_subscription(TypeSubscription("bench", f"sink{s}"))
    await runtime.start()
    topic = TopicId("bench", "k")
    await runtime.publish_message(Ping(-1), topic)  # creates the subscribers
    start = time.perf_counter()
    for i in range(n):
        await runtime.publish_message(Ping(i), topic)
    await runtime.stop_when_idle()
    elapsed = time.perf_counter() - start
    sinks = [await _live(runtime, AgentId(f"sink{s}", "k")) for s in range(SUBSCRIBERS)]
    if any(s.count != n + 1 for s in sinks):
        raise RuntimeError("cantata lost deliveries in the publish benchmark")
    await runtime.close()
    return elapsed


async def _live(runtime: LocalRuntime, agent_id: AgentId) -> _Subscriber | _Sink:
    agent = await runtime.get_agent(agent_id)
    assert isinstance(agent, _Subscriber | _Sink)
    return agent


async def _ours_new_agents(n: int) -> tuple[float, LocalRuntime]:
    runtime = LocalRuntime()
    await runtime.register_factory("worker", _Echo)
    await runtime.start()
    keys = [f"k{i}" for i in range(n)]
    start = time.perf_counter()
    for i, key in enumerate(keys):
        await runtime.send_message(Ping(i), AgentId("worker", key))
    return time.perf_counter() - start, runtime


# -- autogen-core -----------------------------------------------------------------------


try:
    import autogen_core as ac
except ImportError:  # the peer is optional: rows then carry our figures only
    ac = None


def _autogen() -> dict[str, Any] | None:
    if ac is None:
        return None

    class Echo(ac.RoutedAgent):
        def __init__(self) -> None:
            super().__init__("echo")

        @ac.message_handler
        async def on_ping(self, message: Ping, ctx: ac.MessageContext) -> int:
            return message.n

    class Sink(ac.RoutedAgent):
        def __init__(self) -> None:
            super().__init__("sink")
            self.count = 0

        @ac.message_handler
        async def on_ping(self, message: Ping, ctx: ac.MessageContext) -> None:
            self.count += 1

    return {"Echo": Echo, "Sink": Sink}


async def _autogen_rpc(peer: dict[str, Any], n: int) -> float:
    runtime = ac.SingleThreadedAgentRuntime()
    await peer["Echo"].register(runtime, "echo", peer["Echo"])
    runtime.start()
    target = ac.AgentId("echo", "a")
    await runtime.send_message(Ping(-1), target)
    start = time.perf_counter()
    for i in range(n):
        await runtime.send_message(Ping(i), target)
    elapsed = time.perf_counter() - start
    await runtime.stop()
    return elapsed


async def _autogen_publish(peer: dict[str, Any], n: int) -> float:
    runtime = ac.SingleThreadedAgentRuntime()
    for s in range(SUBSCRIBERS):
        await peer["Sink"].register(runtime, f"sink{s}", peer["Sink"])
        await runtime.add_subscription(ac.TypeSubscription("bench", f"sink{s}"))
    runtime.start()
    topic = ac.TopicId("bench", "k")
    await runtime.publish_message(Ping(-1), topic)
    await runtime.stop_when_idle()
    runtime.start()
    start = time.perf_counter()
    for i in range(n):
        await runtime.publish_message(Ping(i), topic)
    await runtime.stop_when_idle()
    elapsed = time.perf_counter() - start
    for s in range(SUBSCRIBERS):
        sink = await runtime.try_get_underlying_agent_instance(ac.AgentId(f"sink{s}", "k"))
        if sink.count != n + 1:
            raise RuntimeError("autogen-core lost deliveries in the publish benchmark")
    return elapsed


async def _autogen_new_agents(peer: dict[str, Any], n: int) -> tuple[float, Any]:
    runtime = ac.SingleThreadedAgentRuntime()
    await peer["Echo"].register(runtime, "worker", peer["Echo"])
    runtime.start()
    keys = [f"k{i}" for i in range(n)]
    start = time.perf_counter()
    for i, key in enumerate(keys):
        await runtime.send_message(Ping(i), ac.AgentId("worker", key))
    return time.perf_counter() - start, runtime


# -- bare asyncio: the floor ------------------------------------------------------------


async def _queue_rpc(n: int) -> float:
    queue: asyncio.Queue[tuple[Ping, asyncio.Future[int]]] = asyncio.Queue()

    async def serve() -> None:
        while True:
            message, reply = await queue.get()
            reply.set_result(message.n)

    server = asyncio.ensure_future(serve())
    loop = asyncio.get_running_loop()
    start = time.perf_counter()
    for i in range(n):
        reply: asyncio.Future[int] = loop.create_future()
        queue.put_nowait((Ping(i), reply))
        await reply
    elapsed = time.perf_counter() - start
    server.cancel()
    await asyncio.gather(server, return_exceptions=True)
    return elapsed


async def _queue_publish(n: int) -> float:
    queues: list[asyncio.Queue[Ping | None]] = [asyncio.Queue() for _ in range(SUBSCRIBERS)]
    counts = [0] * SUBSCRIBERS

    async def consume(index: int) -> None:
        queue = queues[index]
        while await queue.get() is not None:
            counts[index] += 1

    consumers = [asyncio.ensure_future(consume(i)) for i in range(SUBSCRIBERS)]
    start = time.perf_counter()
    for i in range(n):
        message = Ping(i)
        for queue in queues:
            queue.put_nowait(message)
        await asyncio.sleep(0)
    for queue in queues:
        queue.put_nowait(None)
    await asyncio.gather(*consumers)
    return time.perf_counter() - start


# -- measurement --------------------------------------------------------------------------


async def _interleaved(
    runs: dict[str, Callable[[], Awaitable[float]]], repeat: int
) -> dict[str, float]:
    """Best seconds of each contender, running them in turn each round (in alternating
    order) so that load from other processes falls on all of them alike."""
    best = dict.fromkeys(runs, float("inf"))
    names = list(runs)
    for round_ in range(repeat):
        for name in names if round_ % 2 == 0 else reversed(names):
            gc.collect()
            best[name] = min(best[name], await runs[name]())
    return best


async def _memory_per_agent(run: Callable[[], Awaitable[tuple[float, Any]]], n: int) -> float:
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        _, runtime = await run()
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    await _stop(runtime)
    return (after - before) / n


async def _elapsed(run: Callable[[], Awaitable[tuple[float, Any]]]) -> float:
    elapsed, runtime = await run()
    await _stop(runtime)
    return elapsed


async def _stop(runtime: Any) -> None:
    """Stop a runtime left running for a measurement, so no task outlives its loop."""
    with contextlib.suppress(RuntimeError):
        await runtime.stop()


async def collect(quick: bool) -> list[Row]:
    """One run: the workloads for cantata, autogen-core and bare asyncio."""
    n_rpc, n_pub, n_new, rounds = (2_000, 500, 2_000, 2) if quick else (20_000, 3_000, 20_000, 3)
    peer = _autogen()
    version = peer_version("autogen-core")
    name = "autogen-core SingleThreadedAgentRuntime"

    deliveries = n_pub * SUBSCRIBERS
    rpc: dict[str, Callable[[], Awaitable[float]]] = {
        "ours": lambda: _ours_rpc(n_rpc),
        "floor": lambda: _queue_rpc(n_rpc),
    }
    pub: dict[str, Callable[[], Awaitable[float]]] = {
        "ours": lambda: _ours_publish(n_pub, _Subscriber),
        "tuned": lambda: _ours_publish(n_pub, _Sink),
        "floor": lambda: _queue_publish(n_pub),
    }
    new: dict[str, Callable[[], Awaitable[float]]] = {
        "ours": lambda: _elapsed(lambda: _ours_new_agents(n_new)),
    }
    if peer is not None:
        rpc["peer"] = lambda: _autogen_rpc(peer, n_rpc)
        pub["peer"] = lambda: _autogen_publish(peer, n_pub)
        new["peer"] = lambda: _elapsed(lambda: _autogen_new_agents(peer, n_new))
    pub_s, rpc_s, new_s = [await _interleaved(runs, rounds) for runs in (pub, rpc, new)]
    ours_mem = await _memory_per_agent(lambda: _ours_new_agents(n_new), n_new)
    peer_mem = None
    if peer is not None:
        peer_mem = await _memory_per_agent(lambda: _autogen_new_agents(peer, n_new), n_new)

    def rate(work: int, seconds: dict[str, float], who: str) -> float | None:
        return work / seconds[who] if who in seconds else None

    def vs_peer(row_name: str, unit: str, ours: float, theirs: float | None, goal: str) -> Row:
        return Row(
            row_name,
            unit,
            ours,
            peer=theirs,
            peer_name=name if peer is not None else None,
            peer_version=version,
            goal=goal,
        )

    publish = f"runtime: publish to {SUBSCRIBERS} subscribers"
    headline = vs_peer(
        f"{publish} (RoutedAgent, async @message_handler)",
        "deliveries/s",
        deliveries / pub_s["ours"],
        rate(deliveries, pub_s, "peer"),
        ">= 12x",
    )
    headline.headline = True
    return [
        headline,
        Row(
            f"{publish} (RoutedAgent, async @message_handler) vs floor",
            "deliveries/s",
            deliveries / pub_s["ours"],
            peer=rate(deliveries, pub_s, "floor"),
            peer_name=f"{SUBSCRIBERS} asyncio.Queue consumers",
            goal=">= 0.9x",
            headline=True,
        ),
        vs_peer(
            f"{publish} (@event, __slots__)",
            "deliveries/s",
            deliveries / pub_s["tuned"],
            rate(deliveries, pub_s, "peer"),
            ">= 12x",
        ),
        vs_peer(
            "runtime: request/response",
            "req/s",
            n_rpc / rpc_s["ours"],
            rate(n_rpc, rpc_s, "peer"),
            ">= 10x",
        ),
        Row(
            "runtime: request/response vs floor",
            "req/s",
            n_rpc / rpc_s["ours"],
            peer=rate(n_rpc, rpc_s, "floor"),
            peer_name="asyncio.Queue + Future",
            goal=">= 0.33x (within 3x)",
        ),
        vs_peer(
            f"runtime: first message to {n_new:,} new agents",
            "agents/s",
            n_new / new_s["ours"],
            rate(n_new, new_s, "peer"),
            ">= 20x",
        ),
        Row(
            "runtime: memory per idle agent",
            "bytes",
            ours_mem,
            peer=peer_mem,
            peer_name=name if peer is not None else None,
            peer_version=version,
            higher_is_better=False,
            goal="<= 1024 bytes",
            note="tracemalloc, runtime-held memory after the first message, per agent",
        ),
    ]
