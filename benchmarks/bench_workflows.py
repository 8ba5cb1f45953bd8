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

import operator
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypedDict

from _harness import Row, best_rate, peer_version
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


# -- cantata ----------------------------------------------------------------------------


def _step(value: int) -> int:
    return value + 1


class _Yield(Executor):
    """The last node: yields the result (async, as `yield_output` is)."""

    @handler
    async def done(self, value: int, ctx: WorkflowContext[None, int]) -> None:
        await ctx.yield_output(value)


def _sum(values: list[int]) -> int:
    return sum(values)


def ours_chain() -> Workflow:
    nodes = [executor(id=f"s{i}")(_step) for i in range(CHAIN)]
    out = _Yield("out")
    return WorkflowBuilder(nodes[0]).add_chain([*nodes, out]).build()


def ours_fan() -> Workflow:
    source = executor(id="source")(_step)
    workers = [executor(id=f"w{i}")(_step) for i in range(FAN)]
    join = executor(id="join")(_sum)
    out = _Yield("out")
    return (
        WorkflowBuilder(source)
        .add_fan_out_edges(source, workers)
        .add_fan_in_edges(workers, join)
        .add_edge(join, out)
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
    nodes: list[Executor] = [_AsyncStep(f"s{i}") for i in range(CHAIN)]
    return WorkflowBuilder(nodes[0]).add_chain([*nodes, _Yield("out")]).build()


def ours_fan_async() -> Workflow:
    source = _AsyncStep("source")
    workers = [_AsyncStep(f"w{i}") for i in range(FAN)]
    return (
        WorkflowBuilder(source)
        .add_fan_out_edges(source, workers)
        .add_fan_in_edges(workers, _AsyncSum("join"))
        .build()
    )


async def _ours_rate(workflow: Workflow, expected: int, runs: int) -> float:
    result = await workflow.run(0)
    assert result.outputs == [expected], result.outputs

    async def batch() -> None:
        for _ in range(runs):
            await workflow.run(0)

    return await best_rate(batch, runs, repeat=3)


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


async def _af_rate(workflow: Any, expected: int, runs: int) -> float:
    result = await workflow.run(0)
    assert result.get_outputs() == [expected], result.get_outputs()

    async def batch() -> None:
        for _ in range(runs):
            await workflow.run(0)

    return await best_rate(batch, runs, repeat=3)


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


async def _lg_rate(graph: Any, state: dict[str, Any], key: str, expected: int, runs: int) -> float:
    result = await graph.ainvoke(dict(state))
    assert result[key] == expected, result

    async def batch() -> None:
        for _ in range(runs):
            await graph.ainvoke(dict(state))

    return await best_rate(batch, runs, repeat=3)


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


async def _checkpoint_rows(quick: bool) -> list[Row]:
    rows: list[Row] = []
    sizes = [100, 1_000, 10_000]
    turns = 5 if quick else 20
    with tempfile.TemporaryDirectory() as tmp:
        for kind in ("sqlite", "memory"):
            figures: dict[int, float] = {}
            for size in sizes:
                if kind == "sqlite":
                    store = StateStoreCheckpointStore(SQLiteStore(Path(tmp) / f"c{size}.db"))
                else:
                    store = InMemoryCheckpointStore()
                figures[size] = await _checkpoint_ms(size, store, turns)
                await store.close()
            for size in sizes:
                rows.append(
                    Row(
                        name=f"workflows: one checkpoint, {size:,} messages saved ({kind})",
                        unit="ms",
                        ours=figures[size],
                        higher_is_better=False,
                        goal="flat from 100 to 10,000",
                        note=f"10,000 vs 100: {figures[10_000] / figures[100]:.2f}x",
                        extra={"growth_10000_vs_100": figures[10_000] / figures[100]},
                    )
                )
    return rows


# -- collect -----------------------------------------------------------------------------


async def collect(quick: bool) -> list[Row]:
    """Rows for benchmarks/run.py."""
    chain_runs = 200 if quick else 1_000
    fan_runs = 20 if quick else 100
    af_version = peer_version("agent-framework-core")
    lg_version = peer_version("langgraph")

    ours = {
        "chain": await _ours_rate(ours_chain(), CHAIN, chain_runs),
        "fan": await _ours_rate(ours_fan(), 2 * FAN, fan_runs),
        "chain_async": await _ours_rate(ours_chain_async(), CHAIN, chain_runs),
        "fan_async": await _ours_rate(ours_fan_async(), 2 * FAN, fan_runs),
    }
    af: dict[str, float | None] = {"chain": None, "fan": None}
    if af_version:
        af_chain, af_fan = _af_workflows()
        af["chain"] = await _af_rate(af_chain, CHAIN, max(chain_runs // 5, 20))
        af["fan"] = await _af_rate(af_fan, 2 * FAN, max(fan_runs // 5, 5))
    lg: dict[str, float | None] = {"chain": None, "fan": None}
    if lg_version:
        lg_chain, lg_fan = _lg_workflows()
        lg["chain"] = await _lg_rate(lg_chain, {"x": 0}, "x", CHAIN, max(chain_runs // 5, 20))
        lg["fan"] = await _lg_rate(
            lg_fan, {"x": 0, "results": []}, "total", 2 * FAN, max(fan_runs // 5, 5)
        )

    names = {
        "chain": f"workflows: {CHAIN}-executor chain",
        "fan": f"workflows: fan-out to {FAN} + fan-in",
    }
    rows: list[Row] = []
    for key, title in names.items():
        for peer, figures, version in (
            ("agent-framework", af, af_version),
            ("langgraph", lg, lg_version),
        ):
            rows.append(
                Row(
                    name=title,
                    unit="runs/s",
                    ours=ours[key],
                    peer=figures[key],
                    peer_name=peer,
                    peer_version=version,
                    goal=">= 10x",
                )
            )
        rows.append(
            Row(
                name=f"{title} (async handlers)",
                unit="runs/s",
                ours=ours[f"{key}_async"],
                peer=af[key],
                peer_name="agent-framework",
                peer_version=af_version,
                goal=">= 10x",
            )
        )
    rows.extend(await _checkpoint_rows(quick))
    return rows
