"""Workflows: cantata against Microsoft Agent Framework workflows and LangGraph, same run.

Workloads, each on one definition reused for every run:

- a chain of 10 executors, each adding 1 to a number (runs per second);
- a fan-out from one executor to 100 and a fan-in of their 100 results (runs per second);
- a loop: one executor sending to itself 100 times (runs per second);
- 50 concurrent runs of one definition of the chain (batches of 50 per second);
- the time of one checkpoint of a run whose saved conversation holds 100, 1,000 and 10,000
  messages (goal: flat), on SQLite (the embedded default) and in memory.

The headline rows write cantata's executors as Agent Framework users write theirs:
`Executor` classes with `async` `@handler` methods calling `ctx.send_message` (the
"async class handlers" rows), beside Agent Framework in that same style and LangGraph with
`StateGraph` node functions, all measured in the same run. Other rows show cantata with
plain function executors (the value returned is sent on). Every cantata run goes through
the actor runtime (a fresh `LocalRuntime` per run, as `Workflow.run` does by default).
Agent Framework refuses concurrent runs of one workflow instance, so its side of the
concurrent row runs 50 instances built from one definition function.

No ``from __future__ import annotations`` here: Agent Framework reads handler annotations
at class creation, and its classes are defined inside a function.
"""

import asyncio
import gc
import operator
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypedDict

from _harness import Row, peer_version
from cantata.core import Message, register
from cantata.stores import SQLiteStore
from cantata.workflows import (
    Executor,
    InMemoryCheckpointStore,
    StateStoreCheckpointStore,
    Workflow,
    WorkflowBuilder,
    WorkflowCheckpoint,
    WorkflowContext,
    executor,
    handler,
    response_handler,
)

CHAIN = 10
FAN = 100
LOOP = 100
CONCURRENT = 50

Batch = tuple[Callable[[], Awaitable[None]], int]
"""A timed batch of runs, and how many runs it does."""


# -- cantata ----------------------------------------------------------------------------


def _step(value: int) -> int:
    return value + 1


class _Yield(Executor):
    """The last node of the async chain: adds 1 and yields the result."""

    @handler
    async def done(self, value: int, ctx: WorkflowContext[None, int]) -> None:
        await ctx.yield_output(value + 1)


def _sum(values: list[int], ctx: WorkflowContext[None, int]) -> None:
    ctx.yield_output(sum(values))


def _last(value: int, ctx: WorkflowContext[None, int]) -> None:
    ctx.yield_output(value + 1)


def ours_chain() -> Workflow:
    nodes = [executor(id=f"s{i}")(_step) for i in range(CHAIN - 1)]
    nodes.append(executor(id="last")(_last))
    return WorkflowBuilder(nodes[0]).add_chain(nodes).build()


def ours_fan() -> Workflow:
    source = executor(id="source")(_step)
    workers = [executor(id=f"w{i}")(_step) for i in range(FAN)]
    join = executor(id="join")(_sum)
    return (
        WorkflowBuilder(source)
        .add_fan_out_edges(source, workers)
        .add_fan_in_edges(workers, join)
        .build()
    )


class _AsyncStep(Executor):
    @handler
    async def step(self, value: int, ctx: WorkflowContext[int]) -> None:
        await ctx.send_message(value + 1)


class _AsyncSum(Executor):
    @handler
    async def join(self, values: list[int], ctx: WorkflowContext[None, int]) -> None:
        await ctx.yield_output(sum(values))


def ours_chain_async() -> Workflow:
    nodes: list[Executor] = [_AsyncStep(f"s{i}") for i in range(CHAIN - 1)]
    return WorkflowBuilder(nodes[0]).add_chain([*nodes, _Yield("last")]).build()


def ours_fan_async() -> Workflow:
    source = _AsyncStep("source")
    workers = [_AsyncStep(f"w{i}") for i in range(FAN)]
    return (
        WorkflowBuilder(source)
        .add_fan_out_edges(source, workers)
        .add_fan_in_edges(workers, _AsyncSum("join"))
        .build()
    )


