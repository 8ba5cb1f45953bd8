"""Chat and function middleware: order, observing, changing, short-circuit, termination."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from cantata.core import (
    CancellationToken,
    CancelledError,
    FunctionResultContent,
    Message,
    TextContent,
    ToolError,
    UsageError,
)
from cantata.models import (
    ChatOptions,
    ChatResponse,
    ChatResponseUpdate,
    ScriptedChatClient,
    tool_call,
)
from cantata.tools import (
    ChatContext,
    ChatMiddleware,
    ChatNext,
    FunctionInvocationContext,
    FunctionInvokingChatClient,
    FunctionMiddleware,
    FunctionNext,
    ToolArgumentsError,
    ToolContext,
    chat_middleware,
    function_middleware,
    tool,
)
from cantata.tools.middleware import compose

ran: list[str] = []


@tool
def echo(text: str) -> str:
    """Echo text back."""
    ran.append(text)
    return text


@pytest.fixture(autouse=True)
def _reset() -> None:
    ran.clear()


def make(
    script: Any, *middleware: Any, **kwargs: Any
) -> tuple[FunctionInvokingChatClient, ScriptedChatClient]:
    inner = ScriptedChatClient(script)
    return FunctionInvokingChatClient(
        inner, tools=[echo], middleware=list(middleware), **kwargs
    ), inner


def recorder(log: list[str], name: str) -> ChatMiddleware:
    @chat_middleware
    async def record(context: ChatContext, call_next: ChatNext) -> None:
        log.append(f"{name} before")
        await call_next()
        log.append(f"{name} after")

    return record


async def test_the_first_middleware_listed_is_the_outermost() -> None:
    log: list[str] = []
    client, _ = make(["hi"], recorder(log, "outer"), recorder(log, "inner"))
    await client.get_response([Message("user", "x")])
    assert log == ["outer before", "inner before", "inner after", "outer after"]


async def test_chat_middleware_wraps_every_model_call_and_sees_the_response() -> None:
    seen: list[tuple[int, str | None]] = []

    @chat_middleware
    async def observe(context: ChatContext, call_next: ChatNext) -> None:
        await call_next(context)
        assert context.response is not None
        seen.append((len(context.messages), context.response.finish_reason))
        assert not context.is_streaming

    client, _ = make([[tool_call("echo", {"text": "a"})], "done"], observe)
    await client.get_response([Message("user", "x")])
    assert seen == [(1, "tool_calls"), (3, "stop")]


async def test_chat_middleware_can_rewrite_the_messages_sent_to_the_model() -> None:
    @chat_middleware
    async def add_system(context: ChatContext, call_next: ChatNext) -> None:
        context.messages.insert(0, Message("system", "be brief"))
        await call_next()

    client, inner = make(["ok"], add_system)
    response = await client.get_response([Message("user", "x")])
    assert [m.role for m in inner.calls[0].messages] == ["system", "user"]
    assert [m.role for m in response.messages] == ["assistant"]


async def test_chat_middleware_can_short_circuit_the_model() -> None:
    @chat_middleware
    async def cached(context: ChatContext, call_next: ChatNext) -> None:
        context.response = ChatResponse([Message("assistant", "from cache")], finish_reason="stop")

    client, inner = make([], cached)  # the scripted model has no turns: calling it would fail
    response = await client.get_response([Message("user", "x")])
    assert response.text == "from cache"
    assert inner.calls == []


async def test_chat_middleware_that_skips_call_next_must_set_a_response() -> None:
    @chat_middleware
    async def forgetful(context: ChatContext, call_next: ChatNext) -> None:
        return None

    client, _ = make(["unused"], forgetful)
    with pytest.raises(UsageError, match=r"context\.response"):
        await client.get_response([Message("user", "x")])


async def test_chat_middleware_can_terminate_the_loop() -> None:
    @chat_middleware
    async def stop(context: ChatContext, call_next: ChatNext) -> None:
        await call_next()
        context.terminate = True

    client, inner = make([[tool_call("echo", {"text": "a"}, call_id="c1")], "never"], stop)
    response = await client.get_response([Message("user", "x")])
    assert response.finish_reason == "terminated"
    assert ran == []
    assert inner.remaining == 1
    # the calls of the last answer did not run, and say so: a call without a result in a
    # stored conversation would make every later request to a chat API fail
    assert [m.role for m in response.messages] == ["assistant", "tool"]
    [result] = response.messages[1].function_results
    assert result.call_id == "c1"
    assert result.error is not None and "not run" in result.error


class Uppercase(FunctionMiddleware):
    """A class-based function middleware that rewrites arguments."""

    async def process(self, context: FunctionInvocationContext, call_next: FunctionNext) -> None:
        context.arguments = {k: str(v).upper() for k, v in context.arguments.items()}
        await call_next()


async def test_function_middleware_can_rewrite_arguments() -> None:
    client, _ = make([[tool_call("echo", {"text": "quiet"})], "ok"], Uppercase())
    response = await client.get_response([Message("user", "x")])
    assert response.messages[1].function_results[0].result == "QUIET"
    assert ran == ["QUIET"]


async def test_function_middleware_can_short_circuit_a_call() -> None:
    @function_middleware
    async def blocked(context: FunctionInvocationContext, call_next: FunctionNext) -> None:
        context.result = f"blocked {context.call.name}"

    client, _ = make([[tool_call("echo", {"text": "a"}, call_id="c1")], "ok"], blocked)
    response = await client.get_response([Message("user", "x")])
    assert response.messages[1].contents == [FunctionResultContent("c1", "blocked echo")]
    assert ran == []


async def test_function_middleware_can_turn_a_call_into_an_error() -> None:
    @function_middleware
    async def deny(context: FunctionInvocationContext, call_next: FunctionNext) -> None:
        context.error = ToolError(f"{context.function.name} is disabled today")

    client, _ = make([[tool_call("echo", {"text": "a"})], "ok"], deny)
    response = await client.get_response([Message("user", "x")])
    assert response.messages[1].function_results[0].error == "echo is disabled today"
    assert ran == []


async def test_a_raising_function_middleware_becomes_an_error_result() -> None:
    @function_middleware
    async def broken(context: FunctionInvocationContext, call_next: FunctionNext) -> None:
        raise KeyError("missing")

    client, _ = make([[tool_call("echo", {"text": "a"})], "ok"], broken)
    response = await client.get_response([Message("user", "x")])
    assert (
        response.messages[1].function_results[0].error == "tool 'echo' failed: KeyError: 'missing'"
    )


async def test_function_middleware_sees_validation_errors_and_can_repair_them() -> None:
    seen: list[type[BaseException]] = []

    @function_middleware
    async def repair(context: FunctionInvocationContext, call_next: FunctionNext) -> None:
        await call_next()
        if isinstance(context.error, ToolArgumentsError):
            seen.append(type(context.error))
            context.arguments = {"text": "repaired"}
            await call_next()

    client, _ = make([[tool_call("echo", {"txt": "typo"})], "ok"], repair)
    response = await client.get_response([Message("user", "x")])
    assert seen == [ToolArgumentsError]
    result = response.messages[1].function_results[0]
    assert (result.result, result.error) == ("repaired", None)


async def test_function_middleware_can_terminate_after_the_current_turn() -> None:
    @function_middleware
    async def stop(context: FunctionInvocationContext, call_next: FunctionNext) -> None:
        await call_next()
        context.terminate = context.arguments["text"] == "last"

    calls = [tool_call("echo", {"text": "first"}), tool_call("echo", {"text": "last"})]
    client, inner = make([calls, "never"], stop)
    response = await client.get_response([Message("user", "x")])
    assert response.finish_reason == "terminated"
    assert [r.result for r in response.messages[-1].function_results] == ["first", "last"]
    assert inner.remaining == 1


async def test_function_middleware_receives_tool_kwargs() -> None:
    seen: list[Any] = []

    @function_middleware
    async def audit(context: FunctionInvocationContext, call_next: FunctionNext) -> None:
        seen.append(context.kwargs["tenant"])
        await call_next()

    client, _ = make([[tool_call("echo", {"text": "a"})], "ok"], audit)
    await client.get_response([Message("user", "x")], tool_kwargs={"tenant": "acme"})
    assert seen == ["acme"]


async def test_chat_middleware_sees_streaming_and_can_short_circuit_a_stream() -> None:
    flags: list[bool] = []

    @chat_middleware
    async def canned(context: ChatContext, call_next: ChatNext) -> None:
        flags.append(context.is_streaming)
        context.response = ChatResponse([Message("assistant", "canned")], finish_reason="stop")

    client, inner = make([], canned)
    updates: list[ChatResponseUpdate] = [
        u async for u in client.get_streaming_response([Message("user", "x")])
    ]
    assert flags == [True]
    assert ChatResponse.from_updates(updates).text == "canned"
    assert inner.calls == []


def test_decorators_keep_the_docstring() -> None:
    @function_middleware
    async def documented(context: FunctionInvocationContext, call_next: FunctionNext) -> None:
        """Says why."""
        await call_next()

    assert isinstance(documented, FunctionMiddleware)
    assert documented.__doc__ == "Says why."
    assert "documented" in repr(documented)


async def test_changing_arguments_in_place_leaves_the_recorded_call_alone() -> None:
    @function_middleware
    async def inject(context: FunctionInvocationContext, call_next: FunctionNext) -> None:
        context.arguments["text"] = "secret from the middleware"
        await call_next()

    call = tool_call("echo", {"text": "hi"}, call_id="c1")
    client, inner = make([[call], "ok"], inject)
    response = await client.get_response([Message("user", "x")])
    assert ran == ["secret from the middleware"]
    # what the model asked for is what the conversation keeps, and what the model sees again
    assert response.messages[0].function_calls[0].arguments == {"text": "hi"}
    assert inner.calls[1].messages[1].function_calls[0].arguments == {"text": "hi"}


async def test_a_tool_changing_its_argument_leaves_the_recorded_call_alone() -> None:
    @tool
    def consume(items: Any) -> int:
        """Pops what it is given (an untyped parameter is passed as parsed)."""
        items["list"].pop()
        return len(items["list"])

    call = tool_call("consume", {"items": {"list": [1, 2]}})
    inner = ScriptedChatClient([[call], "ok"])
    client = FunctionInvokingChatClient(inner, tools=[consume])
    response = await client.get_response([Message("user", "x")])
    assert response.messages[1].function_results[0].result == 1
    assert response.messages[0].function_calls[0].arguments == {"items": {"list": [1, 2]}}


async def test_options_changed_by_chat_middleware_hold_for_that_call_only() -> None:
    @chat_middleware
    async def tweak_first(context: ChatContext, call_next: ChatNext) -> None:
        if len(context.messages) == 1:
            context.options.temperature = 0.9
            context.options.extra["tag"] = "first"
            context.options.stop = ["END"]
        await call_next()

    options = ChatOptions(temperature=0.1, extra={"user": "ada"})
    client, inner = make([[tool_call("echo", {"text": "a"})], "ok"], tweak_first)
    await client.get_response([Message("user", "x")], options=options)

    first, second = (c.options for c in inner.calls)
    assert (first.temperature, first.extra, first.stop) == (
        0.9,
        {"user": "ada", "tag": "first"},
        ["END"],
    )
    assert (second.temperature, second.extra, second.stop) == (0.1, {"user": "ada"}, None)
    # the caller's options (an agent's defaults, say) are never changed
    assert options == ChatOptions(temperature=0.1, extra={"user": "ada"})


async def test_messages_changed_in_place_by_chat_middleware_change_that_call_only() -> None:
    @chat_middleware
    async def redact(context: ChatContext, call_next: ChatNext) -> None:
        for message in context.messages:
            message.contents = [TextContent("[redacted]")]
            message.metadata["seen"] = True
        await call_next()

    history = [Message("user", "my card is 4111")]
    client, inner = make(["ok"], redact)
    await client.get_response(history)
    assert inner.calls[0].messages[0].text == "[redacted]"
    assert history[0].text == "my card is 4111"
    assert history[0].metadata == {}


@pytest.mark.parametrize("streaming", [False, True])
async def test_chat_middleware_may_hand_call_next_a_new_context(streaming: bool) -> None:
    seen: list[str | None] = []

    @chat_middleware
    async def outer(context: ChatContext, call_next: ChatNext) -> None:
        await call_next()
        seen.append(context.response.text if context.response else None)

    @chat_middleware
    async def with_system(context: ChatContext, call_next: ChatNext) -> None:
        system = Message("system", "be brief")
        await call_next(dataclasses.replace(context, messages=[system, *context.messages]))

    client, inner = make(["ok"], outer, with_system)
    if streaming:
        updates = [u async for u in client.get_streaming_response([Message("user", "x")])]
        response = ChatResponse.from_updates(updates)
    else:
        response = await client.get_response([Message("user", "x")])
    assert [m.role for m in inner.calls[0].messages] == ["system", "user"]
    assert response.text == "ok"
    assert seen == ["ok"]  # the outer middleware sees the answer on its own context


async def test_function_middleware_may_hand_call_next_a_new_context() -> None:
    @function_middleware
    async def louder(context: FunctionInvocationContext, call_next: FunctionNext) -> None:
        await call_next(dataclasses.replace(context, arguments={"text": "LOUD"}))

    @function_middleware
    async def stop_after(context: FunctionInvocationContext, call_next: FunctionNext) -> None:
        await call_next()
        context.terminate = True

    client, _ = make(
        [[tool_call("echo", {"text": "a"}, call_id="c1")], "never"], louder, stop_after
    )
    response = await client.get_response([Message("user", "x")])
    # the tool's result (not None) and the inner middleware's terminate reach the loop
    assert response.messages[1].contents == [FunctionResultContent("c1", "LOUD")]
    assert response.finish_reason == "terminated"


async def test_a_cancellation_a_middleware_caught_still_cancels_the_run() -> None:
    token = CancellationToken()

    @tool
    def cancel_run(ctx: ToolContext) -> None:
        """Cancels the run from inside."""
        ctx.cancellation_token.cancel()
        ctx.cancellation_token.raise_if_cancelled()

    @function_middleware
    async def catch_all(context: FunctionInvocationContext, call_next: FunctionNext) -> None:
        try:
            await call_next()
        except Exception as exc:  # a common pattern; it catches cantata's CancelledError too
            context.error = exc

    inner = ScriptedChatClient([[tool_call("cancel_run")], "never"])
    client = FunctionInvokingChatClient(inner, tools=[cancel_run], middleware=[catch_all])
    seen: list[Message] = []
    with pytest.raises(CancelledError):
        await client.get_response(
            [Message("user", "x")], cancellation_token=token, on_message=seen.append
        )
    assert [m.role for m in seen] == ["assistant"]  # no error result was produced


@pytest.mark.parametrize("after_model", [False, True])
@pytest.mark.parametrize("streaming", [False, True])
async def test_a_raising_chat_middleware_fails_the_run_in_both_modes(
    after_model: bool, streaming: bool
) -> None:
    @chat_middleware
    async def broken(context: ChatContext, call_next: ChatNext) -> None:
        if after_model:
            await call_next()
        raise KeyError("no such setting")

    client, _ = make(["hello"], broken)
    seen: list[Message] = []
    with pytest.raises(KeyError, match="no such setting"):
        if streaming:
            async for _ in client.get_streaming_response(
                [Message("user", "x")], on_message=seen.append
            ):
                pass
        else:
            await client.get_response([Message("user", "x")], on_message=seen.append)
    assert seen == []  # nothing was produced: the answer never reached the loop


async def test_compose_without_middleware_is_the_innermost_call_itself() -> None:
    async def innermost(context: ChatContext) -> None:
        return None

    assert compose([], innermost) is innermost
