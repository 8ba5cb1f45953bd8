"""A run leaves nothing on the runtime it ran on: `release_agents`, and the workflow and team
runs that call it when they end (done, failed, cancelled, or waiting for a person), on
`LocalRuntime` in process and copying messages as a runtime across processes does."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from cantata.agents import ChatAgent
from cantata.core import (
    CancellationToken,
    CancelledError,
    ConfigurationError,
    Message,
    WorkflowError,
    register,
)
from cantata.models import ChatOptions, ScriptedChatClient, ScriptedTurn, tool_call
from cantata.runtime import (
    AgentId,
    AgentReleased,
    BaseAgent,
    LocalRuntime,
    MessageContext,
    RuntimeEvent,
)
from cantata.stores import MemoryStore
from cantata.teams import GroupChat, Team
from cantata.tools import tool
from cantata.workflows import (
    Executor,
    Workflow,
    WorkflowBuilder,
    WorkflowContext,
    handler,
    response_handler,
)
from cantata.workflows.placement import ExecutorActor, RunActor

N = 5  # runs of each kind


class Echo(BaseAgent):
    closed = 0

    async def on_message(self, message: Any, ctx: MessageContext) -> Any:
        if message == "wait":
            await asyncio.sleep(0.05)
        return message

    async def close(self) -> None:
        Echo.closed += 1


@pytest.fixture
async def runtime() -> AsyncIterator[LocalRuntime]:
    async with LocalRuntime() as rt:
        await rt.register_factory("echo", Echo)
        yield rt


async def _actors() -> int:
    """Workflow actors anywhere in this process (a weak-reference check of the lot), once
    the callbacks the loop has ready ran (a cancelled task's end is one)."""
    await asyncio.sleep(0)
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) in (ExecutorActor, RunActor))


# -- release_agents itself -----------------------------------------------------------------


async def test_an_idle_agent_leaves_memory_unsaved_and_comes_back_fresh(
    runtime: LocalRuntime,
) -> None:
    events: list[RuntimeEvent] = []
    runtime.add_listener(events.append)
    a, b = AgentId("echo", "a"), AgentId("echo", "b")
    await runtime.send_message(1, a)
    await runtime.send_message(1, b)
    ref = weakref.ref(await runtime.get_agent(a))
    closed = Echo.closed
    assert await runtime.release_agents([a, AgentId("echo", "never")]) == 1
    assert runtime.live_agents() == [b]
    assert Echo.closed == closed + 1
    assert [e for e in events if isinstance(e, AgentReleased)] == [AgentReleased(a)]
    gc.collect()
    assert ref() is None
    assert await runtime.send_message(2, a) == 2  # created afresh
    assert set(runtime.live_agents()) == {a, b}


async def test_a_busy_agent_leaves_once_its_turn_ends(runtime: LocalRuntime) -> None:
    a = AgentId("echo", "a")
    first = asyncio.ensure_future(runtime.send_message("wait", a))
    await asyncio.sleep(0.01)
    second = asyncio.ensure_future(runtime.send_message("wait", a))  # waits for its turn
    await asyncio.sleep(0)
    assert await runtime.release_agents([a]) == 0  # busy: not at once
    assert runtime.live_agents() == [a]
    assert await asyncio.gather(first, second) == ["wait", "wait"]
    await runtime.wait_until_idle(timeout=5)
    assert runtime.live_agents() == []


async def test_a_released_agent_leaves_the_store_too() -> None:
    store = MemoryStore()
    async with LocalRuntime(store=store) as rt:
        await rt.register_factory("echo", Echo)
        a = AgentId("echo", "a")
        await rt.send_message(1, a)
        assert await rt.evict_idle() == 1
        assert await store.keys("cantata.runtime.agent:") == ["cantata.runtime.agent:echo/a"]
        assert await rt.release_agents([a]) == 0  # not in memory, but stored
        assert await store.keys("cantata.runtime.agent:") == []


