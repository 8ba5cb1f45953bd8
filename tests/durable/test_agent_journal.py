"""Inside a durable workflow run, an agent's model answers and its effect tools' results
are journaled: a superstep that fails and is resumed asks the model nothing again and
calls no effect tool again; outside a durable run nothing changes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from cantata.agents import ChatAgent
from cantata.core import Message, WorkflowError
from cantata.models import ScriptedChatClient, tool_call
from cantata.tools import tool
from cantata.workflows import (
    AgentExecutor,
    EffectJournal,
    InMemoryCheckpointStore,
    WorkflowBuilder,
    WorkflowContext,
    executor,
)


def billing_agent(charged: list[int], looked: list[str]) -> tuple[ChatAgent, ScriptedChatClient]:
    @tool(effect=True)
    def charge(cents: int) -> str:
        """Charge the card."""
        charged.append(cents)
        return f"receipt-{len(charged)}"

    @tool
    def look_up(name: str) -> str:
        """Find a customer (no side effect)."""
        looked.append(name)
        return f"{name} is a customer"

    def answer(messages: list[Message], options: Any) -> Any:
        results = [
            c for m in messages for c in m.contents if type(c).__name__ == "FunctionResultContent"
        ]
        if not results:
            return Message(
                "assistant",
                [tool_call("look_up", {"name": "ada"}), tool_call("charge", {"cents": 500})],
            )
        return "charged: " + ", ".join(str(r.result) for r in results)

    client = ScriptedChatClient(answer)
    return ChatAgent(client, name="biller", tools=[look_up, charge]), client


def flow(agent: ChatAgent, crash: list[bool], store: Any = None) -> Any:
    """start -> [the agent, bomb]; bomb fails the superstep once the agent's two answers
    and its charge are journaled (the process dying before the boundary)."""

    @executor
    def start(text: str, ctx: WorkflowContext[str]) -> None:
        ctx.send_message(text)

    @executor
    async def bomb(text: str, ctx: WorkflowContext[None]) -> None:
        if not (crash and crash.pop()):
            return
        journal = EffectJournal(store.store)
        for _ in range(5000):  # bounded: the agent journals within a few loop turns
            if len(await journal.keys(ctx.run_id)) >= 3:
                break
            await asyncio.sleep(0.001)
        raise ConnectionResetError("the process died in this superstep")

    biller = AgentExecutor(agent)
    return WorkflowBuilder(start).add_fan_out_edges(start, [biller, bomb]).build()


async def test_a_resumed_superstep_asks_the_model_and_charges_nothing_again() -> None:
    charged: list[int] = []
    looked: list[str] = []
    agent, client = billing_agent(charged, looked)
    store = InMemoryCheckpointStore()
    wf = flow(agent, [True], store)
    with pytest.raises(WorkflowError, match="died"):
        await wf.run("bill ada", checkpoint_store=store, run_id="r")
    assert len(client.calls) == 2 and charged == [500] and looked == ["ada"]
    last = (await store.list_checkpoints(run_id="r"))[-1]
    result = await wf.resume(last.checkpoint_id, checkpoint_store=store)
    assert [r.text for r in result.outputs] == ["charged: ada is a customer, receipt-1"]
    assert len(client.calls) == 2  # both answers came from the journal
    assert charged == [500]  # the effect tool ran once
    assert looked == ["ada", "ada"]  # a tool that is not an effect runs again


async def test_streamed_resume_replays_the_journaled_answer() -> None:
    charged: list[int] = []
    agent, client = billing_agent(charged, [])
    store = InMemoryCheckpointStore()
    wf = flow(agent, [True], store)
    with pytest.raises(WorkflowError):
        await wf.run("bill", checkpoint_store=store, run_id="s")
    last = (await store.list_checkpoints(run_id="s"))[-1]
    texts = []
    async for event in wf.resume_stream(last.checkpoint_id, checkpoint_store=store):
        if type(event).__name__ == "OutputEvent":
            texts.append(event.data.text)
    assert texts == ["charged: ada is a customer, receipt-1"]
    assert len(client.calls) == 2 and charged == [500]


async def test_without_a_store_every_run_asks_the_model() -> None:
    charged: list[int] = []
    agent, client = billing_agent(charged, [])
    wf = flow(agent, [])
    await wf.run("one")
    await wf.run("two")
    assert len(client.calls) == 4 and charged == [500, 500]


def test_effect_is_a_tool_flag() -> None:
    @tool(effect=True)
    def pay() -> None:
        """Pay."""

    @tool
    def read() -> None:
        """Read."""

    assert pay.effect and not read.effect
