"""The loop, streamed: updates rebuild the same messages as the non-streaming run."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from typing import Any

import pytest
from pydantic import BaseModel

from cantata.core import (
    CancellationToken,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    ModelError,
    ModelOutputError,
    TextContent,
    Usage,
)
from cantata.models import (
    ChatOptions,
    ChatResponse,
    ChatResponseUpdate,
    ScriptedChatClient,
    tool_call,
)
from cantata.tools import ChatContext, ChatNext, FunctionInvokingChatClient, chat_middleware, tool


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def shape(messages: Sequence[Message]) -> list[tuple[str, list[Any]]]:
    return [(m.role, m.contents) for m in messages]


SCRIPTS: dict[str, list[Any]] = {
    "text only": ["a plain answer that is long enough to be chunked"],
    "one round": [[tool_call("add", {"a": 1, "b": 2}, call_id="c1")], "three"],
    "two calls, an error, text with calls": [
        [
            TextContent("let me add"),
            tool_call("add", {"a": 1, "b": 2}, call_id="c1"),
            tool_call("nope", call_id="c2"),
        ],
        [tool_call("add", {"a": "x", "b": 2}, call_id="c3")],
        "done now",
    ],
}


@pytest.mark.parametrize("name", list(SCRIPTS))
async def test_updates_rebuild_the_messages_of_the_non_streaming_run(name: str) -> None:
    script = SCRIPTS[name]
    usage = Usage(input_tokens=3, output_tokens=1)
    plain = FunctionInvokingChatClient(ScriptedChatClient(script, usage=usage), tools=[add])
    expected = await plain.get_response([Message("user", "x")])

    streamed = FunctionInvokingChatClient(
        ScriptedChatClient(script, chunk_size=3, usage=usage), tools=[add]
    )
    produced: list[Message] = []
    updates = [
        u
        async for u in streamed.get_streaming_response(
            [Message("user", "x")], on_message=produced.append
        )
    ]
    rebuilt = ChatResponse.from_updates(updates)

    assert shape(rebuilt.messages) == shape(expected.messages)
    assert rebuilt.messages == produced  # same ids, roles and contents as on_message saw
    assert rebuilt.finish_reason == expected.finish_reason == "stop"
    assert rebuilt.usage == expected.usage


async def test_results_stream_as_tool_role_updates_with_the_tool_message_id() -> None:
    client = FunctionInvokingChatClient(
        ScriptedChatClient([[tool_call("add", {"a": 1, "b": 1}, call_id="c1")], "2"]),
        tools=[add],
    )
    produced: list[Message] = []
    updates = [
        u
        async for u in client.get_streaming_response(
            [Message("user", "x")], on_message=produced.append
        )
    ]
    [result_update] = [
        u for u in updates if any(type(c) is FunctionResultContent for c in u.contents)
    ]
    assert result_update.role == "tool"
    assert result_update.message_id == produced[1].message_id
    [call_update] = [u for u in updates if any(type(c) is FunctionCallContent for c in u.contents)]
    assert call_update.role == "assistant"
    assert call_update.message_id == produced[0].message_id


class GatedClient:
    """Streams one chunk, then waits until the consumer has seen it before finishing."""

    def __init__(self) -> None:
        self.seen_first = asyncio.Event()

    async def get_response(
        self,
        messages: Sequence[Message],
        *,
        options: ChatOptions | None = None,
        cancellation_token: CancellationToken | None = None,
    ) -> ChatResponse:
        raise AssertionError("the streaming loop must stream")

    async def get_streaming_response(
        self,
        messages: Sequence[Message],
        *,
        options: ChatOptions | None = None,
        cancellation_token: CancellationToken | None = None,
    ) -> AsyncIterator[ChatResponseUpdate]:
        yield ChatResponseUpdate([TextContent("first ")], message_id="m1")
        await asyncio.wait_for(self.seen_first.wait(), 5)
        yield ChatResponseUpdate([TextContent("second")], message_id="m1", finish_reason="stop")


async def test_text_reaches_the_caller_while_the_model_is_still_streaming() -> None:
    inner = GatedClient()
    client = FunctionInvokingChatClient(inner)
    texts: list[str] = []
    async for update in client.get_streaming_response([Message("user", "x")]):
        texts.append(update.text)
        if update.text == "first ":
            inner.seen_first.set()
    assert "".join(texts) == "first second"


class NoIdClient(GatedClient):
    """A client whose updates carry no message id."""

    async def get_streaming_response(
        self,
        messages: Sequence[Message],
        *,
        options: ChatOptions | None = None,
        cancellation_token: CancellationToken | None = None,
    ) -> AsyncIterator[ChatResponseUpdate]:
        if len(messages) == 1:
            yield ChatResponseUpdate([tool_call("add", {"a": 1, "b": 1}, call_id="c1")])
            yield ChatResponseUpdate([], finish_reason="tool_calls")
        else:
            yield ChatResponseUpdate([TextContent("two")])
            yield ChatResponseUpdate([], finish_reason="stop")


async def test_updates_without_message_ids_still_rebuild_separate_messages() -> None:
    client = FunctionInvokingChatClient(NoIdClient(), tools=[add])
    updates = [u async for u in client.get_streaming_response([Message("user", "x")])]
    rebuilt = ChatResponse.from_updates(updates)
    assert [m.role for m in rebuilt.messages] == ["assistant", "tool", "assistant"]
    assert rebuilt.text == "two"


async def test_a_streamed_limit_answer_drops_calls_and_keeps_the_limit_on_the_message() -> None:
    def answer(messages: list[Message], options: ChatOptions) -> Any:
        if options.tool_choice == "none":
            return [TextContent("stopping"), tool_call("add", {"a": 0, "b": 0})]
        return [tool_call("add", {"a": 1, "b": 1})]

    client = FunctionInvokingChatClient(ScriptedChatClient(answer), tools=[add], max_iterations=1)
    produced: list[Message] = []
    updates = [
        u
        async for u in client.get_streaming_response(
            [Message("user", "x")], on_message=produced.append
        )
    ]
    rebuilt = ChatResponse.from_updates(updates)
    assert rebuilt.messages[-1].contents == [TextContent("stopping")]
    assert len(rebuilt.function_calls) == 1
    assert produced[-1].metadata["cantata.limit"] == "max_iterations"
    assert rebuilt.finish_reason == "stop"


async def test_a_streamed_limit_answer_of_only_calls_rebuilds_like_the_plain_one() -> None:
    def script() -> list[Any]:
        return [
            [tool_call("add", {"a": 1, "b": 1}, call_id="c1")],
            [tool_call("add", {"a": 0, "b": 0}, call_id="c2")],
        ]

    plain = FunctionInvokingChatClient(ScriptedChatClient(script()), tools=[add], max_iterations=1)
    expected = await plain.get_response([Message("user", "x")])
    client = FunctionInvokingChatClient(ScriptedChatClient(script()), tools=[add], max_iterations=1)
    produced: list[Message] = []
    updates = [
        u
        async for u in client.get_streaming_response(
            [Message("user", "x")], on_message=produced.append
        )
    ]
    rebuilt = ChatResponse.from_updates(updates)
    assert shape(rebuilt.messages) == shape(expected.messages)
    assert [m.message_id for m in rebuilt.messages] == [m.message_id for m in produced]
    assert produced[-1].metadata["cantata.limit"] == "max_iterations"


async def test_a_model_error_while_streaming_propagates() -> None:
    client = FunctionInvokingChatClient(ScriptedChatClient([ModelError("stream broke")]))
    with pytest.raises(ModelError, match="stream broke"):
        async for _ in client.get_streaming_response([Message("user", "x")]):
            pass


async def test_stopping_early_closes_the_model_stream() -> None:
    closed = asyncio.Event()

    class Endless(GatedClient):
        async def get_streaming_response(
            self,
            messages: Sequence[Message],
            *,
            options: ChatOptions | None = None,
            cancellation_token: CancellationToken | None = None,
        ) -> AsyncIterator[ChatResponseUpdate]:
            try:
                while True:
                    yield ChatResponseUpdate([TextContent("more ")], message_id="m")
                    await asyncio.sleep(0)
            finally:
                closed.set()

    client = FunctionInvokingChatClient(Endless())
    stream = client.get_streaming_response([Message("user", "x")])
    assert isinstance(stream, AsyncGenerator)
    async for update in stream:
        assert update.text == "more "
        break
    await stream.aclose()
    # closed by the time aclose returns, in the caller's task: not left to the event loop
    # to finalize some time later (or never, if the loop shuts down first)
    assert closed.is_set()


async def test_cancelling_the_consumer_while_the_stream_closes_still_cancels_it() -> None:
    closing = asyncio.Event()
    release = asyncio.Event()
    after_close: list[str] = []

    class SlowToClose(GatedClient):
        async def get_streaming_response(
            self,
            messages: Sequence[Message],
            *,
            options: ChatOptions | None = None,
            cancellation_token: CancellationToken | None = None,
        ) -> AsyncIterator[ChatResponseUpdate]:
            try:
                while True:
                    yield ChatResponseUpdate([TextContent("more ")], message_id="m")
                    await asyncio.sleep(0)
            finally:
                closing.set()
                await release.wait()  # cleanup that takes a while (closing a connection)

    client = FunctionInvokingChatClient(SlowToClose())

    async def consume() -> None:
        stream = client.get_streaming_response([Message("user", "x")])
        assert isinstance(stream, AsyncGenerator)
        async for _ in stream:
            break
        await stream.aclose()
        after_close.append("went on as if not cancelled")

    consumer = asyncio.ensure_future(consume())
    await closing.wait()
    consumer.cancel()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await consumer
    assert after_close == []


class Verdict(BaseModel):
    total: int


@pytest.mark.parametrize("streaming", [False, True])
async def test_chat_middleware_sees_the_structured_value_in_both_modes(streaming: bool) -> None:
    values: list[Any] = []

    @chat_middleware
    async def observe(context: ChatContext, call_next: ChatNext) -> None:
        await call_next()
        assert context.response is not None
        values.append(context.response.value)

    script = [[tool_call("add", {"a": 1, "b": 2}, call_id="c1")], '{"total": 3}']
    client = FunctionInvokingChatClient(
        ScriptedChatClient(script, chunk_size=4), tools=[add], middleware=[observe]
    )
    options = ChatOptions(response_format=Verdict)
    messages = [Message("user", "x")]
    if streaming:
        [_ async for _ in client.get_streaming_response(messages, options=options)]
    else:
        await client.get_response(messages, options=options)
    assert values == [None, Verdict(total=3)]


@pytest.mark.parametrize("streaming", [False, True])
async def test_an_answer_that_does_not_fit_the_format_fails_in_both_modes(streaming: bool) -> None:
    client = FunctionInvokingChatClient(ScriptedChatClient(["not json"]), tools=[add])
    options = ChatOptions(response_format=Verdict)
    messages = [Message("user", "x")]
    with pytest.raises(ModelOutputError, match="Verdict"):
        if streaming:
            [_ async for _ in client.get_streaming_response(messages, options=options)]
        else:
            await client.get_response(messages, options=options)


async def test_a_response_replaced_after_streaming_still_reaches_the_stream() -> None:
    @chat_middleware
    async def rewrite(context: ChatContext, call_next: ChatNext) -> None:
        await call_next()  # the model's answer streams to the caller as it comes
        context.response = ChatResponse([Message("assistant", "rewritten")], finish_reason="stop")

    client = FunctionInvokingChatClient(ScriptedChatClient(["original"]), middleware=[rewrite])
    produced: list[Message] = []
    updates = [
        u
        async for u in client.get_streaming_response(
            [Message("user", "x")], on_message=produced.append
        )
    ]
    rebuilt = ChatResponse.from_updates(updates)
    # what was streamed cannot be taken back, but what the loop went on with is streamed too,
    # so the stream ends with the same message on_message saw (and an agent stored)
    assert [m.text for m in produced] == ["rewritten"]
    assert rebuilt.messages[-1].message_id == produced[-1].message_id
    assert rebuilt.messages[-1].text == "rewritten"


async def test_a_tool_message_is_recorded_before_its_updates_are_streamed() -> None:
    # A caller that stops reading at the first tool-result update still finds the results
    # recorded with their call (on_message saw them): nothing is left half written.
    events: list[str] = []
    client = FunctionInvokingChatClient(
        ScriptedChatClient([[tool_call("add", {"a": 1, "b": 2}, call_id="c1")], "three"]),
        tools=[add],
    )

    def on_message(message: Message) -> None:
        events.append(f"recorded {message.role}")

    stream = client.get_streaming_response([Message("user", "x")], on_message=on_message)
    async for update in stream:
        if any(type(c) is FunctionResultContent for c in update.contents):
            events.append("streamed result")
            break
    await stream.aclose()  # type: ignore[attr-defined]
    assert events == ["recorded assistant", "recorded tool", "streamed result"]