async def test_instances_stay_and_bad_ids_are_refused(runtime: LocalRuntime) -> None:
    me = AgentId("mine", "x")
    await runtime.register_instance(Echo(), me)
    assert await runtime.release_agents([me]) == 0
    assert me in runtime.live_agents()
    with pytest.raises(ConfigurationError, match="not an AgentId"):
        await runtime.release_agents(["echo/a"])  # type: ignore[list-item]


# -- workflow runs with placement="executor" -------------------------------------------------


@register(name="tests.runtime.release.Ask")
@dataclass
class Ask:
    amount: int


class Step(Executor):
    @handler
    async def take(self, value: int, ctx: WorkflowContext[int]) -> None:
        if value < 0:
            raise ValueError("negative")
        if value == 0:
            await asyncio.sleep(30)  # until cancelled
        await ctx.send_message(value + 1)


class Gate(Executor):
    @handler
    async def ask(self, value: int, ctx: WorkflowContext[int, int]) -> None:
        if value % 2:
            await ctx.request_info(Ask(value))
        else:
            await ctx.yield_output(value)

    @response_handler
    async def answered(self, request: Ask, ok: bool, ctx: WorkflowContext[int, int]) -> None:
        await ctx.yield_output(request.amount if ok else -1)


def _flow(placement: str = "executor") -> Workflow:
    step, gate = Step("step"), Gate("gate")
    return WorkflowBuilder(step, placement=placement).add_edge(step, gate).build()  # type: ignore[arg-type]


async def _runs_of_each_kind(wf: Workflow, rt: LocalRuntime) -> list[weakref.ref[Any]]:
    """N runs done, failed, cancelled, and left waiting for a person; weak references to
    their run objects."""
    refs: list[weakref.ref[Any]] = []
    for i in range(N):
        done = await wf.run(2 * i + 1, runtime=rt)  # odd: the gate yields at once
        assert done.outputs == [2 * i + 2]
        with pytest.raises(WorkflowError, match="negative"):
            await wf.run(-1, runtime=rt)
        token = CancellationToken()
        later = asyncio.get_running_loop().call_later(0.02, token.cancel)
        cancelled = await wf.run(0, runtime=rt, cancellation_token=token)
        later.cancel()
        assert cancelled.status == "cancelled"
        waiting = await wf.run(2 * i + 2, runtime=rt)  # even: the gate asks
        assert waiting.status == "idle_with_pending_requests"
        refs += [weakref.ref(r.run) for r in (done, cancelled, waiting)]
        del done, cancelled, waiting
    return refs


async def _answered(wf: Workflow, rt: LocalRuntime, value: int) -> weakref.ref[Any]:
    asked = await wf.run(value, runtime=rt)
    assert asked.status == "idle_with_pending_requests"
    assert rt.live_agents() == []  # waiting for a person holds no actor
    [request] = asked.pending_requests
    answered = await asked.run.send_responses({request.request_id: True})
    assert answered.outputs == [value + 1]
    return weakref.ref(answered.run)


@pytest.mark.parametrize(
    ("placement", "copying"),
    [("executor", False), ("executor", True), ("run", False)],  # "run" cannot be copied
    ids=["executor-in_process", "executor-copying", "run-in_process"],
)
async def test_workflow_runs_of_every_ending_leave_no_actor(placement: str, copying: bool) -> None:
    wf = _flow(placement)
    before = await _actors()
    async with LocalRuntime(serialize_messages=copying) as rt:
        refs = await _runs_of_each_kind(wf, rt)
        refs += [await _answered(wf, rt, 2 * i + 2) for i in range(N)]
        assert rt.live_agents() == []
        gc.collect()
        assert [r for r in refs if r() is not None] == []
        assert await _actors() == before
        # the runtime still runs the workflow, from nothing
        again = await wf.run(3, runtime=rt)
        assert again.outputs == [4] and rt.live_agents() == []


async def test_a_checkpoint_resume_activates_what_it_needs_and_releases_it() -> None:
    from cantata.workflows import InMemoryCheckpointStore

    store = InMemoryCheckpointStore()
    wf = _flow()
    async with LocalRuntime(serialize_messages=True) as rt:
        asked = await wf.run(2, runtime=rt, checkpoint_store=store)
        assert asked.status == "idle_with_pending_requests" and rt.live_agents() == []
        resumed = await wf.resume(asked.run.checkpoint_id, checkpoint_store=store, runtime=rt)
        [request] = resumed.pending_requests
        done = await resumed.run.send_responses({request.request_id: True})
        assert done.outputs == [3] and rt.live_agents() == []


