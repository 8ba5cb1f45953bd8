"""Agent middleware: around whole runs, streamed or not."""

from __future__ import annotations

import pytest

from cantata.agents import (
    AgentMiddleware,
    AgentResponse,
    AgentRunContext,
    ChatAgent,
    LocalThread,
    agent_middleware,
)
from cantata.core import AgentError, Message, ModelError
from cantata.models import ChatOptions, ScriptedChatClient, tool_call
from cantata.tools import chat_middleware, tool


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


class Tracing(AgentMiddleware):
    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log = name, log

    async def process(self, context: AgentRunContext, call_next):  # type: ignore[no-untyped-def]
        self.log.append(f"{self.name} before ({'stream' if context.is_streaming else 'run'})")
        await call_next()
        assert context.response is not None
        self.log.append(f"{self.name} after: {context.response.text}")


async def test_middleware_wraps_the_run_first_listed_outermost() -> None:
    log: list[str] = []
    agent = ChatAgent(
        ScriptedChatClient(["hello"]),
        name="a",
        middleware=[Tracing("outer", log), Tracing("inner", log)],
    )
    response = await agent.run("hi")
    assert response.text == "hello"
    assert log == [
        "outer before (run)",
        "inner before (run)",
        "inner after: hello",
        "outer after: hello",
    ]


async def test_middleware_can_rewrite_input_and_options() -> None:
    @agent_middleware
    async def polite(context: AgentRunContext, call_next):  # type: ignore[no-untyped-def]
        context.messages = [Message("user", context.messages[-1].text + ", please")]
        context.options = ChatOptions(temperature=0.0)
        await call_next()

    client = ScriptedChatClient(["ok"])
    agent = ChatAgent(client, name="a", middleware=[polite])
    response = await agent.run("help")
    assert client.calls[0].messages[-1].text == "help, please"
    assert client.calls[0].options.temperature == 0.0
    stored = await response.thread.get_messages()  # type: ignore[union-attr]
    assert stored[0].text == "help, please"


async def test_middleware_can_answer_without_running_the_agent() -> None:
    @agent_middleware
    async def cached(context: AgentRunContext, call_next):  # type: ignore[no-untyped-def]
        context.response = AgentResponse([Message("assistant", "from cache")])

    client = ScriptedChatClient([])
    agent = ChatAgent(client, name="a", middleware=[cached])
    assert (await agent.run("hi")).text == "from cache"
    stream = agent.run_stream("hi")
    assert [u.text async for u in stream] == ["from cache"]
    assert stream.response.text == "from cache"
    assert client.calls == []


async def test_an_answer_from_middleware_is_recorded_and_carries_the_thread() -> None:
    earlier = LocalThread()  # the thread a cached response came with is never written

    @agent_middleware
    async def cached(context: AgentRunContext, call_next):  # type: ignore[no-untyped-def]
        if context.messages[-1].text == "hi":
            context.response = AgentResponse([Message("assistant", "hello")], thread=earlier)
        else:
            await call_next()

    client = ScriptedChatClient(["fine", "fine"])
    agent = ChatAgent(client, name="a", middleware=[cached])
    for streaming in (False, True):
        if streaming:
            first = await agent.run_stream("hi").get_response()
        else:
            first = await agent.run("hi")
        thread = first.thread
        assert isinstance(thread, LocalThread) and thread is not earlier
        assert [m.text for m in await thread.get_messages()] == ["hi", "hello"]
        assert first.messages[0].author_name == "a"
        await agent.run("and you?", thread=thread)
        assert [m.text for m in client.calls[-1].messages] == ["hi", "hello", "and you?"]
    assert await earlier.get_messages() == []


async def test_a_fallback_answer_after_a_failed_run_is_recorded_once() -> None:
    @agent_middleware
    async def fallback(context: AgentRunContext, call_next):  # type: ignore[no-untyped-def]
        try:
            await call_next()
        except ModelError:
            context.response = AgentResponse([Message("assistant", "try again later")])

    agent = ChatAgent(ScriptedChatClient([]), name="a", middleware=[fallback])  # always fails
    for streaming in (False, True):
        for given in (agent.create_thread(), None):
            if streaming:
                response = await agent.run_stream("hi", thread=given).get_response()
            else:
                response = await agent.run("hi", thread=given)
            thread = response.thread
            assert thread is not None and (given is None or thread is given)
            assert [m.text for m in await thread.get_messages()] == ["hi", "try again later"]


