"""A `ResponsesAgent` as a workflow step keeps its server thread across the executor's runs
(and across a checkpoint and resume), sending the server only what it has not seen."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any

import pytest

from cantata.agents import ChatAgent
from cantata.agents.remote_responses import ResponsesAgent
from cantata.core import Message
from cantata.models import ScriptedChatClient
from cantata.serve import build_app
from cantata.stores import MemoryStore
from cantata.workflows import (
    AgentExecutor,
    AgentExecutorRequest,
    AgentExecutorResponse,
    AgentExecutorState,
    InMemoryCheckpointStore,
    Workflow,
    WorkflowBuilder,
    WorkflowContext,
    executor,
)

from ._servers import echo_agent, running

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


class _Recorder:
    """An ASGI layer keeping the JSON bodies of the `/v1/responses` requests it passes on."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.bodies: list[dict[str, Any]] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != "/v1/responses":
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        more = True
        while more:
            event = await receive()
            chunks.append(event.get("body", b""))
            more = bool(event.get("more_body"))
        body = b"".join(chunks)
        self.bodies.append(json.loads(body))
        sent = False

        async def replay() -> MutableMapping[str, Any]:
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


@pytest.fixture
async def recorded() -> AsyncIterator[tuple[str, _Recorder]]:
    async with MemoryStore() as store:
        recorder = _Recorder(build_app(echo_agent(), store=store))  # type: ignore[arg-type]
        async with running(recorder) as url:
            yield url, recorder


def _looping(remote: ResponsesAgent, rounds: int) -> Workflow:
    """feed -> remote -> check -> feed ..., the remote step running `rounds` times."""

    @executor
    async def feed(n: int, ctx: WorkflowContext[AgentExecutorRequest]) -> None:
        await ctx.send_message(AgentExecutorRequest([Message("user", f"m{n}")]))

    @executor
    async def check(response: AgentExecutorResponse, ctx: WorkflowContext[int, str]) -> None:
        await ctx.yield_output(response.agent_response.text)
        done = sum(m.role == "assistant" for m in response.full_conversation)
        if done < rounds:
            await ctx.send_message(done)

    step = AgentExecutor(remote, id="remote")
    return (
        WorkflowBuilder(feed, name="loop")
        .add_edge(feed, step)
        .add_edge(step, check)
        .add_edge(check, feed)
        .build()
    )


def _texts(body: dict[str, Any]) -> list[str]:
    """The texts of a request's input items."""
    items = body["input"]
    if isinstance(items, str):
        return [items]
    out: list[str] = []
    for item in items:
        content = item.get("content")
        if isinstance(content, str):
            out.append(content)
        else:
            out.extend(str(c.get("text")) for c in content or [])
    return out


async def test_each_run_of_the_step_continues_the_server_thread(
    recorded: tuple[str, _Recorder],
) -> None:
    url, recorder = recorded
    async with ResponsesAgent(f"{url}/v1", model="echo") as remote:
        result = await _looping(remote, 3).run(0)
    assert [o for o in result.outputs if isinstance(o, str)] == [
        "turn 1: m0",
        "turn 2: m1",
        "turn 3: m2",
    ]
    first, second, third = recorder.bodies
    assert first.get("previous_response_id") is None
    assert _texts(second) == ["m1"] and _texts(third) == ["m2"]  # only what is new
    assert second["previous_response_id"] and third["previous_response_id"]
    assert second["previous_response_id"] != third["previous_response_id"]  # it rolls


async def test_a_resumed_run_keeps_the_same_server_thread(
    recorded: tuple[str, _Recorder],
) -> None:
    url, recorder = recorded
    checkpoints = InMemoryCheckpointStore()
    async with ResponsesAgent(f"{url}/v1", model="echo") as remote:
        full = await _looping(remote, 2).run(0, checkpoint_store=checkpoints)
        sent = len(recorder.bodies)
        assert sent == 2
        ids = [c.checkpoint_id for c in await checkpoints.list_checkpoints(run_id=full.run_id)]
        # the checkpoint after the step's first run, before its second
        after_first = [
            cid for cid in ids if "remote" in (await checkpoints.load(cid)).executor_refs
        ]
        assert after_first
    async with ResponsesAgent(f"{url}/v1", model="echo") as fresh:
        resumed = await _looping(fresh, 2).resume(after_first[0], checkpoint_store=checkpoints)
    assert [o for o in resumed.outputs if isinstance(o, str)][-1] == "turn 2: m1"
    again = recorder.bodies[sent:]
    assert len(again) == 1 and _texts(again[0]) == ["m1"]
    assert again[0]["previous_response_id"] == recorder.bodies[1]["previous_response_id"]


async def test_a_shared_thread_sends_the_server_what_others_added_since(
    recorded: tuple[str, _Recorder],
) -> None:
    url, recorder = recorded

    @executor
    async def feed(n: int, ctx: WorkflowContext[AgentExecutorRequest]) -> None:
        await ctx.send_message(AgentExecutorRequest([Message("user", f"m{n}")]))

    @executor
    async def check(response: AgentExecutorResponse, ctx: WorkflowContext[int]) -> None:
        if response.full_conversation[-1].text == "local 1":
            await ctx.send_message(1)

    async with ResponsesAgent(f"{url}/v1", model="echo") as remote:
        step = AgentExecutor(remote, id="remote", thread="talk")
        said = iter(["local 1", "local 2"])
        talker = ChatAgent(ScriptedChatClient(lambda m, o: next(said)), name="local")
        local = AgentExecutor(talker, id="local", thread="talk")
        workflow = (
            WorkflowBuilder(feed)
            .add_edge(feed, step)
            .add_edge(step, local)
            .add_edge(local, check)
            .add_edge(check, feed)
            .build()
        )
        await workflow.run(0)
    first, second = recorder.bodies
    assert _texts(first) == ["m0"]
    # the second run continues the server thread with what the local agent added to the
    # shared thread since (not the remote agent's own reply, nor m0 again) and the new input
    assert second["previous_response_id"] and _texts(second) == ["local 1", "m1"]


def test_damaged_service_thread_state_is_refused() -> None:
    with pytest.raises(TypeError, match=r"service_thread: dict \| None"):
        AgentExecutorState(service_thread="not a dict")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="service_seen: int"):
        AgentExecutorState(service_seen="3")  # type: ignore[arg-type]