# -- team sessions -------------------------------------------------------------------------


def _talker(name: str) -> ChatAgent:
    def say(messages: list[Message], options: ChatOptions) -> str:
        if "fail" in messages[0].text:
            raise RuntimeError("the model failed")
        return f"{name} says {len(messages)}"

    return ChatAgent(ScriptedChatClient(say), name=name)


def _payer() -> ChatAgent:
    @tool(name="pay", approval_mode="always_require")
    def pay(amount: int) -> str:
        """Pay an amount."""
        return f"paid {amount}"

    def answer(messages: list[Message], options: ChatOptions) -> ScriptedTurn:
        if messages[-1].role == "tool" or any(m.function_results for m in messages):
            return "payer is done"
        if "pay" not in messages[0].text:
            return "payer has nothing to pay"
        return [tool_call("pay", {"amount": 5})]

    return ChatAgent(ScriptedChatClient(answer), name="payer", tools=[pay])


def _team() -> Team:
    return GroupChat([_payer(), _talker("checker")], max_turns=2, name="release")


async def _sessions_of_each_kind(team: Team, rt: LocalRuntime) -> list[weakref.ref[Any]]:
    refs: list[weakref.ref[Any]] = []
    for _ in range(N):
        done = team.create_session(runtime=rt)
        result = await done.run("talk")
        assert result.stop_message is not None and result.stop_message.source == "max_turns"
        again = await done.run("talk more")  # a second run of the conversation
        assert again.messages
        failed = team.create_session(runtime=rt)
        with pytest.raises(WorkflowError, match="the model failed"):
            await failed.run("fail now")
        cancelled = team.create_session(runtime=rt)
        token = CancellationToken()
        token.cancel()
        with pytest.raises(CancelledError):
            await cancelled.run("talk", cancellation_token=token)
        asked = team.create_session(runtime=rt)
        waiting = await asked.run("pay the bill")
        assert waiting.stop_message is not None and waiting.stop_message.source == "input"
        assert rt.live_agents() == []  # waiting for a person holds no actor
        [request] = asked.pending_requests
        answered = await asked.send_responses(
            {request.request_id: request.data.create_response(True)}
        )
        assert "payer is done" in [m.text for m in answered.messages]
        left = team.create_session(runtime=rt)
        await left.run("pay the bill")  # left waiting, then dropped by its owner
        for session in (done, failed, cancelled, asked, left):
            await session.close()
            refs.append(weakref.ref(session))
        del done, failed, cancelled, asked, left, session
    return refs


@pytest.mark.parametrize("copying", [False, True], ids=["in_process", "copying"])
async def test_team_sessions_of_every_ending_leave_no_actor(copying: bool) -> None:
    team = _team()
    before = await _actors()
    async with LocalRuntime(serialize_messages=copying) as rt:
        refs = await _sessions_of_each_kind(team, rt)
        assert rt.live_agents() == []
        gc.collect()
        assert [r for r in refs if r() is not None] == []
        assert await _actors() == before


# -- a scripted model that answers for a long time -------------------------------------------


async def test_a_scripted_model_keeps_the_last_max_calls_and_by_default_all() -> None:
    everything = ScriptedChatClient(lambda messages, options: "ok")
    bounded = ScriptedChatClient(lambda messages, options: "ok", max_calls=10)
    none = ScriptedChatClient(lambda messages, options: "ok", max_calls=0)
    for i in range(100):
        for client in (everything, bounded, none):
            await client.get_response([Message("user", f"question {i}")])
    assert len(everything.calls) == 100
    assert 10 <= len(bounded.calls) <= 15
    assert bounded.calls[-1].messages[0].text == "question 99"
    assert none.calls == []
    with pytest.raises(ConfigurationError, match="max_calls"):
        ScriptedChatClient(["x"], max_calls=-1)
