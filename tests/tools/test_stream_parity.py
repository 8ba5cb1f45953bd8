"""Property: for any script, the streamed run and the plain run produce the same messages.

`ChatResponse.from_updates` of the stream must rebuild what `get_response` returns (roles,
contents, order, finish reason, usage), and in both modes `on_message` must see exactly
the returned messages, once each, in order. Scripts mix text, tool calls that succeed,
fail, have bad arguments or name unknown tools, calls that need approval, model errors,
and turns with and without usage; limits are random and small, so forced final answers
are covered too; middleware answers some model calls itself, ends the loop, or answers
tool calls without running the tool.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cantata.core import (
    Content,
    FunctionApprovalRequestContent,
    FunctionCallContent,
    Message,
    ModelError,
    TextContent,
    Usage,
)
from cantata.models import ChatResponse, ScriptedChatClient, ScriptedTurn
from cantata.tools import (
    ChatContext,
    ChatNext,
    FunctionInvocationContext,
    FunctionInvokingChatClient,
    FunctionNext,
    chat_middleware,
    function_middleware,
    tool,
)


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
async def explode(reason: str = "boom") -> None:
    """Always fails."""
    raise ValueError(reason)


@tool(approval_mode="always_require")
def guarded() -> str:
    """Needs a person's approval."""
    return "ran"


CALL_ARGUMENTS = {
    "add": st.fixed_dictionaries({"a": st.integers(-5, 5), "b": st.integers(-5, 5)})
    | st.just({"a": "not a number"})
    | st.just('{"a": 1,'),
    "explode": st.just({}),
    "missing": st.just({"x": 1}),
    "guarded": st.just({}),
}

texts = st.text(alphabet="abc xyz", min_size=1, max_size=20)


@st.composite
def calls(draw: st.DrawFn) -> FunctionCallContent:
    name = draw(st.sampled_from(sorted(CALL_ARGUMENTS)))
    return FunctionCallContent("", name, draw(CALL_ARGUMENTS[name]))


@st.composite
def turns(draw: st.DrawFn) -> Any:
    """One model answer: text, text then calls, calls only, or an error; some carry usage."""
    kind = draw(st.sampled_from(["text", "calls", "text+calls", "error"]))
    if kind == "error":
        return ModelError("the model failed")
    contents: list[Content] = []
    if kind != "calls":
        contents.append(TextContent(draw(texts)))
    if kind != "text":
        contents.extend(draw(st.lists(calls(), min_size=1, max_size=3)))
    usage = draw(st.none() | st.builds(Usage, st.integers(0, 50), st.integers(0, 50)))
    return (contents, usage)


def materialize(script: Sequence[Any]) -> list[ScriptedTurn]:
    """Fresh turns for one run: call ids numbered, so both runs see the same ids."""
    out: list[ScriptedTurn] = []
    number = 0
    for turn in script:
        if isinstance(turn, Exception):
            out.append(ModelError(str(turn)))
            continue
        contents, usage = turn
        fresh: list[Content] = []
        for content in contents:
            if type(content) is FunctionCallContent:
                number += 1
                fresh.append(FunctionCallContent(f"c{number}", content.name, content.arguments))
            else:
                fresh.append(content)
        finish = "tool_calls" if any(type(c) is FunctionCallContent for c in fresh) else "stop"
        out.append(ChatResponse([Message("assistant", fresh)], usage=usage, finish_reason=finish))
    return out


def shape(messages: Sequence[Message]) -> list[tuple[str, list[Any]]]:
    return [(m.role, m.contents) for m in messages]


def answer_approvals(response: ChatResponse, verdicts: list[bool]) -> Message:
    """A user message approving or rejecting each pending request, by the drawn verdicts."""
    requests = [
        c for c in response.messages[-1].contents if type(c) is FunctionApprovalRequestContent
    ]
    return Message(
        "user",
        [r.create_response(verdicts[i % len(verdicts)]) for i, r in enumerate(requests)],
    )


