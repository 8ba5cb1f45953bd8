"""ChatAgent: one call's steps, the no-duplicate rule, streaming, and the argument-leak rule."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from pydantic import BaseModel

from cantata.agents import (
    AGENT_ID_KEY,
    AgentResponseUpdate,
    AgentRunContext,
    ChatAgent,
    LocalThread,
    ServiceThread,
    TruncatingReducer,
    agent_middleware,
)
from cantata.core import (
    AgentError,
    CancellationToken,
    CancelledError,
    ConfigurationError,
    FunctionApprovalRequestContent,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    ModelError,
    ThreadError,
    Usage,
)
from cantata.models import ChatOptions, ChatResponse, ScriptedChatClient, tool_call
from cantata.tools import FunctionInvokingChatClient, ToolContext, chat_middleware, tool


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def _calc(script: list[Any], **kwargs: Any) -> tuple[ChatAgent, ScriptedChatClient]:
    client = ScriptedChatClient(script)
    agent = ChatAgent(client, name="calc", instructions="You add numbers.", tools=[add], **kwargs)
    return agent, client


class RecordingThread(LocalThread):
    """Counts every notification, to check the no-duplicate rule."""

    def __init__(self) -> None:
        super().__init__()
        self.notified: list[str] = []

    async def _on_new_messages(self, messages: list[Message]) -> None:
        self.notified.extend(m.message_id for m in messages)
        await super()._on_new_messages(messages)


# --- one call ----------------------------------------------------------------------


async def test_run_without_thread_creates_one_and_returns_it() -> None:
    agent, _ = _calc(["hello"])
    response = await agent.run("hi")
    assert isinstance(response.thread, LocalThread)
    assert response.thread.state == "created"
    assert [m.text for m in await response.thread.get_messages()] == ["hi", "hello"]


async def test_the_returned_thread_continues_the_conversation() -> None:
    agent, client = _calc(["one", "two"])
    first = await agent.run("a")
    await agent.run("b", thread=first.thread)
    assert [m.text for m in client.calls[1].messages] == ["You add numbers.", "a", "one", "b"]


async def test_response_holds_the_new_messages_of_the_run_in_order() -> None:
    agent, _ = _calc([[tool_call("add", {"a": 2, "b": 3}, call_id="c1")], "5"])
    response = await agent.run("2+3?")
    kinds = [(m.role, type(m.contents[0]).__name__) for m in response.messages]
    assert kinds == [
        ("assistant", "FunctionCallContent"),
        ("tool", "FunctionResultContent"),
        ("assistant", "TextContent"),
    ]
    assert response.messages[1].contents[0] == FunctionResultContent("c1", 5)
    assert response.text == "5"


async def test_thread_holds_input_then_every_produced_message_in_order() -> None:
    agent, _ = _calc([[tool_call("add", {"a": 2, "b": 3})], "5"])
    response = await agent.run("2+3?")
    stored = await response.thread.get_messages()  # type: ignore[union-attr]
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[1:] == response.messages


async def test_produced_messages_are_named_with_the_agent_name() -> None:
    agent, _ = _calc([[tool_call("add", {"a": 1, "b": 1})], "2"])
    response = await agent.run("1+1")
    assert {m.author_name for m in response.messages} == {"calc"}


@pytest.mark.parametrize(
    ("given", "expected"),
    [(None, 0), ("text", 1), (Message("user", "msg"), 1), (["a", Message("user", "b")], 2)],
)
async def test_input_is_normalized_and_tagged_with_the_agent_id(given: Any, expected: int) -> None:
    agent, client = _calc(["ok"])
    response = await agent.run(given)
    stored = await response.thread.get_messages()  # type: ignore[union-attr]
    incoming = stored[:-1]
    assert len(incoming) == expected
    assert all(m.role == "user" and m.metadata[AGENT_ID_KEY] == agent.id for m in incoming)
    assert len(client.calls[0].messages) == expected + 1  # + the system message


async def test_callers_message_object_is_not_changed() -> None:
    agent, _ = _calc(["ok"])
    mine = Message("user", "hi")
    await agent.run(mine)
    assert mine.metadata == {}


async def test_system_message_never_reaches_the_store() -> None:
    agent, client = _calc([[tool_call("add", {"a": 1, "b": 1})], "2", "3"])
    response = await agent.run("1+1")
    await agent.run("again", thread=response.thread)
    for call in client.calls:
        assert call.messages[0].role == "system"
        assert call.messages[0].text == "You add numbers."
    stored = await response.thread.get_messages()  # type: ignore[union-attr]
    assert all(m.role != "system" for m in stored)


async def test_no_message_is_notified_twice() -> None:
    agent, _ = _calc(
        [[tool_call("add", {"a": 1, "b": 1})], [tool_call("add", {"a": 2, "b": 2})], "4"]
    )
    thread = RecordingThread()
    await agent.run("go", thread=thread)
    assert len(thread.notified) == len(set(thread.notified)) == 6


class _SilentLoop(FunctionInvokingChatClient):
    """A loop that never calls on_message: the agent must drain the response instead."""

    async def get_response(self, messages: Sequence[Message], **kwargs: Any) -> ChatResponse:
        kwargs["on_message"] = None
        return await super().get_response(messages, **kwargs)


class _ChattyLoop(FunctionInvokingChatClient):
    """A loop that reports every message twice: the agent must record it once."""

    async def get_response(self, messages: Sequence[Message], **kwargs: Any) -> ChatResponse:
        callback = kwargs["on_message"]

        async def twice(message: Message) -> None:
            await callback(message)
            await callback(message)

        kwargs["on_message"] = twice
        response = await super().get_response(messages, **kwargs)
        for message in response.messages:
            await callback(message)
        return response


@pytest.mark.parametrize("loop_type", [_SilentLoop, _ChattyLoop])
async def test_tool_messages_are_drained_into_the_thread_exactly_once(loop_type: type) -> None:
    script = ScriptedChatClient([[tool_call("add", {"a": 1, "b": 2})], "3"])
    agent = ChatAgent(loop_type(script, tools=[add]), name="calc")
    thread = RecordingThread()
    response = await agent.run("1+2", thread=thread)
    assert len(thread.notified) == 4 == len(set(thread.notified))
    stored = await thread.get_messages()
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[1:] == response.messages
    assert all(m.author_name == "calc" for m in response.messages)


async def test_on_intermediate_sees_tool_calls_and_results_but_not_the_answer() -> None:
    agent, _ = _calc([[tool_call("add", {"a": 1, "b": 2})], "3"])
    seen: list[Message] = []

    async def on_intermediate(message: Message) -> None:
        seen.append(message)

    response = await agent.run("1+2", on_intermediate=on_intermediate)
    assert seen == response.messages[:2]
    assert isinstance(seen[0].contents[0], FunctionCallContent)


async def test_sync_on_intermediate_is_accepted() -> None:
    agent, _ = _calc([[tool_call("add", {"a": 1, "b": 2})], "3"])
    seen: list[str] = []
    await agent.run("1+2", on_intermediate=lambda m: seen.append(m.role))
    assert seen == ["assistant", "tool"]


async def test_usage_is_summed_and_response_reads_like_its_last_message() -> None:
    client = ScriptedChatClient([[tool_call("add", {"a": 1, "b": 2})], "3"], usage=Usage(10, 2))
    agent = ChatAgent(client, name="calc", tools=[add])
    response = await agent.run("1+2")
    assert response.usage == Usage(20, 4)
    assert response.role == "assistant"
    assert response.author_name == "calc"
    assert response.content == "3"
    assert str(response) == "3"


class Answer(BaseModel):
    city: str
    temperature: int


async def test_structured_output_is_validated_into_value() -> None:
    client = ScriptedChatClient(['{"city": "Oslo", "temperature": 4}'])
    agent = ChatAgent(client, name="weather")
    response = await agent.run("weather?", options=ChatOptions(response_format=Answer))
    assert response.value == Answer(city="Oslo", temperature=4)


async def test_history_reducer_shrinks_the_request_not_the_thread() -> None:
    agent, client = _calc(["1", "2", "3"], history_reducer=TruncatingReducer(keep_last=2))
    thread = agent.create_thread()
    for text in ("a", "b", "c"):
        await agent.run(text, thread=thread)
    assert [m.text for m in client.calls[2].messages] == ["You add numbers.", "2", "c"]
    assert len(await thread.get_messages()) == 6


async def test_history_reducer_applies_to_every_model_call_of_the_loop() -> None:
    agent, client = _calc(
        [[tool_call("add", {"a": 1, "b": 2})], "3"], history_reducer=TruncatingReducer(keep_last=2)
    )
    thread = agent.create_thread()
    await thread.on_new_message([Message("user", "old"), Message("assistant", "older")])
    await agent.run("1+2", thread=thread)
    first, second = ([m.role for m in c.messages] for c in client.calls)
    assert first == ["system", "assistant", "user"]
    # the call stays with its result, and the question they answer stays too
    assert second == ["system", "user", "assistant", "tool"]
    assert len(await thread.get_messages()) == 6


async def test_history_reducer_with_a_caller_built_loop_runs_before_the_loop() -> None:
    script = ScriptedChatClient(["1", "2"])
    loop = FunctionInvokingChatClient(script)
    agent = ChatAgent(loop, name="a", history_reducer=TruncatingReducer(keep_last=1))
    response = await agent.run("x")
    await agent.run("y", thread=response.thread)
    assert [m.text for m in script.calls[1].messages] == ["y"]


async def test_tool_kwargs_reach_the_tool_context() -> None:
    seen: dict[str, Any] = {}

    @tool
    def whoami(context: ToolContext) -> str:
        """Who is asking."""
        seen.update(context.kwargs)
        return str(context.kwargs["user_id"])

    client = ScriptedChatClient([[tool_call("whoami")], "done"])
    agent = ChatAgent(client, name="a", tools=[whoami])
    await agent.run("who?", tool_kwargs={"user_id": "u-42"})
    assert seen == {"user_id": "u-42"}


async def test_plain_functions_are_accepted_as_tools() -> None:
    def double(x: int) -> int:
        """Double it."""
        return 2 * x

    client = ScriptedChatClient([[tool_call("double", {"x": 4})], "8"])
    response = await ChatAgent(client, name="a", tools=[double]).run("4*2")
    assert response.messages[1].contents[0].result == 8  # type: ignore[union-attr]


async def test_approval_stops_the_run_and_the_answer_resumes_it() -> None:
    @tool(approval_mode="always_require")
    def delete_file(path: str) -> str:
        """Delete a file."""
        return f"deleted {path}"

    client = ScriptedChatClient([[tool_call("delete_file", {"path": "/tmp/x"})], "gone", "ok"])
    agent = ChatAgent(client, name="ops", tools=[delete_file])
    first = await agent.run("delete /tmp/x")
    assert first.finish_reason == "approval_required"
    (request,) = first.user_input_requests
    assert isinstance(request, FunctionApprovalRequestContent)
    second = await agent.run(Message("user", [request.create_response(True)]), thread=first.thread)
    assert second.text == "gone"
    results = [c for m in second.messages for c in m.function_results]
    assert results[0].result == "deleted /tmp/x"
    third = await agent.run("thanks", thread=first.thread)
    assert third.text == "ok"
    sent = client.calls[-1].messages
    issued = {c.call_id for m in sent for c in m.function_calls}
    assert all(r.call_id in issued for m in sent for r in m.function_results)


# --- threads and errors ------------------------------------------------------------


class _Remote(ServiceThread):
    async def _create_on_service(self) -> str:
        return "r1"

    async def _delete_on_service(self, thread_id: str) -> None:
        pass


async def test_thread_of_the_wrong_kind_names_both_kinds() -> None:
    agent, _ = _calc(["x"])
    with pytest.raises(ThreadError, match=r"`_Remote`.*`calc` of kind `ChatAgent`"):
        await agent.run("hi", thread=_Remote())


async def test_deleted_thread_is_refused_by_the_agent() -> None:
    agent, _ = _calc(["x"])
    thread = agent.create_thread()
    await thread.delete()
    with pytest.raises(ThreadError, match="deleted"):
        await agent.run("hi", thread=thread)


@pytest.mark.parametrize("name", ["", "has space", "dot.name", "x" * 65, "é", "calc\n"])
def test_invalid_agent_names_are_refused(name: str) -> None:
    with pytest.raises(ConfigurationError, match="agent name"):
        ChatAgent(ScriptedChatClient([]), name=name)


def test_a_non_client_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="not a ChatClient"):
        ChatAgent(object(), name="a")  # type: ignore[arg-type]


async def test_cancelled_token_stops_before_anything_is_stored() -> None:
    agent, client = _calc(["x"])
    token = CancellationToken()
    token.cancel()
    thread = agent.create_thread()
    with pytest.raises(CancelledError):
        await agent.run("hi", thread=thread, cancellation_token=token)
    assert await thread.get_messages() == [] and client.calls == []


def _dangling_calls(messages: Sequence[Message]) -> set[str]:
    issued = {c.call_id for m in messages for c in m.function_calls}
    answered = {r.call_id for m in messages for r in m.function_results}
    return issued - answered


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_run_that_fails_between_call_and_result_leaves_no_dangling_call(
    streaming: bool,
) -> None:
    token = CancellationToken()

    @tool
    def stop(x: int) -> int:
        """Cancels the run from inside the tool call."""
        token.cancel()
        return x

    client = ScriptedChatClient([[tool_call("stop", {"x": 1}, call_id="c1")], "later"])
    agent = ChatAgent(client, name="a", tools=[stop])
    thread = agent.create_thread()
    with pytest.raises(CancelledError):
        if streaming:
            await agent.run_stream("go", thread=thread, cancellation_token=token).get_response()
        else:
            await agent.run("go", thread=thread, cancellation_token=token)
    stored = await thread.get_messages()
    assert [m.text for m in stored] == ["go"]
    assert _dangling_calls(stored) == set()
    assert (await agent.run("again", thread=thread)).text == "later"
    assert _dangling_calls(client.calls[-1].messages) == set()


async def test_a_terminated_run_leaves_no_dangling_call() -> None:
    @chat_middleware
    async def stop(context, call_next):  # type: ignore[no-untyped-def]
        await call_next()
        context.terminate = True

    client = ScriptedChatClient([[tool_call("add", {"a": 1, "b": 2})], "x"])
    agent = ChatAgent(client, name="a", tools=[add], middleware=[stop])
    response = await agent.run("hi")
    assert response.finish_reason == "terminated"
    assert _dangling_calls(await response.thread.get_messages()) == set()  # type: ignore[union-attr]


async def test_a_retrying_agent_middleware_records_the_input_once() -> None:
    @agent_middleware
    async def retry(context: AgentRunContext, call_next):  # type: ignore[no-untyped-def]
        try:
            await call_next()
        except ModelError:
            await call_next()

    calls = 0

    def flaky(messages: list[Message], options: ChatOptions) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise ModelError("temporarily down")
        return "fine"

    agent = ChatAgent(ScriptedChatClient(flaky), name="a", middleware=[retry])
    for streaming in (False, True):
        for given in (RecordingThread(), None):  # with no thread, both attempts use one
            calls = 0
            if streaming:
                response = await agent.run_stream("hi", thread=given).get_response()
            else:
                response = await agent.run("hi", thread=given)
            assert response.text == "fine"
            thread = response.thread
            assert thread is not None and (given is None or thread is given)
            assert [m.text for m in await thread.get_messages()] == ["hi", "fine"]
            if isinstance(thread, RecordingThread):
                assert len(thread.notified) == len(set(thread.notified)) == 2


async def test_serialized_thread_continues_exactly_where_it_stopped() -> None:
    agent, client = _calc([[tool_call("add", {"a": 1, "b": 2})], "3", "yes"])
    first = await agent.run("1+2")
    data = await first.thread.serialize()  # type: ignore[union-attr]
    restored = await agent.deserialize_thread(data)
    await agent.run("sure?", thread=restored)
    before = await first.thread.get_messages()  # type: ignore[union-attr]
    assert client.calls[-1].messages[1:] == [*before, client.calls[-1].messages[-1]]
    assert restored.id == first.thread.id  # type: ignore[union-attr]


async def test_one_agent_serves_many_threads_at_once() -> None:
    gate = asyncio.Event()
    arrived = 0

    async def script(messages: list[Message], options: ChatOptions) -> str:
        nonlocal arrived
        arrived += 1
        if arrived == 2:
            gate.set()
        await gate.wait()  # both runs are inside the model call together
        return f"echo {messages[-1].text}"

    agent = ChatAgent(ScriptedChatClient(script), name="echo")
    a, b = await asyncio.gather(agent.run("A"), agent.run("B"))
    assert a.thread is not b.thread
    assert [m.text for m in await a.thread.get_messages()] == ["A", "echo A"]  # type: ignore[union-attr]
    assert [m.text for m in await b.thread.get_messages()] == ["B", "echo B"]  # type: ignore[union-attr]


async def test_concurrent_runs_keep_their_own_arguments_options_tools_and_kwargs() -> None:
    gate = asyncio.Event()
    arrived = 0
    seen: dict[str, list[tuple[str, float | None, list[str]]]] = {"A": [], "B": []}

    async def script(messages: list[Message], options: ChatOptions) -> Any:
        nonlocal arrived
        who = messages[0].text  # the rendered instructions name the run
        tools = sorted(t.name for t in options.tools or ())
        seen[who].append((messages[1].text, options.temperature, tools))
        if messages[-1].role == "user":
            arrived += 1
            if arrived == 2:
                gate.set()
            await gate.wait()  # both runs are inside a model call together
            return [tool_call(f"tool_{who.lower()}", {})]
        return f"{who} got {messages[-1].function_results[0].result}"

    def make(name: str) -> Any:
        def read(ctx: ToolContext) -> str:
            return f"{name}:{ctx.kwargs['secret']}"

        read.__name__ = read.__qualname__ = f"tool_{name}"
        read.__doc__ = "Reads this run's secret."
        return tool(read)

    agent = ChatAgent(ScriptedChatClient(script), name="a", instructions="{{ who }}")
    a, b = await asyncio.gather(
        agent.run(
            "q-A",
            arguments={"who": "A"},
            tools=[make("a")],
            options=ChatOptions(temperature=0.1),
            tool_kwargs={"secret": "sa"},
        ),
        agent.run("q-B", arguments={"who": "B"}, tools=[make("b")], tool_kwargs={"secret": "sb"}),
    )
    assert (a.text, b.text) == ("A got a:sa", "B got b:sb")
    assert seen["A"] == [("q-A", 0.1, ["tool_a"])] * 2
    assert seen["B"] == [("q-B", None, ["tool_b"])] * 2
    assert agent.arguments == {} and agent.options == ChatOptions() and agent.tools == ()


async def test_two_agents_write_one_thread_in_turn() -> None:
    first = ChatAgent(ScriptedChatClient(["from first"]), name="first")
    second = ChatAgent(ScriptedChatClient(["from second"]), name="second")
    thread = first.create_thread()
    await first.run("hi", thread=thread)
    await second.run("and you?", thread=thread)
    stored = await thread.get_messages()
    assert [(m.author_name, m.text) for m in stored] == [
        (None, "hi"),
        ("first", "from first"),
        (None, "and you?"),
        ("second", "from second"),
    ]
    assert stored[3].metadata[AGENT_ID_KEY] == second.id


# --- streaming -----------------------------------------------------------------------


async def test_stream_yields_text_chunks_and_tool_traffic_as_contents() -> None:
    agent, _ = _calc([[tool_call("add", {"a": 2, "b": 3})], "the answer is five"])
    stream = agent.run_stream("2+3")
    updates: list[AgentResponseUpdate] = [u async for u in stream]
    text_updates = [u for u in updates if u.text]
    assert "".join(u.text for u in text_updates) == "the answer is five"
    assert len(text_updates) > 1
    tool_updates = [
        u
        for u in updates
        if any(isinstance(c, FunctionCallContent | FunctionResultContent) for c in u.contents)
    ]
    assert [u.role for u in tool_updates] == ["assistant", "tool"]
    assert all(u.text == "" for u in tool_updates)
    assert all(u.agent_id == agent.id for u in updates)


async def test_stream_response_matches_what_the_thread_stored() -> None:
    agent, _ = _calc([[tool_call("add", {"a": 2, "b": 3})], "five"])
    stream = agent.run_stream("2+3")
    async for _ in stream:
        pass
    response = stream.response
    assert response.text == "five"
    stored = await response.thread.get_messages()  # type: ignore[union-attr]
    assert stored[1:] == response.messages
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert len({m.message_id for m in stored}) == 4


async def test_stream_get_response_drains_and_returns_the_same() -> None:
    agent, _ = _calc(["hello there"])
    stream = agent.run_stream("hi")
    response = await stream.get_response()
    assert response is stream.response
    assert response.text == "hello there"


async def test_stream_response_before_the_end_is_an_error() -> None:
    agent, _ = _calc(["hello there"])
    stream = agent.run_stream("hi")
    with pytest.raises(AgentError, match="not ended"):
        _ = stream.response
    await stream.get_response()


async def test_stream_calls_on_intermediate_too() -> None:
    agent, _ = _calc([[tool_call("add", {"a": 2, "b": 3})], "five"])
    seen: list[str] = []
    await agent.run_stream("2+3", on_intermediate=lambda m: seen.append(m.role)).get_response()
    assert seen == ["assistant", "tool"]


# --- instructions and the argument-leak rule ------------------------------------------------


async def test_call_arguments_override_agent_arguments_and_do_not_leak() -> None:
    client = ScriptedChatClient(["1", "2", "3"])
    agent = ChatAgent(
        client,
        name="greeter",
        instructions="Greet {{ user }} in {{ language }}.",
        arguments={"user": "Ada", "language": "English"},
        options=ChatOptions(temperature=0.5),
    )
    await agent.run(
        "hi", arguments={"language": "French"}, options=ChatOptions(temperature=0.1, max_tokens=7)
    )
    await agent.run("hi")
    systems = [c.messages[0].text for c in client.calls]
    assert systems == ["Greet Ada in French.", "Greet Ada in English."]
    assert (client.calls[0].options.temperature, client.calls[0].options.max_tokens) == (0.1, 7)
    assert (client.calls[1].options.temperature, client.calls[1].options.max_tokens) == (0.5, None)
    assert agent.arguments == {"user": "Ada", "language": "English"}
    assert agent.options == ChatOptions(temperature=0.5)


async def test_call_tools_do_not_leak_into_the_next_call() -> None:
    @tool
    def extra() -> str:
        """An extra tool for one call."""
        return "x"

    agent, client = _calc(["1", "2"])
    await agent.run("a", tools=[extra])
    await agent.run("b")
    names = [[s.name for s in c.options.tools or ()] for c in client.calls]
    assert names == [["add", "extra"], ["add"]]
    assert [t.name for t in agent.tools] == ["add"]


async def test_missing_template_argument_names_it_and_stores_nothing() -> None:
    agent = ChatAgent(ScriptedChatClient(["x"]), name="greeter", instructions="Hi {{ user }}")
    thread = agent.create_thread()
    with pytest.raises(ConfigurationError, match="user"):
        await agent.run("hi", thread=thread)
    assert await thread.get_messages() == []


async def test_instructions_render_in_a_sandbox() -> None:
    agent = ChatAgent(
        ScriptedChatClient(["x"]),
        name="evil",
        instructions="{{ obj.__class__.__mro__ }}",
        arguments={"obj": "text"},
    )
    with pytest.raises(ConfigurationError, match="evil"):
        await agent.run("hi")


async def test_closing_a_stream_early_keeps_the_completed_messages() -> None:
    agent, _ = _calc([[tool_call("add", {"a": 2, "b": 3})], "a long final answer"])
    thread = agent.create_thread()
    stream = agent.run_stream("2+3", thread=thread)
    async for update in stream:
        if update.text:
            break
    await stream.aclose()
    stored = await thread.get_messages()
    assert [m.role for m in stored] == ["user", "assistant", "tool"]
    assert [u async for u in stream] == []
    with pytest.raises(AgentError):
        _ = stream.response


@pytest.mark.parametrize("stream", [False, True])
async def test_structured_output_after_a_tool_call_is_validated(stream: bool) -> None:
    client = ScriptedChatClient(
        [[tool_call("add", {"a": 20, "b": 1})], '{"city": "Oslo", "temperature": 21}']
    )
    agent = ChatAgent(client, name="weather", tools=[add])
    options = ChatOptions(response_format=Answer)
    if stream:
        run = agent.run_stream("weather?", options=options)
        response = await run.get_response()
    else:
        response = await agent.run("weather?", options=options)
    assert response.value == Answer(city="Oslo", temperature=21)


class _CountingThread(LocalThread):
    """Counts the calls of `on_new_message`, with the size of each batch."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[int] = []

    async def on_new_message(self, messages: Message | Sequence[Message]) -> None:
        self.batches.append(1 if isinstance(messages, Message) else len(messages))
        await super().on_new_message(messages)


async def test_a_run_without_new_input_on_a_created_thread_records_only_its_answer() -> None:
    # As a team's participant runs: the shared history reached the thread before the run.
    agent = ChatAgent(ScriptedChatClient(["hi", "again"]), name="a")
    thread = _CountingThread()
    await thread.on_new_message(Message("user", "hello"))
    await agent.run(thread=thread)
    assert thread.batches == [1, 1]  # the input above, then the answer: no empty batch
    fresh = _CountingThread()
    await agent.run(thread=fresh)  # a new thread is still created by the run
    assert fresh.state == "created" and fresh.batches == [0, 1]