class _AsyncLoop(Executor):
    """Sends to itself until the value reaches LOOP, then yields it."""

    @handler
    async def step(self, value: int, ctx: WorkflowContext[int, int]) -> None:
        if value < LOOP:
            await ctx.send_message(value + 1)
        else:
            await ctx.yield_output(value)


def ours_loop_async() -> Workflow:
    node = _AsyncLoop("loop")
    return WorkflowBuilder(node, max_supersteps=LOOP + 10).add_edge(node, node).build()


async def _ours_concurrent(workflow: Workflow, batches: int) -> Batch:
    """`batches` times, CONCURRENT runs of one definition at once."""
    results = await asyncio.gather(*(workflow.run(0) for _ in range(CONCURRENT)))
    assert all(r.outputs == [CHAIN] for r in results), results[0].outputs

    async def batch() -> None:
        for _ in range(batches):
            await asyncio.gather(*(workflow.run(0) for _ in range(CONCURRENT)))

    return batch, batches


async def _ours_batch(workflow: Workflow, expected: int, runs: int) -> Batch:
    result = await workflow.run(0)
    assert result.outputs == [expected], result.outputs

    async def batch() -> None:
        for _ in range(runs):
            await workflow.run(0)

    return batch, runs


# -- Microsoft Agent Framework --------------------------------------------------------------


def _af_workflows() -> tuple[Any, Any, Any, Callable[[], Any]]:
    """Agent Framework's chain, fan-out, loop, and a function that builds a new chain."""
    from agent_framework import Executor as AFExecutor
    from agent_framework import WorkflowBuilder as AFBuilder
    from agent_framework import WorkflowContext as AFContext
    from agent_framework import handler as af_handler

    class Step(AFExecutor):
        @af_handler
        async def step(self, value: int, ctx: AFContext[int]) -> None:
            await ctx.send_message(value + 1)

    class Out(AFExecutor):
        @af_handler
        async def done(self, value: int, ctx: AFContext[int, int]) -> None:
            await ctx.yield_output(value + 1)

    class Sum(AFExecutor):
        @af_handler
        async def join(self, values: list[int], ctx: AFContext[int, int]) -> None:
            await ctx.yield_output(sum(values))

    class Loop(AFExecutor):
        @af_handler
        async def step(self, value: int, ctx: AFContext[int, int]) -> None:
            if value < LOOP:
                await ctx.send_message(value + 1)
            else:
                await ctx.yield_output(value)

    def make_chain() -> Any:
        nodes = [Step(id=f"s{i}") for i in range(CHAIN - 1)]
        return AFBuilder(start_executor=nodes[0]).add_chain([*nodes, Out(id="out")]).build()

    chain = make_chain()
    source = Step(id="source")
    workers = [Step(id=f"w{i}") for i in range(FAN)]
    fan = (
        AFBuilder(start_executor=source)
        .add_fan_out_edges(source, workers)
        .add_fan_in_edges(workers, Sum(id="join"))
        .build()
    )
    node = Loop(id="loop")
    loop = AFBuilder(start_executor=node, max_iterations=LOOP + 10).add_edge(node, node).build()
    return chain, fan, loop, make_chain


async def _af_concurrent(make_chain: Callable[[], Any], batches: int) -> Batch:
    """CONCURRENT runs at once, each on its own instance (one instance refuses a second
    concurrent run), all built by one definition function."""
    instances = [make_chain() for _ in range(CONCURRENT)]
    results = await asyncio.gather(*(wf.run(0) for wf in instances))
    assert all(r.get_outputs() == [CHAIN] for r in results)

    async def batch() -> None:
        for _ in range(batches):
            await asyncio.gather(*(wf.run(0) for wf in instances))

    return batch, batches


async def _af_batch(workflow: Any, expected: int, runs: int) -> Batch:
    result = await workflow.run(0)
    assert result.get_outputs() == [expected], result.get_outputs()

    async def batch() -> None:
        for _ in range(runs):
            await workflow.run(0)

    return batch, runs


# -- LangGraph ----------------------------------------------------------------------------


class _ChainState(TypedDict):
    x: int


