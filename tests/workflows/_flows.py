"""Workflows shared by the checkpoint tests and the fresh-process resume script.

Run as a script: ``python _flows.py <sqlite path> <checkpoint id> [<answers as JSON>]``
resumes the run from the checkpoint in this fresh process and prints its result as JSON.
"""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import dataclass

from cantata.core import register
from cantata.stores import SQLiteStore
from cantata.workflows import (
    Executor,
    StateStoreCheckpointStore,
    Workflow,
    WorkflowBuilder,
    WorkflowContext,
    executor,
    handler,
    response_handler,
)


@register(name="tests.workflows.flows.Word")
@dataclass
class Word:
    text: str
    index: int


@register(name="tests.workflows.flows.Question")
@dataclass
class Question:
    text: str


class Worker(Executor):
    @handler
    async def work(self, words: list[str], ctx: WorkflowContext[Word]) -> None:
        i = int(self.id[-1])
        word = words[i] if i < len(words) else ""
        ctx.log("seen").append(word)
        ctx.set_state(f"w{i}", word.upper())
        await ctx.send_message(Word(word.upper(), i))


def build_pipeline() -> Workflow:
    """split -> 3 workers -> join -> loop (3 rounds, counting in executor state) -> outputs."""

    @executor
    async def split(text: str, ctx: WorkflowContext[list[str]]) -> None:
        await ctx.send_message(text.split())

    @executor
    async def join(words: list[Word], ctx: WorkflowContext[str, str]) -> None:
        line = " ".join(w.text for w in sorted(words, key=lambda w: w.index))
        await ctx.yield_output(line)
        await ctx.send_message(line)

    @executor
    async def loop(line: str, ctx: WorkflowContext[str, str]) -> None:
        count = (ctx.get_executor_state() or 0) + 1
        ctx.set_executor_state(count)
        ctx.log("rounds", shared=True).append(count)
        state = [ctx.get_state(f"w{i}") for i in range(3)]
        await ctx.yield_output(f"round {count}: {line} {state}")
        if count < 3:
            await ctx.send_message(line + "!")

    workers = [Worker(f"worker{i}") for i in range(3)]
    return (
        WorkflowBuilder(split, name="pipeline")
        .add_fan_out_edges(split, workers)
        .add_fan_in_edges(workers, join)
        .add_edge(join, loop)
        .add_edge(loop, loop)
        .build()
    )


class Gate(Executor):
    @handler
    async def ask(self, amount: int, ctx: WorkflowContext[int]) -> None:
        ctx.set_executor_state(amount)
        await ctx.request_info(Question(f"pay {amount}?"))

    @response_handler
    async def answered(self, request: Question, answer: bool, ctx: WorkflowContext[int]) -> None:
        if answer:
            await ctx.send_message(ctx.get_executor_state())


def build_gate() -> Workflow:
    """gate (asks a person) -> pay (yields the amount paid)."""

    @executor
    async def pay(amount: int, ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output(f"paid {amount}")

    gate = Gate("gate")
    return WorkflowBuilder(gate, name="gate").add_edge(gate, pay).build()


async def _resume(path: str, checkpoint_id: str, answers: dict[str, object] | None) -> None:
    store = StateStoreCheckpointStore(SQLiteStore(path))
    workflow = build_gate() if answers is not None else build_pipeline()
    try:
        result = await workflow.resume(checkpoint_id, checkpoint_store=store, responses=answers)
        print(json.dumps({"status": result.status, "outputs": result.outputs}))
    finally:
        await store.close()


if __name__ == "__main__":
    given = json.loads(sys.argv[3]) if len(sys.argv) > 3 else None
    asyncio.run(_resume(sys.argv[1], sys.argv[2], given))
