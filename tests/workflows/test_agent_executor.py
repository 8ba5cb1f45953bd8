"""AgentExecutor: inputs, cache, context modes, streaming, threads, options, turn tokens."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from cantata.agents import AgentResponse, ChatAgent, LocalThread
from cantata.core import ConfigurationError, FunctionApprovalRequestContent, Message
from cantata.models import ChatOptions, ScriptedChatClient
from cantata.tools import tool
from cantata.workflows import (
    AgentExecutor,
    AgentExecutorRequest,
    AgentExecutorResponse,
    AgentResponseEvent,
    AgentUpdateEvent,
    InMemoryCheckpointStore,
    TurnToken,
    WorkflowBuilder,
    WorkflowContext,
    executor,
)


def seen(messages: list[Message]) -> str:
    """What a model was given, compactly: role:text for each message."""
    return " | ".join(f"{m.role}:{m.text}" for m in messages if m.role != "system")


def recording_agent(name: str, reply: str = "ok", *, chunk_size: int = 8) -> ChatAgent:
    """An agent whose model answers `reply` and records every request."""
    client = ScriptedChatClient(lambda msgs, opts: f"{reply}", chunk_size=chunk_size)
    return ChatAgent(client, name=name)


def calls(agent: ChatAgent) -> list[str]:
    client = agent.client  # type: ignore[attr-defined]
    assert isinstance(client, ScriptedChatClient)
    return [seen(c.messages) for c in client.calls]


@executor
async def out(response: AgentExecutorResponse, ctx: WorkflowContext[None, str]) -> None:
    await ctx.yield_output(seen(response.full_conversation))


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("hello", "user:hello"),
        (Message("user", "hi there"), "user:hi there"),
        (["one", Message("user", "two")], "user:one | user:two"),
        (AgentExecutorRequest([Message("user", "req")]), "user:req"),
    ],
)
async def test_input_kinds(given: Any, expected: str) -> None:
    agent = recording_agent("a", "reply")
    wf = WorkflowBuilder(agent).add_edge(agent, out).build()
    result = await wf.run(given)
    assert calls(agent) == [expected]
    assert result.outputs == [f"{expected} | assistant:reply"]


async def test_should_respond_false_only_caches_and_the_cache_clears_after_a_run() -> None:
    agent = recording_agent("a", "r")

    @executor
    async def feed(n: int, ctx: WorkflowContext[AgentExecutorRequest]) -> None:
        if n == 0:
            await ctx.send_message(AgentExecutorRequest([Message("user", "m1")], False))
            await ctx.send_message(AgentExecutorRequest([Message("user", "m2")], True))
        else:
            await ctx.send_message(AgentExecutorRequest([Message("user", f"m{n + 2}")]))

    @executor
    async def again(response: AgentExecutorResponse, ctx: WorkflowContext[int, str]) -> None:
        await ctx.yield_output(seen(response.full_conversation))
        if len(response.full_conversation) < 5:
            await ctx.send_message(1)

    wf = (
        WorkflowBuilder(feed)
        .add_edge(feed, agent)
        .add_edge(agent, again)
        .add_edge(again, feed)
        .build()
    )
    result = await wf.run(0)
    assert calls(agent) == ["user:m1 | user:m2", "user:m1 | user:m2 | assistant:r | user:m3"]
    assert result.outputs[-1] == "user:m1 | user:m2 | assistant:r | user:m3 | assistant:r"


async def test_only_caching_never_runs_the_agent() -> None:
    agent = recording_agent("a")
    wf = WorkflowBuilder(agent).add_edge(agent, out).build()
    result = await wf.run(AgentExecutorRequest([Message("user", "x")], should_respond=False))
    assert calls(agent) == [] and result.outputs == []


def _pair(mode: str, **options: Any) -> tuple[ChatAgent, ChatAgent, Any]:
    first = recording_agent("first", "bonjour")
    second = recording_agent("second", "hola")
    second_exec = AgentExecutor(second, context_mode=mode, **options)  # type: ignore[arg-type]
    wf = WorkflowBuilder(first).add_edge(first, second_exec).add_edge(second_exec, out).build()
    return first, second, wf


async def test_context_mode_full_gives_the_whole_upstream_conversation() -> None:
    _, second, wf = _pair("full")
    result = await wf.run("hello")
    assert calls(second) == ["user:hello | user:bonjour"]  # other agents' replies as user
    assert result.outputs == ["user:hello | assistant:bonjour | assistant:hola"]


async def test_context_mode_last_agent_gives_only_the_upstream_reply() -> None:
    _, second, wf = _pair("last_agent")
    await wf.run("hello")
    assert calls(second) == ["user:bonjour"]


async def test_context_mode_custom_uses_the_filter() -> None:
    def filt(response: AgentExecutorResponse) -> list[Message]:
        return [Message("user", f"from {response.executor_id}: {response.agent_response.text}")]

    _, second, wf = _pair("custom", context_filter=filt)
    await wf.run("hello")
    assert calls(second) == ["user:from first: bonjour"]
    with pytest.raises(ConfigurationError, match="context_filter"):
        AgentExecutor(second, context_mode="custom")


async def test_other_agents_as_assistant_when_switched_off() -> None:
    _, second, wf = _pair("full", other_agents_as_user=False)
    await wf.run("hello")
    assert calls(second) == ["user:hello | assistant:bonjour"]


async def test_forward_incoming_off_sends_only_the_agents_reply() -> None:
    _, _, wf = _pair("full", forward_incoming=False)
    assert (await wf.run("hello")).outputs == ["assistant:hola"]


async def test_streamed_run_emits_one_update_per_chunk_and_optionally_the_response() -> None:
    agent = recording_agent("a", "abcdefghij", chunk_size=3)
    quiet = WorkflowBuilder(agent).add_edge(agent, out).build()
    stream = quiet.run_stream("go")
    events = [e async for e in stream]
    chunks = [e.data.text for e in events if isinstance(e, AgentUpdateEvent)]
    assert chunks == ["abc", "def", "ghi", "j"]
    assert not any(isinstance(e, AgentResponseEvent) for e in events)
    loud_exec = AgentExecutor(recording_agent("b", "xy"), emit_response=True)
    loud = WorkflowBuilder(loud_exec).add_edge(loud_exec, out).build()
    events = [e async for e in loud.run_stream("go")]
    [response] = [e for e in events if isinstance(e, AgentResponseEvent)]
    assert isinstance(response.data, AgentResponse) and response.data.text == "xy"
    # A run() that does not stream reports the whole response instead of chunks.
    result = await quiet.run("go", include_events=True)
    assert [type(e) for e in result.events if isinstance(e, AgentUpdateEvent)] == []
    assert any(isinstance(e, AgentResponseEvent) for e in result.events)


async def test_a_thread_shared_by_two_executors_holds_each_message_once() -> None:
    seed = LocalThread()
    await seed.on_new_message([Message("user", "earlier"), Message("assistant", "noted")])
    a = AgentExecutor(recording_agent("a", "A"), thread=seed)
    b = AgentExecutor(recording_agent("b", "B"), thread=seed)
    wf = WorkflowBuilder(a).add_edge(a, b).add_edge(b, out).build()
    await wf.run("now")
    assert calls(a.agent) == ["user:earlier | assistant:noted | user:now"]  # type: ignore[arg-type]
    assert calls(b.agent) == [  # type: ignore[arg-type]
        "user:earlier | assistant:noted | user:now | assistant:A"
    ]
    assert len(await seed.get_messages()) == 2  # the definition's thread is not changed
    alone = AgentExecutor(recording_agent("c", "C"))
    wf2 = WorkflowBuilder(a).add_edge(a, alone).build()
    await wf2.run("now")
    # Downstream gets the conversation that went through `a`, not its thread's history.
    assert calls(alone.agent) == ["user:now | user:A"]  # type: ignore[arg-type]


async def test_turn_token_mode_waits_for_the_token_and_passes_it_on() -> None:
    agent = recording_agent("a", "turned", chunk_size=2)
    turn = AgentExecutor(agent, turn_token=True)
    tokens: list[TurnToken] = []

    @executor
    async def feed(text: str, ctx: WorkflowContext[Message | TurnToken]) -> None:
        await ctx.send_message(Message("user", text))
        await ctx.send_message(Message("user", text + "!"))
        await ctx.send_message(TurnToken(stream=True))

    @executor
    async def after(item: TurnToken | AgentExecutorResponse, ctx: WorkflowContext) -> None:
        if isinstance(item, TurnToken):
            tokens.append(item)

    wf = WorkflowBuilder(feed).add_edge(feed, turn).add_edge(turn, after).build()
    result = await wf.run("go", include_events=True)
    assert calls(agent) == ["user:go | user:go!"]
    assert tokens == [TurnToken(stream=True)]
    # The token switched streaming on in a run() that does not stream by itself.
    assert [e.data.text for e in result.events if isinstance(e, AgentUpdateEvent)] == [
        "tu",
        "rn",
        "ed",
    ]


@tool(approval_mode="always_require")
def transfer(amount: int) -> str:
    """Move money."""
    return f"moved {amount}"


async def test_approval_requests_become_workflow_requests() -> None:
    from cantata.models import tool_call

    client = ScriptedChatClient([[tool_call("transfer", {"amount": 5})], "all done"])
    agent = ChatAgent(client, name="banker", tools=[transfer])
    ex = AgentExecutor(agent, requests_for_input=True)
    wf = WorkflowBuilder(ex).add_edge(ex, out).build()
    first = await wf.run("pay 5")
    assert first.status == "idle_with_pending_requests"
    [request] = first.pending_requests
    assert isinstance(request.data, FunctionApprovalRequestContent)
    done = await first.send_responses({request.request_id: request.data.create_response(True)})
    assert done.status == "idle"
    assert "moved 5" in str(client.calls[-1].messages)
    assert done.outputs[-1].endswith("assistant:all done")


async def test_checkpoints_hold_cache_conversation_and_thread() -> None:
    store = InMemoryCheckpointStore()

    def build() -> Any:
        first = recording_agent("first", "one")
        second = AgentExecutor(recording_agent("second", "two"))
        return (
            WorkflowBuilder(first, name="agents")
            .add_edge(first, second)
            .add_edge(second, out)
            .build(),
            second,
        )

    wf, _ = build()
    full = await wf.run("start", checkpoint_store=store)
    checkpoints = await store.list_checkpoints(run_id=full.run_id)
    fresh, second = build()
    resumed = await fresh.resume(checkpoints[0].checkpoint_id, checkpoint_store=store)
    assert resumed.outputs == full.outputs
    # the run journaled the second agent's answer (a durable run): the resume replays it
    # instead of asking the model again
    assert calls(second.agent) == []


async def test_hundred_concurrent_agent_runs_are_isolated() -> None:
    client = ScriptedChatClient(lambda msgs, o: f"echo {msgs[-1].text}")
    agent = ChatAgent(client, name="echo", options=ChatOptions())
    wf = WorkflowBuilder(agent).add_edge(agent, out).build()
    results = await asyncio.gather(*[wf.run(f"m{i}") for i in range(100)])
    assert [r.outputs for r in results] == [
        [f"user:m{i} | assistant:echo m{i}"] for i in range(100)
    ]


class CallingAgent(ChatAgent):
    """An agent whose model calls a tool only the caller can run (no tool is registered
    here, so the call is left without a result)."""

    async def run(self, messages: Any = None, **kwargs: Any) -> AgentResponse:
        from cantata.core import FunctionCallContent

        incoming = Message.coerce(messages)
        results = [c for m in incoming for c in m.function_results]
        if results:
            return AgentResponse([Message("assistant", f"got {results[0].result}")])
        call = FunctionCallContent("c1", "client_side_lookup", {"q": "x"})
        return AgentResponse([Message("assistant", [call])])


async def test_function_calls_left_without_a_result_become_requests() -> None:
    from cantata.core import FunctionCallContent, FunctionResultContent, WorkflowError

    agent = CallingAgent(ScriptedChatClient([]), name="caller")
    ex = AgentExecutor(agent, requests_for_input=True)
    wf = WorkflowBuilder(ex).add_edge(ex, out).build()
    first = await wf.run("look it up")
    [request] = first.pending_requests
    assert isinstance(request.data, FunctionCallContent) and request.data.call_id == "c1"
    with pytest.raises(WorkflowError, match="must be a"):
        await first.send_responses({request.request_id: "plain text"})
    done = await first.send_responses({request.request_id: FunctionResultContent("c1", 42)})
    assert done.outputs[-1].endswith("assistant:got 42")


async def test_requests_stay_off_by_default() -> None:
    agent = CallingAgent(ScriptedChatClient([]), name="caller")
    wf = WorkflowBuilder(agent).add_edge(agent, out).build()
    result = await wf.run("look it up")
    assert result.status == "idle" and result.pending_requests == []


async def test_a_thread_named_by_a_string_is_shared_within_a_run_only() -> None:
    a = AgentExecutor(recording_agent("a", "A"), thread="team")
    b = AgentExecutor(recording_agent("b", "B"), thread="team", context_mode="last_agent")
    wf = WorkflowBuilder(a).add_edge(a, b).build()
    await wf.run("first run")
    await wf.run("second run")
    assert calls(b.agent) == [  # type: ignore[arg-type]
        "user:first run | assistant:A",
        "user:second run | assistant:A",
    ]


async def test_a_fan_in_of_agents_feeds_one_summarizer() -> None:
    start = recording_agent("start", "topic")
    left = recording_agent("left", "L")
    right = recording_agent("right", "R")
    summary = recording_agent("summary", "S")
    wf = (
        WorkflowBuilder(start)
        .add_fan_out_edges(start, [left, right])
        .add_fan_in_edges([left, right], summary)
        .add_edge(summary, out)
        .build()
    )
    result = await wf.run("go", include_events=True)
    # each message once: the shared beginning of both conversations is not repeated
    assert calls(summary) == ["user:go | user:topic | user:L | user:R"]
    assert result.outputs == ["user:go | assistant:topic | assistant:L | assistant:R | assistant:S"]


async def test_a_seeded_thread_shared_by_agents_of_one_superstep_is_seeded_once() -> None:
    seed = LocalThread()
    await seed.on_new_message([Message("user", "earlier")])
    a = AgentExecutor(recording_agent("a", "A"), thread=seed)
    b = AgentExecutor(recording_agent("b", "B"), thread=seed)

    @executor
    async def split(text: str, ctx: WorkflowContext[Message]) -> None:
        await ctx.send_message(Message("user", text))

    @executor
    async def join(responses: list[AgentExecutorResponse], ctx: WorkflowContext[str]) -> None:
        await ctx.send_message("again")

    wf = (
        WorkflowBuilder(split)
        .add_fan_out_edges(split, [a, b])
        .add_fan_in_edges([a, b], join)
        .add_edge(join, a)
        .build()
    )
    await wf.run("go")
    # the second turn of `a` sees the seed once, the shared input once, then both replies
    assert calls(a.agent)[-1] == (  # type: ignore[arg-type]
        "user:earlier | user:go | assistant:A | assistant:B | user:again"
    )
