"""Sequential: in order, once each, full conversation or only the previous reply."""

from __future__ import annotations

import asyncio

from cantata.agents import ChatAgent
from cantata.core import Message
from cantata.models import ChatOptions, ScriptedChatClient
from cantata.teams.events import RoutingEvent
from cantata.teams.sequential import Sequential, last_turn
from cantata.teams.termination import TextMention


def echo(name: str) -> ChatAgent:
    """Answers with the texts it was shown, so a test sees each participant's view."""

    def answer(messages: list[Message], options: ChatOptions) -> str:
        return f"{name}<{'|'.join(m.text for m in messages)}>"

    return ChatAgent(ScriptedChatClient(answer), name=name)


async def test_each_participant_answers_once_in_order_seeing_everything() -> None:
    team = Sequential([echo("a"), echo("b"), echo("c")])
    result = await team.run("t")
    assert [m.author_name for m in result.messages] == ["user", "a", "b", "c"]
    assert result.messages[1].text == "a<t>"
    assert result.messages[2].text == "b<t|a<t>>"
    assert result.messages[3].text == "c<t|a<t>|b<t|a<t>>>"
    assert result.stop_message is not None
    assert result.stop_message.source == "sequence"
    assert result.stop_reason == "sequence complete: all 3 participants answered"


async def test_chain_only_agent_responses_shows_only_the_previous_reply() -> None:
    team = Sequential([echo("a"), echo("b"), echo("c")], chain_only_agent_responses=True)
    result = await team.run("t")
    assert [m.text for m in result.messages[1:]] == ["a<t>", "b<a<t>>", "c<b<a<t>>>"]


async def test_each_hand_over_is_a_routing_event() -> None:
    team = Sequential([echo("a"), echo("b")])
    events = [e async for e in team.run_stream("t")]
    routes = [e for e in events if isinstance(e, RoutingEvent)]
    assert [(r.choice, r.candidates) for r in routes] == [("a", ["a"]), ("b", ["b"])]
    assert routes[1].reason == "next after a in the sequence"


async def test_a_termination_condition_stops_the_chain_early() -> None:
    team = Sequential([echo("a"), echo("b"), echo("c")], termination=TextMention("a<"))
    result = await team.run("t")
    assert [m.author_name for m in result.messages] == ["user", "a"]
    assert result.stop_message is not None and result.stop_message.source == "TextMention"


async def test_a_second_run_continues_the_conversation() -> None:
    team = Sequential([echo("a"), echo("b")], chain_only_agent_responses=True)
    await team.run("one")
    second = await team.run("two")
    assert [m.text for m in second.messages] == ["two", "a<two>", "b<a<two>>"]
    full = Sequential([echo("a")])
    await full.run("one")
    again = await full.run("two")
    assert again.messages[-1].text == "a<one|a<one>|two>"


async def test_concurrent_sessions_are_isolated() -> None:
    team = Sequential([echo("a"), echo("b")])
    results = await asyncio.gather(*(team.create_session().run(f"t{i}") for i in range(30)))
    for i, result in enumerate(results):
        assert result.messages[-1].text == f"b<t{i}|a<t{i}>>"


def test_last_turn_is_the_trailing_run_of_one_author() -> None:
    msgs = [
        Message("user", "t", author_name="user"),
        Message("assistant", "x", author_name="a"),
        Message("assistant", "y", author_name="b"),
        Message("assistant", "z", author_name="b"),
    ]
    assert [m.text for m in last_turn(msgs)] == ["y", "z"]
    assert last_turn([]) == []
