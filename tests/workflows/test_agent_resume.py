"""Agent workflows resumed from every checkpoint end like the run that never stopped: what
each model saw and what each executor sent, with context modes, a shared thread, a fan-in
of agents, cached-only messages, turn tokens and approval requests. Damaged agent state in
a checkpoint is refused with a `CheckpointError`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from cantata.agents import ChatAgent, LocalThread
from cantata.core import CheckpointError, Message, WorkflowError
from cantata.models import ScriptedChatClient, tool_call
from cantata.stores import seal, unseal
from cantata.tools import tool
from cantata.workflows import (
    AgentExecutor,
    AgentExecutorRequest,
    AgentExecutorResponse,
    InMemoryCheckpointStore,
    TurnToken,
    Workflow,
    WorkflowBuilder,
    WorkflowContext,
    WorkflowRunResult,
    executor,
)


def seen(messages: list[Message]) -> str:
    return " | ".join(f"{m.role}:{m.text}" for m in messages if m.role != "system")


def agent(name: str) -> ChatAgent:
    """A model that says who it is and how much it was given, so any difference shows."""
    client = ScriptedChatClient(lambda msgs, opts: f"{name} saw {seen(msgs)}")
    return ChatAgent(client, name=name)


@executor
async def out(response: AgentExecutorResponse, ctx: WorkflowContext[None, str]) -> None:
    await ctx.yield_output(seen(response.full_conversation))


def chain() -> Workflow:
    a = AgentExecutor(agent("a"))
    b = AgentExecutor(agent("b"), context_mode="last_agent")
    c = AgentExecutor(
        agent("c"), context_mode="custom", context_filter=lambda r: r.full_conversation[-1:]
    )
    return WorkflowBuilder(a, name="chain").add_chain([a, b, c, out]).build()


def fan_in() -> Workflow:
    @executor
    async def split(text: str, ctx: WorkflowContext[str]) -> None:
        await ctx.send_message(text)

    x, y = AgentExecutor(agent("x")), AgentExecutor(agent("y"), forward_incoming=False)
    summary = AgentExecutor(agent("summary"))
    return (
        WorkflowBuilder(split, name="fan")
        .add_fan_out_edges(split, [x, y])
        .add_fan_in_edges([x, y], summary)
        .add_edge(summary, out)
        .build()
    )


def shared_thread() -> Workflow:
    seed = LocalThread()
    seed._messages = [Message("user", "earlier")]  # type: ignore[attr-defined]
    first = AgentExecutor(agent("first"), thread="talk")
    second = AgentExecutor(agent("second"), thread="talk")

    @executor
    async def loop(response: AgentExecutorResponse, ctx: WorkflowContext[str, str]) -> None:
        await ctx.yield_output(seen(response.full_conversation))
        count = (ctx.get_executor_state() or 0) + 1
        ctx.set_executor_state(count)
        if count < 3:
            await ctx.send_message(f"again {count}")

    return (
        WorkflowBuilder(first, name="shared", max_supersteps=30)
        .add_chain([first, second, loop])
        .add_edge(loop, first)
        .build()
    )


def cached_and_turns() -> Workflow:
    @executor
    async def feed(text: str, ctx: WorkflowContext[AgentExecutorRequest | TurnToken]) -> None:
        await ctx.send_message(AgentExecutorRequest([Message("user", text)], should_respond=False))
        await ctx.send_message(AgentExecutorRequest([Message("user", text + "?")], False))

    @executor
    async def knock(request: AgentExecutorRequest, ctx: WorkflowContext[TurnToken]) -> None:
        await ctx.send_message(TurnToken())

    turn = AgentExecutor(agent("turn"), turn_token=True)
    cache = AgentExecutor(agent("cache"))

    @executor
    async def after(
        item: TurnToken | AgentExecutorResponse, ctx: WorkflowContext[Any, str]
    ) -> None:
        if isinstance(item, AgentExecutorResponse):
            await ctx.yield_output(seen(item.full_conversation))
            await ctx.send_message(AgentExecutorRequest([Message("user", "now")]), "cache")

    return (
        WorkflowBuilder(feed, name="turns")
        .add_fan_out_edges(feed, [turn, cache, knock])
        .add_edge(knock, turn)
        .add_edge(turn, after)
        .add_edge(after, cache)
        .add_edge(cache, out)
        .build()
    )


@tool(approval_mode="always_require")
def transfer(amount: int) -> str:
    """Move money."""
    return f"moved {amount}"


def approvals() -> Workflow:
    client = ScriptedChatClient(
        lambda msgs, opts: (
            [tool_call("transfer", {"amount": len(msgs)})]
            if msgs[-1].role == "user"
            else f"done after {seen(msgs)}"
        )
    )
    banker = AgentExecutor(
        ChatAgent(client, name="banker", tools=[transfer]), requests_for_input=True
    )
    return WorkflowBuilder(banker, name="bank").add_edge(banker, out).build()


async def finish(result: WorkflowRunResult) -> WorkflowRunResult:
    while result.pending_requests:
        result = await result.send_responses(
            {r.request_id: r.data.create_response(True) for r in result.pending_requests}
        )
    return result


def snapshot(result: WorkflowRunResult) -> dict[str, Any]:
    state = result.run._state
    logs = {
        k: [seen([m]) if isinstance(m, Message) else m for m in v] for k, v in state.logs.items()
    }
    return {"status": result.status, "outputs": result.outputs, "logs": logs}


@pytest.mark.parametrize("build", [chain, fan_in, shared_thread, cached_and_turns, approvals])
async def test_resume_from_every_checkpoint_equals_the_uninterrupted_run(
    build: Callable[[], Workflow],
) -> None:
    store = InMemoryCheckpointStore()
    full = await finish(await build().run("go", checkpoint_store=store))
    expected = snapshot(full)
    assert expected["outputs"], "every flow yields something"
    for ckpt in await store.list_checkpoints(run_id=full.run_id):
        resumed = await finish(await build().resume(ckpt.checkpoint_id, checkpoint_store=store))
        assert snapshot(resumed) == expected, f"from superstep {ckpt.superstep}"


@pytest.mark.parametrize(
    "damage",
    [
        {"cache": "abc"},
        {"cache": [1, 2]},
        {"waiting": [3]},
        {"waiting": "r"},
        {"seeded": "yes"},
    ],
)
async def test_damaged_agent_executor_state_is_a_checkpoint_error(damage: dict[str, Any]) -> None:
    store = InMemoryCheckpointStore()
    full = await approvals().run("go", checkpoint_store=store)
    ckpt = await store.load(full.checkpoint_id or "")
    ref = ckpt.executor_refs["banker"]
    value = unseal(await store.store.get(f"wf:val:{ref}"), where="test")
    await store.store.put(f"wf:val:{ref}", seal({**value, **damage}))
    with pytest.raises(CheckpointError, match="cannot be loaded"):
        await approvals().resume(ckpt.checkpoint_id, checkpoint_store=store)


async def test_agent_executor_state_of_another_type_is_a_checkpoint_error() -> None:
    store = InMemoryCheckpointStore()
    full = await approvals().run("go", checkpoint_store=store)
    ckpt = await store.load(full.checkpoint_id or "")
    await store.store.put(f"wf:val:{ckpt.executor_refs['banker']}", seal({"cache": []}))
    with pytest.raises(CheckpointError, match="state of agent executor 'banker' is a dict"):
        await approvals().resume(ckpt.checkpoint_id, checkpoint_store=store)


async def test_a_damaged_conversation_log_is_a_checkpoint_error() -> None:
    store = InMemoryCheckpointStore()
    full = await chain().run("go", checkpoint_store=store)
    ckpt = (await store.list_checkpoints(run_id=full.run_id))[1]
    [(segment, count)] = ckpt.logs["a/conversation"]
    await store.store.delete_log(f"wf:log:{segment}")
    await store.store.append(f"wf:log:{segment}", [seal("not a message")] * count)
    with pytest.raises((CheckpointError, WorkflowError)) as caught:
        await chain().resume(ckpt.checkpoint_id, checkpoint_store=store)
    assert isinstance(caught.value, CheckpointError), caught.value