async def test_middleware_that_neither_continues_nor_answers_is_an_error() -> None:
    @agent_middleware
    async def lazy(context: AgentRunContext, call_next):  # type: ignore[no-untyped-def]
        return None

    agent = ChatAgent(ScriptedChatClient([]), name="lazy_agent", middleware=[lazy])
    with pytest.raises(AgentError, match="lazy_agent"):
        await agent.run("hi")


async def test_streaming_through_middleware_yields_updates_before_the_after_part() -> None:
    log: list[str] = []
    client = ScriptedChatClient([[tool_call("add", {"a": 1, "b": 2})], "three is the sum"])
    agent = ChatAgent(client, name="a", tools=[add], middleware=[Tracing("mw", log)])
    stream = agent.run_stream("1+2")
    texts = []
    async for update in stream:
        texts.append(update.text)
        if update.text:
            assert log == ["mw before (stream)"]  # the middleware still waits in call_next
    assert "".join(texts) == "three is the sum"
    assert log[-1] == "mw after: three is the sum"
    assert stream.response.text == "three is the sum"
    stored = await stream.response.thread.get_messages()  # type: ignore[union-attr]
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]


async def test_errors_inside_a_streamed_run_reach_the_caller() -> None:
    agent = ChatAgent(ScriptedChatClient([]), name="a", middleware=[Tracing("mw", [])])
    with pytest.raises(Exception, match="ran out of turns"):
        await agent.run_stream("hi").get_response()


async def test_agent_and_chat_middleware_mix_in_one_list() -> None:
    seen: list[int] = []

    @chat_middleware
    async def count(context, call_next):  # type: ignore[no-untyped-def]
        seen.append(len(context.messages))
        await call_next()

    log: list[str] = []
    agent = ChatAgent(ScriptedChatClient(["x"]), name="a", middleware=[Tracing("mw", log), count])
    await agent.run("hi")
    assert seen == [1] and log[0] == "mw before (run)"


async def test_closing_a_middleware_stream_early_stops_the_run() -> None:
    log: list[str] = []
    client = ScriptedChatClient([[tool_call("add", {"a": 1, "b": 2})], "a long answer here"])
    agent = ChatAgent(client, name="a", tools=[add], middleware=[Tracing("mw", log)])
    thread = agent.create_thread()
    stream = agent.run_stream("1+2", thread=thread)
    async for update in stream:
        if update.text:
            break
    await stream.aclose()
    assert log == ["mw before (stream)"]
    assert [m.role for m in await thread.get_messages()] == ["user", "assistant", "tool"]


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_retry_after_a_failed_step_keeps_the_done_tool_turn_and_records_once(
    streaming: bool,
) -> None:
    attempts: list[int] = []

    @agent_middleware
    async def retry_once(context: AgentRunContext, call_next):  # type: ignore[no-untyped-def]
        try:
            attempts.append(1)
            await call_next()
        except ModelError:
            attempts.append(2)
            await call_next()

    client = ScriptedChatClient(
        [
            [tool_call("add", {"a": 1, "b": 2}, call_id="c1")],
            ModelError("the second model call fails"),
            "three",
        ]
    )
    intermediate: list[str] = []
    agent = ChatAgent(client, name="a", tools=[add], middleware=[retry_once])
    thread = agent.create_thread()
    if streaming:
        response = await agent.run_stream(
            "1+2", thread=thread, on_intermediate=lambda m: intermediate.append(m.role)
        ).get_response()
    else:
        response = await agent.run(
            "1+2", thread=thread, on_intermediate=lambda m: intermediate.append(m.role)
        )
    assert attempts == [1, 2] and response.text == "three"
    stored = await thread.get_messages()
    # the input once; the first attempt's finished tool turn stays; the retry answers
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert [m.text for m in stored][-1] == "three"
    assert len({m.message_id for m in stored}) == len(stored)
    assert intermediate == ["assistant", "tool"]  # told once, by the attempt that made them
    # the retry asked the model with the finished tool turn in view
    assert [m.role for m in client.calls[-1].messages] == ["user", "assistant", "tool"]
