"""Workflows: cantata against Microsoft Agent Framework workflows and LangGraph, same run.

Workloads (issue 5), each on one definition reused for every run:

- a chain of 10 executors, each adding 1 to a number (runs per second);
- a fan-out from one executor to 100 and a fan-in of their 100 results (runs per second);
- the time of one checkpoint of a run whose saved conversation holds 100, 1,000 and 10,000
  messages (goal: flat), on SQLite (the embedded default) and in memory.

Each framework is written its own idiomatic way: cantata with plain function executors
(the value returned is sent on), Agent Framework with `Executor` classes and async
`@handler` methods, LangGraph with `StateGraph` node functions. Rows marked "async
handlers" run cantata with the Agent Framework's style too (classes, async handlers,
`ctx.send_message`), to show that style's cost. Every cantata run goes through the actor
runtime (a fresh `LocalRuntime` per run, as `Workflow.run` does by default).

No ``from __future__ import annotations`` here: Agent Framework reads handler annotations
at class creation, and its classes are defined inside a function.
"""

import asyncio
import gc
import operator
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


async def _ours_batch(workflow: Workflow, expected: int, runs: int) -> Batch:
    result = await workflow.run(0)
    assert result.outputs == [expected], result.outputs

    async def batch() -> None:
        for _ in range(runs):
            await workflow.run(0)

    return batch, runs


# -- Microsoft Agent Framework --------------------------------------------------------------


def _af_workflows() -> tuple[Any, Any]:
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
            await ctx.yield_output(value)

    class Sum(AFExecutor):
        @af_handler
        async def join(self, values: list[int], ctx: AFContext[int, int]) -> None:
            await ctx.yield_output(sum(values))

    nodes = [Step(id=f"s{i}") for i in range(CHAIN)]
    chain = AFBuilder(start_executor=nodes[0]).add_chain([*nodes, Out(id="out")]).build()
    source = Step(id="source")
    workers = [Step(id=f"w{i}") for i in range(FAN)]
    fan = (
        AFBuilder(start_executor=source)
        .add_fan_out_edges(source, workers)
        .add_fan_in_edges(workers, Sum(id="join"))
        .build()
    )
    return chain, fan


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


def _lg_workflows() -> tuple[Any, Any]:
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
    return chain.compile(), fan.compile()


async def _lg_batch(graph: Any, state: dict[str, Any], key: str, expected: int, runs: int) -> Batch:
    result = await graph.ainvoke(dict(state))
    assert result[key] == expected, result

    async def batch() -> None:
        for _ in range(runs):
            await graph.ainvoke(dict(state))

    return batch, runs


async def _interleaved(batches: dict[str, Batch], rounds: int) -> dict[str, float]:
    """Runs per second of each contender, best of `rounds`, taken in turns.

    The machine is shared and its load changes by the second; timing the contenders one
    round each in turn (rather than all of one, then all of the next) exposes them all to
    the same conditions.
    """
    best: dict[str, float] = dict.fromkeys(batches, 0.0)
    for _ in range(rounds):
        for name, (batch, work) in batches.items():
            gc.collect()
            start = time.perf_counter()
            await batch()
            best[name] = max(best[name], work / (time.perf_counter() - start))
            await asyncio.sleep(0)
    return best


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


async def collect(quick: bool) -> list[Row]:
    """Rows for benchmarks/run.py."""
    chain_runs = 100 if quick else 300
    fan_runs = 10 if quick else 30
    rounds = 3 if quick else 7
    af_version = peer_version("agent-framework-core")
    lg_version = peer_version("langgraph")

    chain: dict[str, Batch] = {
        "ours": await _ours_batch(ours_chain(), CHAIN, chain_runs),
        "ours_async": await _ours_batch(ours_chain_async(), CHAIN, chain_runs),
    }
    fan: dict[str, Batch] = {
        "ours": await _ours_batch(ours_fan(), 2 * FAN, fan_runs),
        "ours_async": await _ours_batch(ours_fan_async(), 2 * FAN, fan_runs),
    }
    if af_version:
        af_chain, af_fan = _af_workflows()
        chain["af"] = await _af_batch(af_chain, CHAIN, max(chain_runs // 10, 10))
        fan["af"] = await _af_batch(af_fan, 2 * FAN, max(fan_runs // 10, 3))
    if lg_version:
        lg_chain, lg_fan = _lg_workflows()
        chain["lg"] = await _lg_batch(lg_chain, {"x": 0}, "x", CHAIN, max(chain_runs // 10, 10))
        fan["lg"] = await _lg_batch(
            lg_fan, {"x": 0, "results": []}, "total", 2 * FAN, max(fan_runs // 10, 3)
        )
    figures = {
        f"workflows: {CHAIN}-executor chain": await _interleaved(chain, rounds),
        f"workflows: fan-out to {FAN} + fan-in": await _interleaved(fan, rounds),
    }
    rows: list[Row] = []
    for title, got in figures.items():
        for key, peer, version in (
            ("af", "agent-framework", af_version),
            ("lg", "langgraph", lg_version),
        ):
            rows.append(
                Row(
                    name=title,
                    unit="runs/s",
                    ours=got["ours"],
                    peer=got.get(key),
                    peer_name=peer,
                    peer_version=version,
                    goal=">= 10x",
                )
            )
        rows.append(
            Row(
                name=f"{title} (async handlers)",
                unit="runs/s",
                ours=got["ours_async"],
                peer=got.get("af"),
                peer_name="agent-framework",
                peer_version=af_version,
                goal=">= 10x",
            )
        )
    rows.extend(await _checkpoint_rows(quick))
    return rows
