"""The function-invocation loop, non-streaming: results, errors, limits, concurrency."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from cantata.core import (
    CancellationToken,
    CancelledError,
    ConfigurationError,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    ModelError,
    RetryTool,
    TextContent,
    Usage,
)
from cantata.models import (
    ChatClient,
    ChatOptions,
    ChatResponse,
    ScriptedChatClient,
    ToolSpec,
    tool_call,
)
from cantata.tools import (
    ChatContext,
    ChatNext,
    FunctionInvokingChatClient,
    ToolContext,
    chat_middleware,
    tool,
)


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
async def fail(reason: str = "boom") -> None:
    """Always fails."""
    raise ValueError(reason)


def results_of(response: ChatResponse) -> list[FunctionResultContent]:
    return [r for m in response.messages for r in m.function_results]


def loop(script: Any, **kwargs: Any) -> tuple[FunctionInvokingChatClient, ScriptedChatClient]:
    inner = script if isinstance(script, ScriptedChatClient) else ScriptedChatClient(script)
    kwargs.setdefault("tools", [add, fail])
    return FunctionInvokingChatClient(inner, **kwargs), inner


def always_calls(name: str, arguments: dict[str, Any]) -> ScriptedChatClient:
    """A model that calls a tool on every request, unless told tool_choice='none'."""

    def answer(messages: list[Message], options: ChatOptions) -> Any:
        if options.tool_choice == "none":
            return "giving up"
        return [tool_call(name, arguments)]

    return ScriptedChatClient(answer)


def test_it_is_a_chat_client() -> None:
    client: ChatClient = FunctionInvokingChatClient(ScriptedChatClient(["hi"]))
    assert isinstance(client, ChatClient)


async def test_a_tool_call_round_trip_returns_every_message_in_order() -> None:
    call = tool_call("add", {"a": 2, "b": 3}, call_id="c1")
    client, inner = loop(
        ScriptedChatClient([[call], "five"], usage=Usage(input_tokens=10, output_tokens=2))
    )
    response = await client.get_response([Message("user", "2+3?")])

    assert [m.role for m in response.messages] == ["assistant", "tool", "assistant"]
    assert response.messages[0].function_calls == [call]
    assert response.messages[1].contents == [FunctionResultContent("c1", 5)]
    assert response.text == "five"
    assert response.finish_reason == "stop"
    assert response.usage == Usage(input_tokens=20, output_tokens=4)
    # the second request carried the call and its result
    second = inner.calls[1].messages
    assert [m.role for m in second] == ["user", "assistant", "tool"]
    inner.assert_complete()


async def test_tools_specs_are_sent_and_caller_options_are_kept() -> None:
    declared = ToolSpec("lookup", "Declared by the caller.", {"type": "object"})
    client, inner = loop(["ok"])
    options = ChatOptions(temperature=0.2, tools=[declared], seed=7)
    await client.get_response([Message("user", "x")], options=options)

    sent = inner.calls[0].options
    assert sent.temperature == 0.2 and sent.seed == 7
    assert [s.name for s in sent.tools or []] == ["add", "fail", "lookup"]
    assert options.tools == [declared]  # the caller's options were not changed


async def test_per_call_tools_are_added_to_the_clients_tools() -> None:
    @tool
    def shout(text: str) -> str:
        """Upper-case text."""
        return text.upper()

    client, inner = loop([[tool_call("shout", {"text": "hey"})], "done"])
    response = await client.get_response([Message("user", "x")], tools=[shout])
    assert results_of(response)[0].result == "HEY"
    assert [s.name for s in inner.calls[0].options.tools or []] == ["add", "fail", "shout"]


async def test_two_different_tools_with_one_name_are_refused() -> None:
    other = tool(name="add")(lambda a, b: a - b)
    client, _ = loop(["unused"])
    with pytest.raises(ConfigurationError, match="'add'"):
        await client.get_response([Message("user", "x")], tools=[other])
    with pytest.raises(ConfigurationError, match="'add'"):
        FunctionInvokingChatClient(ScriptedChatClient([]), tools=[add, other])


async def test_invalid_arguments_become_an_error_result_and_the_run_goes_on() -> None:
    client, inner = loop([[tool_call("add", {"a": "two", "b": 3}, call_id="c1")], "sorry"])
    response = await client.get_response([Message("user", "x")])

    [result] = results_of(response)
    assert result.call_id == "c1" and result.result is None
    assert result.error is not None
    assert "invalid arguments for tool 'add'" in result.error
    assert "a: Input should be a valid integer" in result.error
    assert inner.calls[1].messages[-1].function_results == [result]
    assert response.text == "sorry"


async def test_a_raising_tool_becomes_an_error_result() -> None:
    client, _ = loop([[tool_call("fail", {"reason": "disk full"})], "oh no"])
    response = await client.get_response([Message("user", "x")])
    [result] = results_of(response)
    assert result.error == "tool 'fail' failed: ValueError: disk full"
    assert response.text == "oh no"


async def test_retry_tool_sends_its_message_to_the_model() -> None:
    @tool
    def pick(n: int) -> int:
        """Pick a number."""
        if n != 7:
            raise RetryTool("pick 7 instead")
        return n

    client, _ = loop(
        [[tool_call("pick", {"n": 3})], [tool_call("pick", {"n": 7})], "seven"], tools=[pick]
    )
    response = await client.get_response([Message("user", "x")])
    first, second = results_of(response)
    assert first.error == "pick 7 instead"
    assert second.result == 7 and second.error is None


async def test_an_unknown_tool_becomes_an_error_result_naming_the_tools() -> None:
    client, _ = loop([[tool_call("multiply", {"a": 1})], "hmm"])
    response = await client.get_response([Message("user", "x")])
    [result] = results_of(response)
    assert (
        result.error == "there is no tool named 'multiply'; the available tools are: 'add', 'fail'"
    )


async def test_a_result_that_cannot_be_converted_to_json_does_not_crash_the_run() -> None:
    class Handle:
        def __init__(self) -> None:
            self.lock = threading.Lock()

        def __str__(self) -> str:
            return "a handle"

    @dataclasses.dataclass
    class Opened:
        path: str
        handle: Handle

    @tool
    def open_file(path: str) -> Opened:
        """Open a file (returns an object holding a lock)."""
        return Opened(path, Handle())

    client, _ = loop([[tool_call("open_file", {"path": "a.txt"})], "opened"], tools=[open_file])
    response = await client.get_response([Message("user", "x")])
    [result] = results_of(response)
    assert result.error is None
    assert result.result["path"] == "a.txt"
    assert response.text == "opened"


async def test_deeply_nested_argument_json_becomes_an_error_result() -> None:
    deep = "[" * 50_000 + "]" * 50_000
    call = tool_call("add", '{"a": ' + deep + ', "b": 1}', call_id="deep")
    client, _ = loop([[call], "hmm"])
    response = await client.get_response([Message("user", "x")])
    [result] = results_of(response)
    assert result.call_id == "deep"
    assert result.error is not None and "'add'" in result.error
    assert response.text == "hmm"


async def test_unparseable_argument_json_becomes_an_error_result() -> None:
    client, _ = loop([[tool_call("add", '{"a": 1, "b":', call_id="c9")], "hmm"])
    response = await client.get_response([Message("user", "x")])
    [result] = results_of(response)
    assert result.call_id == "c9"
    assert result.error is not None and "not valid JSON" in result.error


async def test_results_form_one_tool_message_in_the_order_of_the_calls() -> None:
    release_first = asyncio.Event()

    @tool
    async def slow(tag: str) -> str:
        """Finishes only after the fast one."""
        await asyncio.wait_for(release_first.wait(), 5)
        return tag

    @tool
    async def fast(tag: str) -> str:
        """Finishes first."""
        release_first.set()
        return tag

    calls = [
        tool_call("slow", {"tag": "s"}, call_id="1"),
        tool_call("fast", {"tag": "f"}, call_id="2"),
    ]
    client, _ = loop([calls, "done"], tools=[slow, fast])
    response = await client.get_response([Message("user", "x")])
    [tool_message] = [m for m in response.messages if m.role == "tool"]
    assert tool_message.contents == [
        FunctionResultContent("1", "s"),
        FunctionResultContent("2", "f"),
    ]


async def test_calls_of_one_turn_run_concurrently() -> None:
    started = {"a": asyncio.Event(), "b": asyncio.Event()}

    @tool
    async def meet(me: str, other: str) -> str:
        """Wait until the other call has started too."""
        started[me].set()
        await asyncio.wait_for(started[other].wait(), 5)
        return me

    calls = [
        tool_call("meet", {"me": "a", "other": "b"}),
        tool_call("meet", {"me": "b", "other": "a"}),
    ]
    client, _ = loop([calls, "met"], tools=[meet])
    response = await client.get_response([Message("user", "x")])
    assert [r.result for r in results_of(response)] == ["a", "b"]


async def test_sync_tools_of_one_turn_run_concurrently_in_threads() -> None:
    barrier = threading.Barrier(2, timeout=5)

    @tool
    def rendezvous(tag: str) -> str:
        """Both calls must be inside at once to pass the barrier."""
        barrier.wait()
        return tag

    calls = [tool_call("rendezvous", {"tag": "x"}), tool_call("rendezvous", {"tag": "y"})]
    client, _ = loop([calls, "ok"], tools=[rendezvous])
    response = await client.get_response([Message("user", "x")])
    assert [r.result for r in results_of(response)] == ["x", "y"]


async def test_calls_run_one_after_another_when_concurrency_is_off() -> None:
    events: list[str] = []

    @tool
    async def step(tag: str) -> str:
        """Record start and end."""
        events.append(f"start {tag}")
        await asyncio.sleep(0)
        events.append(f"end {tag}")
        return tag

    calls = [tool_call("step", {"tag": "1"}), tool_call("step", {"tag": "2"})]
    client, _ = loop([calls, "ok"], tools=[step], concurrent_calls=False)
    await client.get_response([Message("user", "x")])
    assert events == ["start 1", "end 1", "start 2", "end 2"]


async def test_max_iterations_forces_a_final_text_answer() -> None:
    inner = always_calls("add", {"a": 1, "b": 1})
    client, _ = loop(inner, max_iterations=2)
    response = await client.get_response([Message("user", "x")])

    assert len(inner.calls) == 3
    assert [c.options.tool_choice for c in inner.calls] == [None, None, "none"]
    assert response.text == "giving up"
    assert response.finish_reason == "stop"
    assert response.messages[-1].metadata["cantata.limit"] == "max_iterations"
    assert [r.result for r in results_of(response)] == [2, 2]


async def test_max_function_calls_stops_running_tools() -> None:
    calls = [tool_call("add", {"a": i, "b": 0}, call_id=f"c{i}") for i in range(3)]
    inner = ScriptedChatClient([calls, "ran out"])
    client, _ = loop(inner, max_function_calls=2)
    response = await client.get_response([Message("user", "x")])

    first, second, third = results_of(response)
    assert (first.result, second.result) == (0, 1)
    assert third.call_id == "c2"
    assert third.error == "not run: this run reached its limit of 2 function calls"
    assert inner.calls[-1].options.tool_choice == "none"
    assert response.messages[-1].metadata["cantata.limit"] == "max_function_calls"


async def test_max_consecutive_errors_stops_a_failing_run() -> None:
    inner = always_calls("fail", {})
    client, _ = loop(inner, max_consecutive_errors=2, max_iterations=10)
    response = await client.get_response([Message("user", "x")])
    assert len(inner.calls) == 3
    assert response.messages[-1].metadata["cantata.limit"] == "max_consecutive_errors"


async def test_a_successful_turn_resets_the_consecutive_error_count() -> None:
    script = [
        [tool_call("fail")],
        [tool_call("add", {"a": 1, "b": 1})],
        [tool_call("fail")],
        "done",
    ]
    client, inner = loop(script, max_consecutive_errors=2)
    response = await client.get_response([Message("user", "x")])
    assert response.text == "done"
    assert "cantata.limit" not in response.messages[-1].metadata
    inner.assert_complete()


async def test_tool_calls_in_the_final_limit_answer_are_dropped() -> None:
    inner = ScriptedChatClient(
        [
            [tool_call("add", {"a": 1, "b": 2})],
            [TextContent("fine"), tool_call("add", {"a": 0, "b": 0})],
        ]
    )
    client, _ = loop(inner, max_iterations=1)
    response = await client.get_response([Message("user", "x")])
    assert response.messages[-1].contents == [TextContent("fine")]
    assert response.finish_reason == "stop"
    assert len(results_of(response)) == 1


async def test_a_limit_answer_of_only_tool_calls_still_records_the_limit() -> None:
    # a model that ignores tool_choice="none": its calls are dropped, nothing is left, and
    # the caller must still learn that the run stopped at a limit
    inner = ScriptedChatClient(
        [[tool_call("add", {"a": 1, "b": 2})], [tool_call("add", {"a": 0, "b": 0})]]
    )
    client, _ = loop(inner, max_iterations=1)
    seen: list[Message] = []
    response = await client.get_response([Message("user", "x")], on_message=seen.append)
    assert [m.role for m in response.messages] == ["assistant", "tool", "assistant"]
    assert response.messages[-1].metadata["cantata.limit"] == "max_iterations"
    assert response.messages[-1].function_calls == []
    assert response.text == ""
    assert response.finish_reason == "stop"
    assert seen == response.messages


async def test_required_tool_choice_becomes_auto_after_the_first_turn() -> None:
    client, inner = loop([[tool_call("add", {"a": 1, "b": 1})], "2"])
    await client.get_response([Message("user", "x")], options=ChatOptions(tool_choice="required"))
    assert [c.options.tool_choice for c in inner.calls] == ["required", "auto"]


async def test_tool_kwargs_and_call_id_reach_the_tool_context() -> None:
    seen: list[tuple[str | None, Any]] = []

    @tool
    def whoami(ctx: ToolContext) -> str:
        """Who is asking."""
        seen.append((ctx.call_id, ctx.kwargs["user"]))
        return str(ctx.kwargs["user"])

    client, _ = loop([[tool_call("whoami", call_id="c1")], "ok"], tools=[whoami])
    await client.get_response([Message("user", "x")], tool_kwargs={"user": "ada"})
    assert seen == [("c1", "ada")]


async def test_on_message_sees_every_produced_message_in_order() -> None:
    seen: list[Message] = []

    async def record(message: Message) -> None:
        seen.append(message)

    client, _ = loop(
        [[tool_call("add", {"a": 1, "b": 1})], [tool_call("add", {"a": 2, "b": 2})], "4"]
    )
    response = await client.get_response([Message("user", "x")], on_message=record)
    assert seen == response.messages
    assert [m.role for m in seen] == ["assistant", "tool", "assistant", "tool", "assistant"]


async def test_a_sync_on_message_callback_works_too() -> None:
    seen: list[str] = []
    client, _ = loop(["hello"])
    await client.get_response([Message("user", "x")], on_message=lambda m: seen.append(m.text))
    assert seen == ["hello"]


class Answer(BaseModel):
    value: int


async def test_structured_output_is_the_value_of_the_final_answer() -> None:
    client, _ = loop([[tool_call("add", {"a": 20, "b": 22})], '{"value": 42}'])
    response = await client.get_response(
        [Message("user", "x")], options=ChatOptions(response_format=Answer)
    )
    assert response.value == Answer(value=42)


async def test_calls_to_tools_the_caller_declared_are_returned_not_run() -> None:
    declared = ToolSpec("client_side", "The caller runs this.", {"type": "object"})
    call = tool_call("client_side", {"x": 1})
    client, inner = loop([[call]])
    response = await client.get_response(
        [Message("user", "x")], options=ChatOptions(tools=[declared])
    )
    assert response.finish_reason == "tool_calls"
    assert response.function_calls == [call]
    assert [m.role for m in response.messages] == ["assistant"]
    inner.assert_complete()


async def test_own_calls_beside_a_declared_one_run_and_the_declared_one_is_returned() -> None:
    declared = ToolSpec("client_side", "The caller runs this.", {"type": "object"})
    own = tool_call("add", {"a": 1, "b": 2}, call_id="own")
    theirs = tool_call("client_side", {"x": 1}, call_id="theirs")
    client, inner = loop([[own, theirs]])
    response = await client.get_response(
        [Message("user", "x")], options=ChatOptions(tools=[declared])
    )
    assert response.finish_reason == "tool_calls"
    assert [m.role for m in response.messages] == ["assistant", "tool"]
    (result,) = response.messages[1].function_results
    assert (result.call_id, result.result) == ("own", 3)
    inner.assert_complete()


async def test_a_model_error_propagates() -> None:
    client, _ = loop([ModelError("server down")])
    with pytest.raises(ModelError, match="server down"):
        await client.get_response([Message("user", "x")])


async def test_cancellation_inside_a_tool_propagates() -> None:
    token = CancellationToken()

    @tool
    def stop_everything(ctx: ToolContext) -> None:
        """Cancel the run from inside."""
        ctx.cancellation_token.cancel()
        ctx.cancellation_token.raise_if_cancelled()

    client, _ = loop([[tool_call("stop_everything")], "never"], tools=[stop_everything])
    with pytest.raises(CancelledError):
        await client.get_response([Message("user", "x")], cancellation_token=token)


async def test_cancelling_the_token_interrupts_a_waiting_tool() -> None:
    token = CancellationToken()
    entered = asyncio.Event()
    forever = asyncio.Event()

    @tool
    async def wait_forever() -> None:
        """Never finishes on its own."""
        entered.set()
        await forever.wait()

    client, _ = loop([[tool_call("wait_forever")], "never"], tools=[wait_forever])
    run = asyncio.ensure_future(
        client.get_response([Message("user", "x")], cancellation_token=token)
    )
    await entered.wait()
    token.cancel()
    with pytest.raises(CancelledError):
        await run


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"max_iterations": 0}, "max_iterations"),
        ({"max_function_calls": -1}, "max_function_calls"),
        ({"max_consecutive_errors": 0}, "max_consecutive_errors"),
        ({"middleware": [object()]}, "ChatMiddleware or FunctionMiddleware"),
        ({"tools": [add.func]}, "not a FunctionTool"),
    ],
)
def test_bad_configuration_is_refused(kwargs: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ConfigurationError, match=fragment):
        FunctionInvokingChatClient(ScriptedChatClient([]), **kwargs)


def test_wrapping_something_that_is_not_a_chat_client_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="ChatClient"):
        FunctionInvokingChatClient(object())  # type: ignore[arg-type]


json_scalars = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)


@settings(max_examples=100, deadline=None)
@given(
    arguments=st.dictionaries(
        st.sampled_from(["a", "b"]) | st.text(max_size=4), json_values, max_size=3
    )
    | st.text(max_size=20)
)
async def test_fuzzed_tool_arguments_never_crash_the_run(arguments: dict[str, Any] | str) -> None:
    call = FunctionCallContent("fz", "add", arguments)
    client, _ = loop([[call], "done"])
    response = await client.get_response([Message("user", "x")])
    [result] = results_of(response)
    assert result.call_id == "fz"
    if result.error is None:
        assert isinstance(result.result, int)
    else:
        assert result.result is None
        assert "'add'" in result.error
    assert response.text == "done"


async def test_concurrent_runs_of_one_client_stay_independent() -> None:
    arrived = {"ada": asyncio.Event(), "bob": asyncio.Event()}

    @tool
    async def greet(ctx: ToolContext) -> str:
        """Waits until the other run is inside its tool too."""
        me = str(ctx.kwargs["user"])
        arrived[me].set()
        other = "bob" if me == "ada" else "ada"
        await asyncio.wait_for(arrived[other].wait(), 5)
        return f"hello {me}"

    def answer(messages: list[Message], options: ChatOptions) -> Any:
        if messages[-1].role == "tool":
            return f"said {messages[-1].function_results[0].result}"
        return [tool_call("greet")]

    client = FunctionInvokingChatClient(ScriptedChatClient(answer), tools=[greet])
    first, second = await asyncio.gather(
        client.get_response([Message("user", "a")], tool_kwargs={"user": "ada"}),
        client.get_response([Message("user", "b")], tool_kwargs={"user": "bob"}),
    )
    assert (first.text, second.text) == ("said hello ada", "said hello bob")
    assert len(first.messages) == len(second.messages) == 3


async def test_calls_a_caller_left_unanswered_get_a_result_in_the_models_view() -> None:
    declared = ToolSpec("client_side", "The caller runs this.", {"type": "object"})
    call = tool_call("client_side", {"x": 1}, call_id="cs1")
    client, inner = loop([[call], "fine"])
    options = ChatOptions(tools=[declared])
    first = await client.get_response([Message("user", "x")], options=options)
    assert first.finish_reason == "tool_calls"
    # the caller did not answer the call and asked something else
    history = [Message("user", "x"), *first.messages, Message("user", "skip that")]
    await client.get_response(history, options=options)
    sent = inner.calls[-1].messages
    assert [m.role for m in sent] == ["user", "assistant", "tool", "user"]
    assert sent[2].function_results[0].call_id == "cs1"
    assert sent[2].function_results[0].error is not None


async def test_calls_answered_later_in_the_history_are_left_alone() -> None:
    call = tool_call("add", {"a": 1, "b": 1}, call_id="c1")
    history = [
        Message("user", "x"),
        Message("assistant", [call]),
        Message("tool", [FunctionResultContent("c1", 2)]),
        Message("user", "and now?"),
    ]
    client, inner = loop(["still 2"])
    await client.get_response(history)
    assert inner.calls[0].messages == history


async def test_without_middleware_nor_tools_the_client_reads_the_callers_options() -> None:
    # Clients only read their options: a run with nothing to add (no tool specs, no chat
    # middleware that may change them) hands them on as they are, without a copy per call.
    inner = ScriptedChatClient(["ok"])
    options = ChatOptions(temperature=0.3)
    await FunctionInvokingChatClient(inner).get_response([Message("user", "x")], options=options)
    assert inner.calls[0].options is options


async def test_chat_middleware_gets_its_own_options_to_change() -> None:
    @chat_middleware
    async def hotter(context: ChatContext, call_next: ChatNext) -> None:
        context.options.temperature = 0.9
        await call_next()

    inner = ScriptedChatClient(["ok", "ok"])
    client = FunctionInvokingChatClient(inner, middleware=[hotter])
    options = ChatOptions(temperature=0.3)
    await client.get_response([Message("user", "x")], options=options)
    assert inner.calls[0].options.temperature == 0.9
    assert options.temperature == 0.3  # the caller's options were not changed