class _FanState(TypedDict):
    x: int
    results: Annotated[list[int], operator.add]
    total: int


def _lg_workflows() -> tuple[Any, Any, Any]:
    """LangGraph's chain, fan-out and loop (a node whose conditional edge leads back)."""
    from langgraph.graph import END, START, StateGraph

    chain = StateGraph(_ChainState)
    for i in range(CHAIN):
        chain.add_node(f"s{i}", lambda s: {"x": s["x"] + 1})
    chain.add_edge(START, "s0")
    for i in range(CHAIN - 1):
        chain.add_edge(f"s{i}", f"s{i + 1}")
    chain.add_edge(f"s{CHAIN - 1}", END)

    fan = StateGraph(_FanState)
    fan.add_node("source", lambda s: {"x": s["x"] + 1})
    fan.add_edge(START, "source")
    for i in range(FAN):
        fan.add_node(f"w{i}", lambda s: {"results": [s["x"] + 1]})
        fan.add_edge("source", f"w{i}")
    fan.add_node("join", lambda s: {"total": sum(s["results"])})
    fan.add_edge([f"w{i}" for i in range(FAN)], "join")
    fan.add_edge("join", END)

    loop = StateGraph(_ChainState)
    loop.add_node("loop", lambda s: {"x": s["x"] + 1})
    loop.add_edge(START, "loop")
    loop.add_conditional_edges("loop", lambda s: "loop" if s["x"] < LOOP else END)
    return chain.compile(), fan.compile(), loop.compile()


_LG_CONFIG = {"recursion_limit": LOOP + 10}


async def _lg_concurrent(graph: Any, batches: int) -> Batch:
    """CONCURRENT ainvoke calls of one compiled graph at once."""
    results = await asyncio.gather(*(graph.ainvoke({"x": 0}) for _ in range(CONCURRENT)))
    assert all(r["x"] == CHAIN for r in results)

    async def batch() -> None:
        for _ in range(batches):
            await asyncio.gather(*(graph.ainvoke({"x": 0}) for _ in range(CONCURRENT)))

    return batch, batches


async def _lg_batch(graph: Any, state: dict[str, Any], key: str, expected: int, runs: int) -> Batch:
    result = await graph.ainvoke(dict(state), _LG_CONFIG)
    assert result[key] == expected, result

    async def batch() -> None:
        for _ in range(runs):
            await graph.ainvoke(dict(state), _LG_CONFIG)

    return batch, runs


async def _interleaved(batches: dict[str, Batch], rounds: int) -> dict[str, float]:
    """Runs per second of each contender, the median of `rounds`, taken in turns.

    The machine is shared and its load changes by the second; timing the contenders one
    round each in turn (rather than all of one, then all of the next) exposes them all to
    the same conditions. The median, not the best: on the loaded 2-core machine the best
    of a few rounds is an extreme value, and one contender now and then hits a quiet moment
    the others do not (a peer once measured 2.5 times its usual figure in one run of five).
    """
    rates: dict[str, list[float]] = {name: [] for name in batches}
    for _ in range(rounds):
        for name, (batch, work) in batches.items():
            gc.collect()
            start = time.perf_counter()
            await batch()
            rates[name].append(work / (time.perf_counter() - start))
            await asyncio.sleep(0)
    return {name: statistics.median(got) for name, got in rates.items()}


# -- checkpoint cost -------------------------------------------------------------------


@register(name="benchmarks.workflows.Next")
@dataclass
class Next:
    """What the chat executor asks for between turns."""

    turn: int


class _Chat(Executor):
    """Holds a conversation in its run log; each answered request adds two messages."""

    @handler
    async def open(self, size: int, ctx: WorkflowContext) -> None:
        ctx.log("conversation").extend(
            [
                Message("user" if i % 2 == 0 else "assistant", f"message {i} " * 8)
                for i in range(size)
            ]
        )
        await ctx.request_info(Next(size))

    @response_handler
    async def turn(self, request: Next, answer: str, ctx: WorkflowContext) -> None:
        ctx.log("conversation").extend([Message("user", answer), Message("assistant", "ok")])
        await ctx.request_info(Next(request.turn + 2))


