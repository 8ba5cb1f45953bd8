"""Termination conditions, one rule each, and their combinations; then in a running team."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cantata.core import (
    ConfigurationError,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    Usage,
)
from cantata.teams import (
    AndTermination,
    External,
    Functional,
    FunctionCall,
    MaxMessage,
    Observation,
    OrTermination,
    SourceMatch,
    StopMessage,
    TerminationCondition,
    TextMention,
    Timeout,
    TokenUsage,
)
from cantata.teams import HandoffTermination as Handoff


def said(who: str, text: str) -> Message:
    return Message("assistant", text, author_name=who)


async def fires(
    cond: TerminationCondition,
    batches: list[list[Message]],
    *,
    usages: list[Usage] | None = None,
    started: float = 1000.0,
    now: float = 1000.0,
) -> list[StopMessage | None]:
    """Check `cond` on each batch in turn, within one run."""
    state = cond.start(started)
    out = []
    for i, batch in enumerate(batches):
        usage = usages[i] if usages else Usage()
        out.append(await cond.check(state, Observation(batch, usage, now)))
    return out


async def test_max_message_counts_every_message_of_the_run() -> None:
    got = await fires(MaxMessage(3), [[said("a", "1"), said("b", "2")], [said("a", "3")]])
    assert got[0] is None
    assert got[1] is not None and got[1].source == "MaxMessage"
    assert "3" in got[1].content


async def test_text_mention_filters_by_source() -> None:
    cond = TextMention("APPROVE", sources=["critic"])
    got = await fires(cond, [[said("writer", "APPROVE?")], [said("critic", "I APPROVE")]])
    assert got[0] is None
    assert got[1] is not None and "critic" in got[1].content


async def test_token_usage_adds_up_across_turns() -> None:
    cond = TokenUsage(max_total_tokens=100)
    got = await fires(cond, [[], []], usages=[Usage(30, 30), Usage(20, 20)])
    assert got[0] is None and got[1] is not None
    only_output = TokenUsage(max_output_tokens=10)
    assert (await fires(only_output, [[]], usages=[Usage(500, 9)]))[0] is None


async def test_timeout_clock_starts_when_the_run_starts_not_when_built() -> None:
    cond = Timeout(5)
    assert (await fires(cond, [[]], started=1000.0, now=1004.0))[0] is None
    assert (await fires(cond, [[]], started=1000.0, now=1005.0))[0] is not None
    # a later run gets a fresh deadline
    assert (await fires(cond, [[]], started=2000.0, now=2001.0))[0] is None


async def test_handoff_by_metadata_or_transfer_call() -> None:
    cond = Handoff("user")
    by_meta = Message("assistant", "over to you", author_name="a", metadata={"handoff_to": "user"})
    by_call = Message("assistant", [FunctionCallContent("c1", "transfer_to_user", {})])
    other = Message("assistant", [FunctionCallContent("c2", "transfer_to_bob", {})])
    assert (await fires(cond, [[other]]))[0] is None
    assert (await fires(cond, [[by_meta]]))[0] is not None
    assert (await fires(cond, [[by_call]]))[0] is not None


async def test_source_match() -> None:
    got = await fires(SourceMatch(["closer"]), [[said("a", "x")], [said("closer", "done")]])
    assert got == [None, got[1]] and got[1] is not None


async def test_function_call_fires_once_the_call_has_its_result() -> None:
    call = Message("assistant", [FunctionCallContent("c9", "finish", {})], author_name="a")
    result = Message("tool", [FunctionResultContent("c9", "ok")])
    unrelated = Message("tool", [FunctionResultContent("c1", "ok")])
    got = await fires(FunctionCall("finish"), [[unrelated], [call], [result]])
    assert got[0] is None and got[1] is None and got[2] is not None


async def test_external_counts_for_runs_under_way_only() -> None:
    cond = External()
    before = cond.start(0.0)
    cond.set()
    after = cond.start(0.0)  # a run that starts after set() is not stopped by it
    assert await cond.check(before, Observation([])) is not None
    assert await cond.check(after, Observation([])) is None


async def test_functional_sync_and_async_and_verdicts() -> None:
    def stop_on_done(messages: list[Message]) -> bool:
        return any("done" in m.text for m in messages)

    async def reason(messages: list[Message]) -> str | None:
        return "enough" if len(messages) > 1 else None

    assert (await fires(Functional(stop_on_done), [[said("a", "x")]]))[0] is None
    stop = (await fires(Functional(stop_on_done), [[said("a", "done")]]))[0]
    assert stop is not None and stop.source == "stop_on_done"
    got = (await fires(Functional(reason), [[said("a", "1"), said("b", "2")]]))[0]
    assert got is not None and got.content == "enough"
    with pytest.raises(ConfigurationError, match="returned 3"):
        await fires(Functional(lambda ms: 3), [[]])  # type: ignore[arg-type,return-value]


async def test_or_fires_when_any_part_fires() -> None:
    cond = TextMention("STOP") | MaxMessage(10)
    assert isinstance(cond, OrTermination)
    got = await fires(cond, [[said("a", "go")], [said("b", "STOP")]])
    assert got[0] is None and got[1] is not None and got[1].source == "TextMention"


async def test_and_fires_once_all_parts_have_fired_within_the_run() -> None:
    cond = TextMention("A") & TextMention("B")
    assert isinstance(cond, AndTermination)
    # A fires on the first check, B on the third: & fires then, not before
    got = await fires(cond, [[said("x", "A")], [said("x", "none")], [said("x", "B")]])
    assert got[:2] == [None, None]
    assert got[2] is not None and "'A'" in got[2].content and "'B'" in got[2].content


def test_combinations_flatten() -> None:
    a, b, c = MaxMessage(1), MaxMessage(2), MaxMessage(3)
    assert len((a | b | c).conditions) == 3
    assert len(((a & b) & c).conditions) == 3
    mixed = (a | b) & c
    assert isinstance(mixed, AndTermination) and len(mixed.conditions) == 2


async def test_a_reused_condition_behaves_the_same_in_every_run() -> None:
    cond = MaxMessage(2) | TextMention("X")
    for _ in range(3):  # fresh state per run: the earlier runs leave nothing behind
        got = await fires(cond, [[said("a", "1")], [said("a", "2")]])
        assert got[0] is None and got[1] is not None


@pytest.mark.parametrize(
    "make",
    [
        lambda: MaxMessage(0),
        lambda: MaxMessage(True),
        lambda: TextMention(""),
        lambda: TokenUsage(),
        lambda: TokenUsage(-1),
        lambda: Timeout(0),
        lambda: Handoff(""),
        lambda: SourceMatch([]),
        lambda: FunctionCall(""),
        lambda: Functional(42),  # type: ignore[arg-type]
        lambda: MaxMessage(1) | 3,  # type: ignore[operator]
    ],
)
def test_bad_definitions_are_refused(make: object) -> None:
    with pytest.raises(ConfigurationError):
        make()  # type: ignore[operator]


@given(st.one_of(st.integers(max_value=0), st.floats(), st.text(), st.none(), st.booleans()))
def test_max_message_refuses_anything_but_a_positive_int(value: object) -> None:
    with pytest.raises(ConfigurationError, match="MaxMessage"):
        MaxMessage(value)  # type: ignore[arg-type]


async def test_an_agent_can_decide_termination_as_in_semantic_kernel() -> None:
    """SK's agent-based strategy: an async Functional asks a judge agent."""
    from cantata.agents import ChatAgent
    from cantata.models import ScriptedChatClient
    from cantata.teams import GroupChat

    from ._agents import counting_agent

    judge = ChatAgent(
        ScriptedChatClient(lambda ms, o: "yes" if "b says" in ms[-1].text else "no"),
        name="judge",
    )

    async def judge_says_done(messages: list[Message]) -> bool:
        if not messages:
            return False
        verdict = await judge.run(f"Is this done? {messages[-1].text}")
        return verdict.text == "yes"

    team = GroupChat(
        [counting_agent("a"), counting_agent("b")],
        termination=Functional(judge_says_done) | MaxMessage(10),
    )
    result = await team.create_session().run("go")
    assert [m.author_name for m in result.messages] == ["user", "a", "b"]
    assert result.stop_message is not None
    assert result.stop_message.source == "judge_says_done"
