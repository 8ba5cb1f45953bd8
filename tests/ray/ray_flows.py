"""Workflows the Ray workflow tests run on both runtimes.

A top-level module of this folder (on the path of the driver and of every Ray worker), so
the executors pickle by reference and each worker registers the message types when it
unpickles an executor actor's factory. Builders take the placement, as in
tests/workflows/test_placement_wire.py, whose workflows these are.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from typing import Any

from cantata.agents import ChatAgent
from cantata.core import register
from cantata.models import ScriptedChatClient
from cantata.workflows import (
    AgentExecutor,
    AgentExecutorResponse,
    Executor,
    Workflow,
    WorkflowBuilder,
    WorkflowContext,
    WorkflowEvent,
    executor,
    handler,
    response_handler,
)


@register(name="tests.ray.flows.Item")
@dataclass
class Item:
    index: int
    value: int


@register(name="tests.ray.flows.Approve")
@dataclass
class Approve:
    amount: int


@register(name="tests.ray.flows.Tagged")
@dataclass(slots=True)
class Tagged(WorkflowEvent):
    text: str


@register(name="tests.ray.flows.Where")
@dataclass
class Where:
    executor_id: str
    pid: int


class Step(Executor):
    """Adds its index; the last one yields the sum and how much its log has seen."""

    def __init__(self, index: int, last: bool) -> None:
        super().__init__(f"s{index}")
        self.index, self.last = index, last

    @handler
    async def take(self, value: int, ctx: WorkflowContext[int, int]) -> None:
        ctx.log("seen").append(value)
        await ctx.add_event(Tagged(f"s{self.index}"))
        if self.last:
            await ctx.yield_output(value + len(ctx.log("seen")))
        else:
            await ctx.send_message(value + self.index)


def chain(placement: str, length: int = 6) -> Workflow:
    steps = [Step(i, i == length - 1) for i in range(length)]
    return WorkflowBuilder(steps[0], placement=placement).add_chain(steps).build()  # type: ignore[arg-type]


class Worker(Executor):
    def __init__(self, id: str, index: int) -> None:
        super().__init__(id)
        self.index = index

    @handler
    async def work(self, n: int, ctx: WorkflowContext[Item]) -> None:
        ctx.set_state(self.id, self.index * n)
        await ctx.send_message(Item(self.index, self.index * n))


@executor
async def split(n: int, ctx: WorkflowContext[int]) -> None:
    await ctx.send_message(n)


@executor
async def join(items: list[Item], ctx: WorkflowContext[None, int]) -> None:
    await ctx.yield_output(sum(item.value for item in items))


def fan(placement: str, width: int = 8) -> Workflow:
    workers = [Worker(f"w{i}", i) for i in range(width)]
    return (
        WorkflowBuilder(split, placement=placement)  # type: ignore[arg-type]
        .add_fan_out_edges(split, workers)
        .add_fan_in_edges(workers, join)
        .build()
    )


class Gate(Executor):
    @handler
    async def ask(self, amount: int, ctx: WorkflowContext[int]) -> None:
        ctx.set_executor_state(amount)
        await ctx.request_info(Approve(amount))

    @response_handler
    async def answered(self, request: Approve, ok: bool, ctx: WorkflowContext[int]) -> None:
        if ok:
            await ctx.send_message(ctx.get_executor_state() + request.amount)


@executor
async def pay(amount: int, ctx: WorkflowContext[None, str]) -> None:
    await ctx.yield_output(f"paid {amount}")


def gate(placement: str) -> Workflow:
    g = Gate("gate")
    return WorkflowBuilder(g, placement=placement).add_edge(g, pay).build()  # type: ignore[arg-type]


def _agent(name: str) -> ChatAgent:
    client = ScriptedChatClient(lambda msgs, opts: f"{name} saw {len(msgs)}", chunk_size=3)
    return ChatAgent(client, name=name)


@executor
async def transcript(response: AgentExecutorResponse, ctx: WorkflowContext[None, str]) -> None:
    await ctx.yield_output(" | ".join(m.text for m in response.full_conversation))


def agents(placement: str) -> Workflow:
    writer = AgentExecutor(_agent("writer"), id="writer")
    editor = AgentExecutor(_agent("editor"), id="editor")
    return (
        WorkflowBuilder(writer, placement=placement)  # type: ignore[arg-type]
        .add_chain([writer, editor, transcript])
        .build()
    )


class Boom(Executor):
    @handler
    async def take(self, value: int, ctx: WorkflowContext[None, int]) -> None:
        await ctx.add_event(Tagged("first"))
        raise ValueError("boom")


def boom(placement: str) -> Workflow:
    return WorkflowBuilder(Boom("boom"), placement=placement).build()  # type: ignore[arg-type]


class Slow(Executor):
    """Waits until a marker file exists (or is cancelled), then doubles its input."""

    def __init__(self, id: str, marker: str) -> None:
        super().__init__(id)
        self.marker = marker

    @handler
    async def take(self, value: int, ctx: WorkflowContext[int, int]) -> None:
        await ctx.add_event(Tagged(f"{self.id} started"))
        while not os.path.exists(self.marker):  # noqa: ASYNC110, ASYNC240 (a test's flag)
            await asyncio.sleep(0.05)
        await ctx.send_message(value * 2)


def slow(placement: str, marker: str) -> Workflow:
    first = Step(1, False)
    wait = Slow("wait", marker)
    last = Step(2, True)
    return (
        WorkflowBuilder(first, placement=placement)  # type: ignore[arg-type]
        .add_chain([first, wait, last])
        .build()
    )


class Pid(Executor):
    """Reports the process it runs in (to see a fan-out spread over workers)."""

    @handler
    async def take(self, n: int, ctx: WorkflowContext[Where]) -> None:
        await asyncio.sleep(0.05)
        await ctx.send_message(Where(self.id, os.getpid()))


@executor
async def gather(found: list[Where], ctx: WorkflowContext[None, list[Any]]) -> None:
    await ctx.yield_output(sorted((w.executor_id, w.pid) for w in found))


def spread(placement: str, width: int = 4) -> Workflow:
    pids = [Pid(f"p{i}") for i in range(width)]
    return (
        WorkflowBuilder(split, placement=placement)  # type: ignore[arg-type]
        .add_fan_out_edges(split, pids)
        .add_fan_in_edges(pids, gather)
        .build()
    )


class Charge(Executor):
    """Charges once (an effect that appends its idempotency key to a ledger file), then
    fails until a marker file exists: a resume must not charge again."""

    def __init__(self, id: str, ledger: str, marker: str) -> None:
        super().__init__(id)
        self.ledger, self.marker = ledger, marker

    @handler
    async def take(self, amount: int, ctx: WorkflowContext[None, str]) -> None:
        def charge(idempotency_key: str) -> str:
            with open(self.ledger, "a") as f:
                f.write(idempotency_key + "\n")
            return f"receipt {amount}"

        receipt = await ctx.effect("charge", charge)
        if not os.path.exists(self.marker):  # noqa: ASYNC240 (a test's flag)
            raise RuntimeError("crashed after the effect")
        await ctx.yield_output(receipt)


def charged(placement: str, ledger: str, marker: str) -> Workflow:
    first = Step(0, False)
    pay = Charge("charge", ledger, marker)
    return WorkflowBuilder(first, placement=placement).add_edge(first, pay).build()  # type: ignore[arg-type]