class _Timed(StateStoreCheckpointStore):
    """Times each `save` (one checkpoint) of the store it wraps."""

    def __init__(self, inner: StateStoreCheckpointStore) -> None:
        super().__init__(inner.store)
        self.times: list[float] = []

    async def save(self, checkpoint: WorkflowCheckpoint, **kwargs: Any) -> None:
        start = time.perf_counter()
        await super().save(checkpoint, **kwargs)
        self.times.append(time.perf_counter() - start)


async def _checkpoint_ms(size: int, store: StateStoreCheckpointStore, turns: int) -> float:
    """Best time of one checkpoint after a turn of a run that has saved `size` messages."""
    timed = _Timed(store)
    workflow = WorkflowBuilder(_Chat("chat")).build()
    result = await workflow.run(size, checkpoint_store=timed)
    timed.times.clear()
    for _ in range(turns):
        [request] = result.pending_requests
        result = await result.send_responses({request.request_id: "next"})
    return min(timed.times) * 1000


async def _langgraph_checkpoint_ms(size: int, turns: int) -> float:
    """LangGraph's InMemorySaver under the same chat: a state of `size` messages, one reply
    per turn; the figure is the most expensive checkpoint write of a turn (the one that saves
    the new messages), best of the turns."""
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.graph.message import add_messages

    class Chat(TypedDict):
        messages: Annotated[list[Any], add_messages]

    class TimedSaver(InMemorySaver):
        def __init__(self) -> None:
            super().__init__()
            self.times: list[float] = []

        async def aput(self, config: Any, checkpoint: Any, metadata: Any, versions: Any) -> Any:
            start = time.perf_counter()
            done = await super().aput(config, checkpoint, metadata, versions)
            self.times.append(time.perf_counter() - start)
            return done

    graph = StateGraph(Chat)
    graph.add_node("chat", lambda s: {"messages": [AIMessage("ok")]})
    graph.add_edge(START, "chat")
    graph.add_edge("chat", END)
    saver = TimedSaver()
    app = graph.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": f"bench-{size}"}}
    first = [HumanMessage(f"message {i} " * 8) for i in range(size)]
    await app.ainvoke({"messages": first}, config)
    per_turn: list[float] = []
    for _ in range(turns):
        saver.times.clear()
        await app.ainvoke({"messages": [HumanMessage("next")]}, config)
        per_turn.append(max(saver.times))
    return min(per_turn) * 1000


