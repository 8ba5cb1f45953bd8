"""workflow.as_agent(): a workflow wherever an agent is."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest

from cantata.agents import Agent, ChatAgent
from cantata.core import FunctionResultContent, Message, WorkflowError, register
from cantata.models import ScriptedChatClient
from cantata.workflows import (
    REQUEST_INFO,
    Executor,
    WorkflowBuilder,
    WorkflowContext,
    executor,
    handler,
    response_handler,
)


@executor
async def shout(messages: list[Message], ctx: WorkflowContext[None, str]) -> None:
    await ctx.yield_output(messages[-1].text.upper())


async def test_run_and_thread() -> None:
    agent = WorkflowBuilder(shout, name="shouter").build().as_agent()
    assert isinstance(agent, Agent) and agent.name == "shouter"
    thread = agent.create_thread()
    response = await agent.run("hello", thread=thread)
    assert response.text == "HELLO"
    assert [m.text for m in await thread.get_messages()] == ["hello", "HELLO"]


async def test_streaming_passes_agent_chunks_through() -> None:
    inner = ChatAgent(ScriptedChatClient(["abcdef"], chunk_size=2), name="inner")

    @executor
    async def finish(response: object, ctx: WorkflowContext) -> None:
        pass

    wf = WorkflowBuilder(inner).add_edge(inner, finish).build()
    stream = wf.as_agent(name="outer").run_stream("go")
    texts = [u.text async for u in stream]
    assert texts == ["ab", "cd", "ef"]


@register(name="tests.workflows.as_agent.Ask")
@dataclass
class Ask:
    question: str


class Asker(Executor):
    @handler
    async def start(self, text: str, ctx: WorkflowContext[None, str]) -> None:
        await ctx.request_info(Ask(f"sure about {text}?"))

    @response_handler
    async def got(self, request: Ask, answer: str, ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output(f"{request.question} -> {answer}")


async def test_requests_become_function_calls_answered_by_results() -> None:
    agent = WorkflowBuilder(Asker("asker")).build().as_agent(name="asker")
    thread = agent.create_thread()
    first = await agent.run("x", thread=thread)
    [call] = first.messages[-1].function_calls
    assert call.name == REQUEST_INFO
    answer = Message("tool", [FunctionResultContent(call.call_id, result="yes")])
    second = await agent.run(answer, thread=thread)
    assert second.text == "sure about x? -> yes"


async def test_a_workflow_agent_nests_inside_another_workflow() -> None:
    inner = WorkflowBuilder(shout, name="inner").build().as_agent(name="inner")

    @executor
    async def done(response: object, ctx: WorkflowContext[None, str]) -> None:
        from cantata.workflows import AgentExecutorResponse

        assert isinstance(response, AgentExecutorResponse)
        await ctx.yield_output(response.agent_response.text)

    outer = WorkflowBuilder(inner, name="outer").add_edge(inner, done).build()
    assert (await outer.run("quiet")).outputs == ["QUIET"]


async def test_a_wrong_answer_is_refused_and_the_run_keeps_waiting() -> None:
    agent = WorkflowBuilder(Asker("asker")).build().as_agent(name="asker")
    thread = agent.create_thread()
    first = await agent.run("x", thread=thread)
    [call] = first.messages[-1].function_calls
    wrong = Message("tool", [FunctionResultContent(call.call_id, result=42)])
    with pytest.raises(WorkflowError, match="must be a str, not a int"):
        await agent.run(wrong, thread=thread)
    assert len(await thread.get_messages()) == 2  # the refused answer is not kept
    right = Message("tool", [FunctionResultContent(call.call_id, result="yes")])
    assert (await agent.run(right, thread=thread)).text == "sure about x? -> yes"


async def test_closing_the_agent_stream_early_cancels_the_workflow_run() -> None:
    entered, cancelled = asyncio.Event(), asyncio.Event()

    @executor
    async def talk(messages: list[Message], ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output("first")
        entered.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    stream = WorkflowBuilder(talk).build().as_agent(name="talker").run_stream("go")
    async for update in stream:
        assert update.text == "first"
        await entered.wait()
        break
    await stream.aclose()
    assert cancelled.is_set()


async def test_an_answer_whose_handler_fails_can_be_given_again_on_the_thread() -> None:
    failures = [ConnectionError("model unavailable")]

    class Fragile(Asker):
        @response_handler
        async def got(self, request: Ask, answer: str, ctx: WorkflowContext[None, str]) -> None:
            if failures:
                raise failures.pop()
            await ctx.yield_output(f"{request.question} -> {answer}")

    agent = WorkflowBuilder(Fragile("asker")).build().as_agent(name="asker")
    thread = agent.create_thread()
    first = await agent.run("x", thread=thread)
    [call] = first.messages[-1].function_calls
    answer = Message("tool", [FunctionResultContent(call.call_id, result="yes")])
    with pytest.raises(WorkflowError, match="ConnectionError"):
        await agent.run(answer, thread=thread)
    again = Message("tool", [FunctionResultContent(call.call_id, result="yes")])
    assert (await agent.run(again, thread=thread)).text == "sure about x? -> yes"


async def test_tool_kwargs_reach_the_executors_and_instructions_cannot_be_overridden() -> None:
    from cantata.core import ConfigurationError

    @executor
    async def tenant(messages: list[Message], ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output(f"{ctx.kwargs.get('tenant')} {ctx.kwargs.get('extra')}")

    agent = WorkflowBuilder(tenant).build().as_agent(name="wf")
    response = await agent.run("hi", tool_kwargs={"tenant": "t1"}, extra=2)
    assert response.text == "t1 2"
    streamed = agent.run_stream("hi", tool_kwargs={"tenant": "t2"})
    assert [u.text async for u in streamed] == ["t2 None"]
    with pytest.raises(ConfigurationError, match="no instructions to override"):
        await agent.run("hi", instructions_override="be brief")
