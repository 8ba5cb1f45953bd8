"""GroupChat with RoundRobin on the scripted model: turns, termination, continuing."""

from __future__ import annotations

import pytest

from cantata.core import ConfigurationError
from cantata.teams import (
    GroupChat,
    MaxMessage,
    RoutingEvent,
    TaskResult,
    TeamMessageEvent,
    TeamStoppedEvent,
    TextMention,
)
from cantata.workflows import AgentUpdateEvent

from ._agents import counting_agent


def _lines(result: TaskResult) -> list[str]:
    return [f"{m.author_name}: {m.text}" for m in result.messages]


async def test_round_robin_takes_turns_until_a_mention() -> None:
    team = GroupChat(
        [counting_agent("writer"), counting_agent("critic", approve_after=6)],
        termination=TextMention("APPROVE") | MaxMessage(20),
    )
    result = await team.run("write a poem")
    assert _lines(result) == [
        "user: write a poem",
        "writer: writer says 1",
        "critic: critic says 2",
        "writer: writer says 3",
        "critic: critic says 4",
        "writer: writer says 5",
        "critic: critic says 6 APPROVE",
    ]
    assert result.stop_reason == "text 'APPROVE' mentioned by critic"


async def test_run_without_a_task_continues_with_fresh_conditions() -> None:
    team = GroupChat([counting_agent("a"), counting_agent("b")], termination=MaxMessage(3))
    first = await team.run("go")
    assert _lines(first) == ["user: go", "a: a says 1", "b: b says 2"]
    second = await team.run()
    # the next speaker continues the rotation; the condition counts this run only
    assert _lines(second) == ["a: a says 3", "b: b says 4", "a: a says 5"]
    assert second.stop_message is not None and second.stop_message.source == "MaxMessage"


async def test_max_turns_stops_and_the_next_run_goes_on() -> None:
    team = GroupChat([counting_agent("a"), counting_agent("b")], max_turns=3)
    first = await team.run("go")
    assert [m.author_name for m in first.messages] == ["user", "a", "b", "a"]
    assert first.stop_message is not None and first.stop_message.source == "max_turns"
    second = await team.run("more")
    assert [m.author_name for m in second.messages] == ["user", "b", "a", "b"]


async def test_stream_yields_messages_routing_and_stop_then_the_result() -> None:
    team = GroupChat([counting_agent("a"), counting_agent("b")], max_turns=2)
    items = [item async for item in team.run_stream("go")]
    assert isinstance(items[-1], TaskResult)
    shown = [e.message.text for e in items if isinstance(e, TeamMessageEvent)]
    assert shown == ["go", "a says 1", "b says 2"]
    routes = [e for e in items if isinstance(e, RoutingEvent)]
    assert [r.choice for r in routes] == ["a", "b"]
    assert len({r.correlation_id for r in routes}) == 1
    assert all(r.candidates == ["a", "b"] and not r.fallback_used for r in routes)
    assert isinstance(items[-2], TeamStoppedEvent)
    # the agents' chunks arrive live, before their whole message joins the transcript
    chunks = [e for e in items if isinstance(e, AgentUpdateEvent)]
    assert "".join(c.data.text for c in chunks if c.executor_id == "a") == "a says 1"
    first_chunk = items.index(chunks[0])
    a_message = next(
        i for i, e in enumerate(items) if isinstance(e, TeamMessageEvent) and e.source == "a"
    )
    assert first_chunk < a_message


def test_participants_need_unique_names() -> None:
    with pytest.raises(ConfigurationError, match="two participants named 'a'"):
        GroupChat([counting_agent("a"), counting_agent("a")], max_turns=1)
