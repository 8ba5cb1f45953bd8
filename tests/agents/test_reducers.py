"""History reducers: truncation never separates a tool call from its result; summaries
come from a model and are reused, not recomputed."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cantata.agents import ChatAgent, SummarizingReducer, TruncatingReducer
from cantata.core import (
    AgentError,
    ConfigurationError,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    ModelError,
)
from cantata.models import ScriptedChatClient, tool_call
from cantata.tools import tool


def _exchange(call_id: str, calls: int = 1) -> list[Message]:
    ids = [f"{call_id}{i}" for i in range(calls)]
    return [
        Message("assistant", [FunctionCallContent(i, "f", {}) for i in ids]),
        *[Message("tool", [FunctionResultContent(i, "r")]) for i in ids],
    ]


def _valid(messages: list[Message]) -> bool:
    issued: set[str] = set()
    for m in messages:
        for r in m.function_results:
            if r.call_id not in issued:
                return False
        issued.update(c.call_id for c in m.function_calls)
    return True


async def test_short_history_is_kept_whole() -> None:
    messages = [Message("user", "a"), Message("assistant", "b")]
    assert await TruncatingReducer(keep_last=5).reduce(messages) == messages


async def test_keeps_the_last_n_messages() -> None:
    messages = [Message("user", str(i)) for i in range(10)]
    kept = await TruncatingReducer(keep_last=3).reduce(messages)
    assert [m.text for m in kept] == ["7", "8", "9"]


async def test_cut_inside_a_tool_exchange_drops_the_orphaned_result() -> None:
    messages = [
        Message("user", "q"),
        *_exchange("c", calls=2),
        Message("assistant", "done"),
        Message("user", "next"),
    ]
    # last 4 = [tool c1 result, tool c2 result, ...] -> would start with orphaned results
    kept = await TruncatingReducer(keep_last=4).reduce(messages)
    assert _valid(kept)
    assert kept[0].role != "tool"
    assert [m.text for m in kept] == ["done", "next"]


async def test_when_only_tool_results_remain_the_call_is_kept_with_them() -> None:
    messages = [Message("assistant", "no user message here"), *_exchange("c", calls=2)]
    kept = await TruncatingReducer(keep_last=1).reduce(messages)
    assert _valid(kept) and kept
    assert kept[0].function_calls and len(kept) == 3


async def test_the_newest_user_message_is_kept_through_a_long_tool_loop() -> None:
    messages = [Message("user", "old"), Message("assistant", "ok"), Message("user", "task")]
    for i in range(5):
        messages += _exchange(f"c{i}-")
    kept = await TruncatingReducer(keep_last=2).reduce(messages)
    assert kept[0].text == "task" and kept == messages[2:]


async def test_leading_system_messages_are_kept_and_not_counted() -> None:
    messages = [Message("system", "rules"), *[Message("user", str(i)) for i in range(5)]]
    kept = await TruncatingReducer(keep_last=2).reduce(messages)
    assert [m.text for m in kept] == ["rules", "3", "4"]


def test_keep_last_must_be_positive() -> None:
    with pytest.raises(ConfigurationError, match="keep_last=0"):
        TruncatingReducer(keep_last=0)


@st.composite
def _conversations(draw: st.DrawFn) -> list[Message]:
    out: list[Message] = []
    for index in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["exchange", "delayed", "text"]))
        if kind == "exchange":
            out.extend(_exchange(f"c{index}-", calls=draw(st.integers(1, 3))))
        elif kind == "delayed":  # a result that arrives after other messages (approvals)
            call = FunctionCallContent(f"d{index}", "f", {})
            out.append(Message("assistant", [call]))
            out.append(Message(draw(st.sampled_from(["user", "assistant"])), f"{index}"))
            out.append(Message("tool", [FunctionResultContent(f"d{index}", "r")]))
        else:
            out.append(Message(draw(st.sampled_from(["user", "assistant"])), str(index)))
    return out


@settings(max_examples=200, deadline=None)
@given(messages=_conversations(), keep=st.integers(1, 8))
async def test_truncation_never_separates_calls_from_results(
    messages: list[Message], keep: int
) -> None:
    kept = await TruncatingReducer(keep_last=keep).reduce(messages)
    assert _valid(kept)
    assert not kept or kept[0].role != "tool"
    # what is kept is a suffix of the conversation
    assert kept == messages[len(messages) - len(kept) :]
    if messages:
        assert kept, "something must be kept"
    users = [m for m in messages if m.role == "user"]
    if users:
        assert any(m is users[-1] for m in kept), "the newest user message must be kept"


# --- summarizing ---------------------------------------------------------------------


async def test_summarizes_older_messages_and_keeps_recent_ones() -> None:
    summarizer = ScriptedChatClient(["the user likes tea"])
    reducer = SummarizingReducer(summarizer, keep_last=2, threshold=0)
    messages = [Message("user", f"m{i}") for i in range(5)]
    reduced = await reducer.reduce(messages)
    assert [m.role for m in reduced] == ["system", "user", "user"]
    assert "the user likes tea" in reduced[0].text
    assert [m.text for m in reduced[1:]] == ["m3", "m4"]
    sent = summarizer.calls[0].messages[-1].text
    assert "m0" in sent and "m2" in sent and "m3" not in sent


async def test_below_the_threshold_nothing_is_summarized() -> None:
    summarizer = ScriptedChatClient([])
    reducer = SummarizingReducer(summarizer, keep_last=2, threshold=3)
    messages = [Message("user", str(i)) for i in range(5)]
    assert await reducer.reduce(messages) == messages
    assert summarizer.calls == []


async def test_a_summary_is_reused_and_extended_incrementally() -> None:
    summarizer = ScriptedChatClient(["first summary", "second summary"])
    reducer = SummarizingReducer(summarizer, keep_last=2, threshold=0)
    messages = [Message("user", f"m{i}") for i in range(5)]
    await reducer.reduce(messages)
    await reducer.reduce(messages)  # same history: no new model call
    assert len(summarizer.calls) == 1
    messages += [Message("user", "m5"), Message("user", "m6")]
    reduced = await reducer.reduce(messages)
    assert len(summarizer.calls) == 2
    second = summarizer.calls[1].messages
    assert "first summary" in second[1].text
    assert "m3" in second[-1].text and "m0" not in second[-1].text
    assert "second summary" in reduced[0].text


async def test_the_newest_user_message_is_never_summarized_away() -> None:
    summarizer = ScriptedChatClient(["earlier things"])
    reducer = SummarizingReducer(summarizer, keep_last=2, threshold=0)
    messages = [Message("user", "old"), Message("assistant", "ok"), Message("user", "task")]
    for i in range(4):
        messages += _exchange(f"c{i}-")
    reduced = await reducer.reduce(messages)
    assert [m.text for m in reduced[1:3]] == ["task", ""]
    assert reduced[1:] == messages[2:]


async def test_summary_cut_keeps_tool_exchanges_whole() -> None:
    summarizer = ScriptedChatClient(["s"])
    reducer = SummarizingReducer(summarizer, keep_last=2, threshold=0)
    messages = [Message("user", "a"), Message("user", "b"), *_exchange("c", calls=2)]
    reduced = await reducer.reduce(messages)
    assert _valid(reduced[1:])
    assert "[called f" not in summarizer.calls[0].messages[-1].text


async def test_an_empty_summary_is_an_error_not_a_silent_loss_of_history() -> None:
    reducer = SummarizingReducer(ScriptedChatClient(["   "]), keep_last=1, threshold=0)
    messages = [Message("user", f"m{i}") for i in range(3)]
    with pytest.raises(AgentError, match="no text"):
        await reducer.reduce(messages)
    assert reducer._cache == {}


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


async def test_a_failing_summarizer_fails_the_run_and_leaves_the_thread_usable() -> None:
    summarizer = ScriptedChatClient([])  # every summary request fails
    client = ScriptedChatClient([[tool_call("add", {"a": 1, "b": 2})], "3", "still here"])
    reducer = SummarizingReducer(summarizer, keep_last=1, threshold=2)
    agent = ChatAgent(client, name="calc", tools=[add], history_reducer=reducer)
    thread = agent.create_thread()
    await thread.on_new_message([Message("user", "hello"), Message("assistant", "hi")])
    with pytest.raises(ModelError):  # the summary is needed before the second model call
        await agent.run("1+2?", thread=thread)
    stored = await thread.get_messages()
    assert [m.role for m in stored[2:]] == ["user", "assistant", "tool"]  # call with result
    plain = ChatAgent(client, name="calc", tools=[add])
    assert (await plain.run("again", thread=thread)).text == "3"
