"""Concurrent: everyone answers the task in one superstep; an aggregator combines."""

from __future__ import annotations

import asyncio

import pytest

from cantata.agents import ChatAgent
from cantata.core import ConfigurationError, Message
from cantata.models import ChatOptions, ScriptedChatClient
from cantata.teams.concurrent import Concurrent, ConcurrentAnswer
from cantata.teams.events import RoutingEvent
from cantata.teams.manager import CHANNELS_KEY
from cantata.teams.turns import TeamTask
from cantata.workflows import SuperstepStartedEvent


def echo(name: str) -> ChatAgent:
    def answer(messages: list[Message], options: ChatOptions) -> str:
        return f"{name}<{'|'.join(m.text for m in messages)}>"

    return ChatAgent(ScriptedChatClient(answer), name=name)


async def test_default_aggregator_returns_every_answer_none_seeing_another() -> None:
    team = Concurrent([echo("a"), echo("b"), echo("c")])
    result = await team.run("t")
    assert [m.text for m in result.messages] == ["t", "a<t>", "b<t>", "c<t>"]
    assert result.stop_reason == "all 3 participants answered"


async def test_participants_run_in_one_superstep() -> None:
    team = Concurrent([echo("a"), echo("b"), echo("c")])
    task = TeamTask([Message("user", "t")])
    channels = {CHANNELS_KEY: team._new_channels()}
    supersteps = [
        e.executor_ids
        async for e in team.workflow.run_stream(task, kwargs=channels)
        if isinstance(e, SuperstepStartedEvent)
    ]
    assert sorted(supersteps[1]) == ["a", "b", "c"]


async def test_they_really_run_at_once() -> None:
    running = 0
    peak = 0

    async def slow(messages: list[Message], options: ChatOptions) -> str:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.01)
        running -= 1
        return "done"

    team = Concurrent([ChatAgent(ScriptedChatClient(slow), name=f"p{i}") for i in range(4)])
    await team.run("t")
    assert peak == 4


async def test_a_custom_aggregator_adds_the_combined_answer() -> None:
    seen: list[list[ConcurrentAnswer]] = []

    async def combine(answers: list[ConcurrentAnswer]) -> str:
        seen.append(answers)
        return " + ".join(a.text for a in answers)

    team = Concurrent([echo("a"), echo("b")], aggregator=combine)
    result = await team.run("t")
    assert result.messages[-1].text == "a<t> + b<t>"
    assert result.messages[-1].author_name == "aggregator"
    assert [a.name for a in seen[0]] == ["a", "b"]


async def test_an_aggregator_may_return_messages_or_nothing() -> None:
    def as_message(answers: list[ConcurrentAnswer]) -> Message:
        return Message("assistant", str(len(answers)))

    result = await Concurrent([echo("a")], aggregator=as_message).run("t")
    assert result.messages[-1].text == "1"
    result = await Concurrent([echo("a")], aggregator=lambda answers: None).run("t")
    assert [m.text for m in result.messages] == ["t", "a<t>"]


async def test_an_aggregator_returning_something_else_is_a_clear_error() -> None:
    def bad(answers: list[ConcurrentAnswer]) -> int:
        return 3

    team = Concurrent([echo("a")], aggregator=bad)  # type: ignore[arg-type]
    with pytest.raises(Exception, match="aggregator 'bad' returned int"):
        await team.run("t")
    with pytest.raises(ConfigurationError, match="aggregator must be a function"):
        Concurrent([echo("a")], aggregator="nope")  # type: ignore[arg-type]


async def test_fan_out_is_logged_and_a_second_run_sees_the_first() -> None:
    team = Concurrent([echo("a"), echo("b")])
    events = [e async for e in team.run_stream("t")]
    routes = [e for e in events if isinstance(e, RoutingEvent)]
    assert sorted(r.choice for r in routes) == ["a", "b"]
    again = await team.run("u")
    assert again.messages[1].text == "a<t|a<t>|b<t>|u>"


async def test_concurrent_sessions_are_isolated() -> None:
    team = Concurrent([echo("a"), echo("b")])
    results = await asyncio.gather(*(team.create_session().run(f"t{i}") for i in range(30)))
    for i, result in enumerate(results):
        assert [m.text for m in result.messages] == [f"t{i}", f"a<t{i}>", f"b<t{i}>"]