async def run(
    script: list[Any],
    limits: dict[str, Any],
    verdicts: list[bool],
    plan: dict[str, Any],
    *,
    chunk_size: int | None,
) -> tuple[list[Any], list[Message]]:
    """Run the script (streaming when `chunk_size` is set), answering one round of approval
    requests; returns each round's response (or the error it raised) and what on_message saw."""
    client = FunctionInvokingChatClient(
        ScriptedChatClient(materialize(script), chunk_size=chunk_size or 8),
        tools=[add, explode, guarded],
        middleware=middleware_for(plan),
        **limits,
    )
    seen: list[Message] = []
    history = [Message("user", "go")]
    rounds: list[Any] = []
    for _ in range(2):
        try:
            if chunk_size is None:
                response = await client.get_response(history, on_message=seen.append)
            else:
                updates = [
                    u async for u in client.get_streaming_response(history, on_message=seen.append)
                ]
                response = ChatResponse.from_updates(updates)
        except ModelError as exc:
            rounds.append(exc)
            break
        rounds.append(response)
        if response.finish_reason != "approval_required":
            break
        history = [*history, *response.messages, answer_approvals(response, verdicts)]
    return rounds, seen


def middleware_for(plan: dict[str, Any]) -> list[Any]:
    """Middleware by plan: answer some model calls without the model, end the loop after
    one, answer calls to `add` without running it."""
    model_calls = 0

    @chat_middleware
    async def steer(context: ChatContext, call_next: ChatNext) -> None:
        nonlocal model_calls
        model_calls += 1
        if model_calls in plan["canned"]:
            usage = Usage(1, 1) if model_calls % 2 else None
            context.response = ChatResponse(
                [Message("assistant", f"canned {model_calls}")], usage=usage, finish_reason="stop"
            )
        else:
            await call_next()
        context.terminate = model_calls == plan["terminate_at"]

    @function_middleware
    async def block_add(context: FunctionInvocationContext, call_next: FunctionNext) -> None:
        if context.function.name == "add" and plan["block_add"]:
            context.result = "blocked"
            return
        await call_next()

    return [steer, block_add]


plans = st.fixed_dictionaries(
    {
        "canned": st.sets(st.integers(1, 5), max_size=2),
        "terminate_at": st.none() | st.integers(1, 5),
        "block_add": st.booleans(),
    }
)


limit_settings = st.fixed_dictionaries(
    {
        "max_iterations": st.integers(1, 4),
        "max_function_calls": st.none() | st.integers(1, 5),
        "max_consecutive_errors": st.none() | st.integers(1, 3),
        "concurrent_calls": st.booleans(),
    }
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    script=st.lists(turns(), min_size=1, max_size=6),
    limits=limit_settings,
    verdicts=st.lists(st.booleans(), min_size=1, max_size=3),
    plan=plans,
    chunk_size=st.integers(1, 7),
)
async def test_streaming_and_plain_runs_produce_the_same_messages(
    script: list[Any],
    limits: dict[str, Any],
    verdicts: list[bool],
    plan: dict[str, Any],
    chunk_size: int,
) -> None:
    expected, plain_seen = await run(script, limits, verdicts, plan, chunk_size=None)
    rebuilt, streamed_seen = await run(script, limits, verdicts, plan, chunk_size=chunk_size)

    assert shape(streamed_seen) == shape(plain_seen)
    assert len(rebuilt) == len(expected)
    produced: list[Message] = []
    for plain, streamed in zip(expected, rebuilt, strict=True):
        if isinstance(plain, Exception):
            assert type(streamed) is type(plain)
            continue
        assert isinstance(streamed, ChatResponse)
        produced += plain.messages
        assert shape(streamed.messages) == shape(plain.messages)
        assert streamed.finish_reason == plain.finish_reason
        assert streamed.usage == plain.usage
    assert_results_answer_their_calls(produced)
    # on_message saw exactly the returned messages, once each, in order
    if not isinstance(expected[-1], Exception):
        assert plain_seen == produced
        assert len({m.message_id for m in plain_seen}) == len(plain_seen)
        streamed_ids = [m.message_id for r in rebuilt for m in r.messages]
        assert streamed_ids == [m.message_id for m in streamed_seen]


def assert_results_answer_their_calls(messages: Sequence[Message]) -> None:
    """Each tool message answers calls made before it, in the order they were made; a call
    left without a result is one waiting for approval."""
    calls: dict[str, str] = {}
    order: list[str] = []
    for message in messages:
        for call in message.function_calls:
            calls[call.call_id] = call.name
            order.append(call.call_id)
        answered = [r.call_id for r in message.function_results]
        if answered:
            assert set(answered) <= set(calls)
            assert answered == [c for c in order if c in answered]
    waiting = [
        c.function_call.call_id
        for m in messages
        for c in m.contents
        if type(c) is FunctionApprovalRequestContent
    ]
    assert all(calls.get(c, "guarded") == "guarded" for c in waiting)