async def _checkpoint_rows(quick: bool) -> list[Row]:
    rows: list[Row] = []
    sizes = [100, 1_000, 10_000]
    turns = 5 if quick else 20
    lg_version = peer_version("langgraph")
    with tempfile.TemporaryDirectory() as tmp:
        for kind in ("sqlite", "memory"):
            figures: dict[int, float] = {}
            peers: dict[int, float | None] = {}
            for size in sizes:
                if kind == "sqlite":
                    store = StateStoreCheckpointStore(SQLiteStore(Path(tmp) / f"c{size}.db"))
                else:
                    store = InMemoryCheckpointStore()
                figures[size] = await _checkpoint_ms(size, store, turns)
                await store.close()
                peers[size] = None
                if kind == "memory" and lg_version:
                    peers[size] = await _langgraph_checkpoint_ms(size, max(turns // 4, 3))
            growth = figures[10_000] / figures[100]
            for size in sizes:
                rows.append(
                    Row(
                        name=f"workflows: one checkpoint, {size:,} messages saved ({kind})",
                        unit="ms",
                        ours=figures[size],
                        peer=peers[size],
                        peer_name="langgraph InMemorySaver" if peers[size] is not None else None,
                        peer_version=lg_version if peers[size] is not None else None,
                        higher_is_better=False,
                        goal="flat from 100 to 10,000",
                        note=f"10,000 vs 100: {growth:.2f}x",
                        extra={"growth_10000_vs_100": growth},
                    )
                )
    return rows


# -- collect -----------------------------------------------------------------------------


async def _contenders(quick: bool) -> dict[str, dict[str, Batch]]:
    """Every workload's timed batches: ours (plain functions), ours_async (classes with
    async handlers), af and lg when installed."""
    chain_runs, fan_runs = (100, 10) if quick else (300, 30)
    loop_runs, batches = (10, 2) if quick else (30, 6)
    work: dict[str, dict[str, Batch]] = {
        "chain": {
            "ours": await _ours_batch(ours_chain(), CHAIN, chain_runs),
            "ours_async": await _ours_batch(ours_chain_async(), CHAIN, chain_runs),
        },
        "fan": {
            "ours": await _ours_batch(ours_fan(), 2 * FAN, fan_runs),
            "ours_async": await _ours_batch(ours_fan_async(), 2 * FAN, fan_runs),
        },
        "loop": {"ours_async": await _ours_batch(ours_loop_async(), LOOP, loop_runs)},
        "concurrent": {"ours_async": await _ours_concurrent(ours_chain_async(), batches)},
    }
    if peer_version("agent-framework-core"):
        af_chain, af_fan, af_loop, make_chain = _af_workflows()
        work["chain"]["af"] = await _af_batch(af_chain, CHAIN, max(chain_runs // 10, 10))
        work["fan"]["af"] = await _af_batch(af_fan, 2 * FAN, max(fan_runs // 10, 3))
        work["loop"]["af"] = await _af_batch(af_loop, LOOP, max(loop_runs // 10, 3))
        work["concurrent"]["af"] = await _af_concurrent(make_chain, max(batches // 2, 1))
    if peer_version("langgraph"):
        lg_chain, lg_fan, lg_loop = _lg_workflows()
        runs = max(chain_runs // 10, 10)
        work["chain"]["lg"] = await _lg_batch(lg_chain, {"x": 0}, "x", CHAIN, runs)
        work["fan"]["lg"] = await _lg_batch(
            lg_fan, {"x": 0, "results": []}, "total", 2 * FAN, max(fan_runs // 10, 3)
        )
        work["loop"]["lg"] = await _lg_batch(lg_loop, {"x": 0}, "x", LOOP, max(loop_runs // 10, 3))
        work["concurrent"]["lg"] = await _lg_concurrent(lg_chain, max(batches // 2, 1))
    return work


_TITLES = {
    "chain": f"workflows: {CHAIN}-executor chain",
    "fan": f"workflows: fan-out to {FAN} + fan-in",
    "loop": f"workflows: loop, one executor sending to itself {LOOP} times",
    "concurrent": f"workflows: {CONCURRENT} concurrent runs of one {CHAIN}-executor chain",
}
_GOALS = {"chain": ">= 12x", "fan": ">= 12x", "loop": ">= 10x", "concurrent": ">= 10x"}


async def collect(quick: bool) -> list[Row]:
    """Rows for benchmarks/run.py: the async-class rows are the headline."""
    af_version = peer_version("agent-framework-core")
    lg_version = peer_version("langgraph")
    work = await _contenders(quick)
    rows: list[Row] = []
    for kind, batches in work.items():
        got = await _interleaved(batches, 3 if quick else 15)
        unit = "batches/s" if kind == "concurrent" else "runs/s"
        title = _TITLES[kind]
        for key, peer, version in (
            ("af", "agent-framework", af_version),
            ("lg", "langgraph", lg_version),
        ):
            rows.append(
                Row(
                    name=f"{title}, async class handlers",
                    unit=unit,
                    ours=got["ours_async"],
                    peer=got.get(key),
                    peer_name=peer,
                    peer_version=version,
                    goal=_GOALS[kind] if key == "af" else None,
                    headline=True,
                    note="peer: 50 instances (one refuses concurrent runs)"
                    if kind == "concurrent" and key == "af"
                    else None,
                )
            )
            if "ours" in got:
                rows.append(
                    Row(
                        name=f"{title}, plain function executors",
                        unit=unit,
                        ours=got["ours"],
                        peer=got.get(key),
                        peer_name=peer,
                        peer_version=version,
                    )
                )
    rows.extend(await _checkpoint_rows(quick))
    return rows
