"""A durable run to kill: python kill_child.py STORE LEDGER [--pause SECONDS].

STORE is a SQLite path or a postgresql:// DSN (``#prefix`` after it names the tables).
Starts run ``k`` or resumes it from its last checkpoint, and prints ``ready`` (stores open)
then its outputs as JSON.
Three rounds of split -> fan-out to a, b, c (each an effect on an outside ledger) -> fan-in
join (state) -> a tool-calling agent (its model and its effect tool noted in the ledger)
-> ledger_out (state, the output) make 12 supersteps. The ledger gets ``start <key>`` when
an effect's function begins and ``kept <key>`` once ctx.effect has returned (its result
journaled), so a start after a kept line is an effect repeated after its completion was
journaled; ``model`` at each model call.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
from typing import Any

from cantata.agents import ChatAgent
from cantata.core import Message
from cantata.models import ScriptedChatClient, tool_call
from cantata.stores import PostgresStore, SQLiteStore, StateStore
from cantata.tools import tool
from cantata.workflows import (
    AgentExecutor,
    AgentExecutorResponse,
    StateStoreCheckpointStore,
    WorkflowBuilder,
    WorkflowContext,
    executor,
)

ROUNDS = 3
RUN_ID = "k"


def build(ledger: str, pause: float) -> Any:
    """The workflow; every effect appends to `ledger` (the outside system)."""

    def note(line: str) -> None:
        with open(ledger, "a", encoding="utf-8") as f:
            f.write(line + "\n")

    async def outside(item: str, *, idempotency_key: str) -> str:
        note(f"start {idempotency_key}")
        await asyncio.sleep(pause)
        return f"{item}={hashlib.sha256(idempotency_key.encode()).hexdigest()[:8]}"

    @executor
    async def split(r: int, ctx: WorkflowContext[int]) -> None:
        await asyncio.sleep(pause)
        ctx.send_message(r)

    def worker(name: str) -> Any:
        @executor(id=name)
        async def work(r: int, ctx: WorkflowContext[str]) -> None:
            key = ctx.idempotency_key("work")
            receipt = await ctx.effect("work", outside, f"{name}{r}")
            note(f"kept {key}")
            await asyncio.sleep(pause * 5)  # the window between an effect and the checkpoint
            ctx.send_message(receipt)

        return work

    @executor
    async def join(receipts: list[str], ctx: WorkflowContext[Any]) -> None:
        ctx.set_state("seen", [*ctx.get_state("seen", []), *receipts])
        rounds = ctx.get_state("rounds", 0) + 1
        ctx.set_state("rounds", rounds)
        ctx.send_message(f"file round {rounds}", "clerk")
        if rounds < ROUNDS:
            ctx.send_message(rounds, "split")

    @tool(effect=True)
    async def file_note(text: str) -> str:
        """File a note (an effect: the ledger sees each call)."""
        note(f"start tool:{text}")
        await asyncio.sleep(pause)
        return hashlib.sha256(text.encode()).hexdigest()[:8]

    def model(messages: list[Message], options: Any) -> Any:
        note("model")
        last = messages[-1]
        if last.role != "tool":
            return Message("assistant", [tool_call("file_note", {"text": last.text})])
        return f"filed {last.contents[-1].result}"  # type: ignore[attr-defined]

    clerk = AgentExecutor(
        ChatAgent(ScriptedChatClient(model), name="clerk", tools=[file_note]),
        output_response=False,
    )

    @executor
    async def ledger_out(answer: AgentExecutorResponse, ctx: WorkflowContext[None, Any]) -> None:
        notes = [*ctx.get_state("notes", []), answer.agent_response.text]
        ctx.set_state("notes", notes)
        if len(notes) == ROUNDS:
            ctx.yield_output({"seen": ctx.get_state("seen"), "notes": notes})

    workers = [worker(n) for n in ("a", "b", "c")]
    return (
        WorkflowBuilder(split, max_supersteps=50)
        .add_fan_out_edges(split, workers)
        .add_fan_in_edges(workers, join)
        .add_edge(join, split)
        .add_edge(join, clerk)
        .add_edge(clerk, ledger_out)
        .build()
    )


def open_store(where: str) -> StateStore:
    """SQLite for a path, PostgreSQL for a DSN (tables under the prefix after ``#``)."""
    if where.startswith("postgresql://"):
        dsn, _, prefix = where.partition("#")
        return PostgresStore(dsn, table_prefix=prefix or "cantata_")
    return SQLiteStore(where)


async def main(where: str, ledger: str, pause: float) -> None:
    store = StateStoreCheckpointStore(open_store(where))
    try:
        wf = build(ledger, pause)
        found = await store.list_checkpoints(run_id=RUN_ID)
        print("ready", flush=True)  # the harness's kill clock starts here
        if found:
            result = await wf.resume(found[-1].checkpoint_id, checkpoint_store=store)
        else:
            result = await wf.run(0, checkpoint_store=store, run_id=RUN_ID)
        print(json.dumps(result.outputs), flush=True)
    finally:
        await store.close()


if __name__ == "__main__":
    args = sys.argv[1:]
    pause = float(args[args.index("--pause") + 1]) if "--pause" in args else 0.02
    asyncio.run(main(args[0], args[1], pause))
