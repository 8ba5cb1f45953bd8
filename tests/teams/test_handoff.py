"""Handoff (swarm) rules, each on scripted models."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from cantata.agents import ChatAgent
from cantata.core import ConfigurationError, Message, UsageError
from cantata.models import ChatOptions, ScriptedChatClient, ToolSpec, tool_call
from cantata.teams import channel_key
from cantata.teams.events import RoutingEvent
from cantata.teams.handoff import HANDOFF_TO_KEY, USER, Handoff, Swarm, handoff_of
from cantata.teams.termination import Handoff as HandoffTermination
from cantata.teams.termination import MaxMessage
from cantata.workflows import InMemoryCheckpointStore


def agent(name: str, script: Sequence[object], description: str = "") -> ChatAgent:
    return ChatAgent(ScriptedChatClient(list(script)), name=name, description=description)  # type: ignore[arg-type]


def transfer(target: str, summary: str = "") -> list[object]:
    return [tool_call(f"transfer_to_{target}", {"summary": summary})]


def offered(a: ChatAgent, call: int = 0) -> list[str]:
    client = a.client
    assert isinstance(client, ScriptedChatClient)
    return sorted(t.name for t in client.calls[call].options.tools or [])


async def test_full_mesh_offers_a_transfer_to_everyone_else() -> None:
    a, b, c = agent("a", ["hi"]), agent("b", []), agent("c", [])
    team = Handoff([a, b, c])
    assert team.targets == {"a": ("b", "c"), "b": ("a", "c"), "c": ("a", "b")}
    await team.run("task")
    assert offered(a) == ["transfer_to_b", "transfer_to_c"]


async def test_declared_edges_offer_only_those_targets() -> None:
    a = agent("a", [transfer("b", "for b")])
    b = agent("b", ["done by b"])
    team = Handoff([a, b, agent("c", [])], handoffs={"a": ["b"], "b": ["user"]})
    result = await team.run("task")
    assert offered(a) == ["transfer_to_b"]
    assert offered(b) == ["transfer_to_user"]
    assert team.targets["c"] == ()
    assert result.messages[-1].text == "done by b"


async def test_a_handoff_passes_the_turn_with_a_summary_and_the_correlation_id() -> None:
    triage = agent("triage", [transfer("billing", "refund for order 7")])
    billing = agent("billing", ["Refund issued."])
    team = Handoff([triage, billing])
    events = [e async for e in team.run_stream("I want my money back")]
    routes = [e for e in events if isinstance(e, RoutingEvent)]
    assert [r.choice for r in routes] == ["triage", "billing"]
    assert routes[1].reason == "triage handed off: refund for order 7"
    assert routes[1].candidates == ["billing"]
    assert len({r.correlation_id for r in routes}) == 1
    result = events[-1]
    notes = [h for m in result.messages if (h := handoff_of(m)) is not None]
    assert len(notes) == 1
    note = notes[0]
    assert (note.source, note.target, note.summary) == ("triage", "billing", "refund for order 7")
    assert note.correlation_id == routes[0].correlation_id
    # Not a copy of the history: the handoff message is one line naming the summary.
    handoff_message = next(m for m in result.messages if handoff_of(m) is not None)
    assert "I want my money back" not in handoff_message.text
    # The target reads the one shared history, the task included.
    seen = billing.client.calls[0].messages  # type: ignore[attr-defined]
    assert any("I want my money back" in m.text for m in seen)


async def test_every_transfer_call_gets_a_result_in_the_history() -> None:
    two_calls = [
        tool_call("transfer_to_b", {"summary": "first"}),
        tool_call("transfer_to_c", {"summary": "second"}),
    ]
    a = agent("a", [two_calls, "a again"])
    b = agent("b", [transfer("a", "back to a")])
    team = Handoff([a, b, agent("c", [])])
    result = await team.run("go")
    assert result.messages[-1].text == "a again"
    # a sees its own messages as they are: both calls, each with its result
    seen = a.client.calls[1].messages  # type: ignore[attr-defined]
    calls = {c.call_id for m in seen for c in m.function_calls}
    results = {c.call_id: c for m in seen for c in m.function_results}
    assert calls == set(results) == {c.call_id for c in two_calls}
    chosen, other = (results[c.call_id] for c in two_calls)
    assert chosen.result == "transferred to b"
    assert other.is_error and "one handoff a turn" in (other.error or "")


async def test_no_handoff_asks_the_user_and_the_reply_returns_to_that_agent() -> None:
    triage = agent("triage", [transfer("billing", "refund")])
    billing = agent("billing", ["Which card?", "Refund done."])
    team = Handoff([triage, billing])
    first = await team.run("refund please")
    assert first.stop_message is not None
    assert first.stop_message.source == "user_input"
    assert first.stop_reason == "billing asks the user: Which card?"
    second = await team.run("the visa")
    assert [m.text for m in second.messages] == ["the visa", "Refund done."]
    assert second.messages[-1].author_name == "billing"


async def test_without_return_to_previous_the_reply_goes_to_the_start_agent() -> None:
    triage = agent("triage", [transfer("billing", "refund"), "triage again"])
    billing = agent("billing", ["Which card?"])
    team = Handoff([triage, billing], return_to_previous=False)
    await team.run("refund please")
    second = await team.run("the visa")
    assert second.messages[-1].author_name == "triage"


async def test_autonomous_mode_goes_on_up_to_the_turn_limit() -> None:
    worker = agent("worker", [f"step {i}" for i in range(3)])
    team = Handoff([worker, agent("other", [])], autonomous=True, max_turns=3)
    result = await team.run("work alone")
    assert [m.text for m in result.messages] == ["work alone", "step 0", "step 1", "step 2"]
    assert result.stop_message is not None and result.stop_message.source == "max_turns"
    assert Handoff([worker], autonomous=True).max_turns == 20


async def test_transfer_to_user_asks_the_user_or_ends_with_the_termination() -> None:
    a = agent("a", [transfer(USER, "need your address")])
    team = Handoff([a, agent("b", [])], handoffs={"a": ["b", USER]})
    result = await team.run("ship it")
    assert result.stop_message is not None and result.stop_message.source == "user_input"
    assert result.stop_reason == "a asks the user: need your address"

    a2 = agent("a", [transfer(USER, "need your address")])
    ended = Handoff(
        [a2, agent("b", [])], handoffs={"a": [USER]}, termination=HandoffTermination(USER)
    )
    result = await ended.run("ship it")
    assert result.stop_message is not None
    assert result.stop_message.source == "Handoff"


async def test_a_chain_of_handoffs_and_a_termination_condition() -> None:
    a = agent("a", [transfer("b", "1")])
    b = agent("b", [transfer("c", "2")])
    c = agent("c", ["c finished"])
    team = Handoff([a, b, c], termination=MaxMessage(10))
    events = [e async for e in team.run_stream("start")]
    assert [e.choice for e in events if isinstance(e, RoutingEvent)] == ["a", "b", "c"]
    assert events[-1].messages[-1].text == "c finished"  # type: ignore[union-attr]


async def test_a_handoff_conversation_resumes_from_a_checkpoint_with_its_active_agent() -> None:
    store = InMemoryCheckpointStore()

    def build() -> Handoff:
        triage = agent("triage", [transfer("billing", "refund")])
        billing = agent("billing", ["Which card?", "Refund done."])
        return Handoff([triage, billing])

    first_team = build()
    session = first_team.create_session(checkpoint_store=store)
    await session.run("refund please")
    checkpoint = session.checkpoint_id
    assert checkpoint is not None
    fresh = build()
    # the fresh team's billing agent answers its first call: the reply goes to billing
    fresh.participants[1].client._turns = ["Refund done."]  # type: ignore[attr-defined]
    resumed = await fresh.resume(checkpoint, checkpoint_store=store)
    result = await resumed.run("the visa")
    assert result.messages[-1].author_name == "billing"
    assert result.messages[-1].text == "Refund done."


async def test_concurrent_sessions_of_one_definition_are_isolated() -> None:
    def route(messages: list[Message], options: ChatOptions) -> object:
        task = next(m.text for m in messages if m.role == "user")
        return transfer("b" if "b" in task else "c", task)

    def answer(name: str) -> ChatAgent:
        return ChatAgent(
            ScriptedChatClient(lambda messages, options: f"{name}: {messages[0].text}"), name=name
        )

    team = Handoff([ChatAgent(ScriptedChatClient(route), name="a"), answer("b"), answer("c")])
    tasks = [f"to {'b' if i % 2 else 'c'} #{i}" for i in range(20)]
    results = await asyncio.gather(*(team.create_session().run(t) for t in tasks))
    for task, result in zip(tasks, results, strict=True):
        target = "b" if " b " in f" {task.split()[1]} " else "c"
        assert result.messages[0].text == task
        assert result.messages[-1].author_name == target
        assert result.messages[-1].text == f"{target}: {task}"


def test_bad_definitions_are_refused_with_the_names_involved() -> None:
    a, b = agent("a", []), agent("b", [])
    with pytest.raises(ConfigurationError, match="start agent 'zed' is not a participant"):
        Handoff([a, b], start="zed")
    with pytest.raises(ConfigurationError, match="handoffs names 'zed'"):
        Handoff([a, b], handoffs={"zed": ["a"]})
    with pytest.raises(ConfigurationError, match="'a' may hand off to 'zed'"):
        Handoff([a, b], handoffs={"a": ["zed"]})
    with pytest.raises(ConfigurationError, match="cannot hand off to itself"):
        Handoff([a, b], handoffs={"a": ["a"]})
    with pytest.raises(ConfigurationError, match="list of names"):
        Handoff([a, b], handoffs={"a": "b"})
    long = agent("x" * 60, [])
    with pytest.raises(ConfigurationError, match="longer than 64"):
        Handoff([a, long])
    with pytest.raises(ConfigurationError, match="participant named 'user'"):
        Handoff([a, agent("user", [])])
    assert Swarm is Handoff


async def test_participants_read_the_history_through_the_session_channels() -> None:
    a = agent("a", [transfer("b", "over to b"), "a again"])
    b = agent("b", [transfer("a", "back to a")])
    team = Handoff([a, b])
    session = team.create_session()
    result = await session.run("task")
    assert result.messages[-1].text == "a again"
    # one channel for the local thread kind, not a fresh thread per turn
    assert session.channels.keys == [channel_key(a)]
    # back on its channel, `a` sees its own call with its result and note as they are,
    # b's handoff note as a user message, and none of b's tool traffic; its transfer
    # tools came as run options on both turns
    seen = [(m.role, m.author_name, m.text) for m in a.client.calls[1].messages]  # type: ignore[attr-defined]
    assert seen == [
        ("user", "user", "task"),
        ("assistant", "a", ""),
        ("tool", "a", ""),
        ("assistant", "a", "a handed the conversation to b: over to b"),
        ("user", "b", "b handed the conversation to a: back to a"),
    ]
    assert offered(a, 0) == offered(a, 1) == ["transfer_to_b"]
    assert a.options.tools is None  # the agent's own options are untouched


def _to_elsewhere(name: str, script: Sequence[object]) -> ChatAgent:
    """An agent with its own transfer tool to a name outside any team (AutoGen's agent
    ``handoffs=["elsewhere"]``)."""
    spec = ToolSpec("transfer_to_elsewhere", "hand off outside", {"type": "object"})
    client = ScriptedChatClient(list(script))  # type: ignore[arg-type]
    return ChatAgent(client, name=name, options=ChatOptions(tools=[spec]))


async def test_a_handoff_outside_the_team_is_in_the_result_and_the_next_run_needs_one_in() -> None:
    # AutoGen's swarm test: the last agent hands off to a name outside the team, which a
    # HandoffTermination for that name stops on
    a = agent("a", [transfer("b", "1"), "a again"])
    b = agent("b", [transfer("c", "2")])
    c = _to_elsewhere("c", [transfer("elsewhere", "3")])
    team = Handoff(
        [a, b, c],
        handoffs={"a": ["b"], "b": ["c"]},
        termination=HandoffTermination("elsewhere"),
    )
    session = team.create_session()
    result = await session.run("task")
    handed = [h for m in result.messages if (h := handoff_of(m)) is not None]
    assert [(h.source, h.target) for h in handed] == [("a", "b"), ("b", "c"), ("c", "elsewhere")]
    assert handoff_of(result.messages[-1]) == handed[-1]
    assert result.stop_message is not None and result.stop_message.source == "Handoff"
    assert offered(c) == ["transfer_to_elsewhere"]  # its own tool, answered by the team
    for task in (None, "new task"):
        with pytest.raises(UsageError, match="handed to 'elsewhere', which is not a participant"):
            await session.run(task)
    with pytest.raises(UsageError, match="hands the conversation to 'nobody'"):
        await session.run(Message("user", "go", metadata={HANDOFF_TO_KEY: "nobody"}))
    again = await session.run(Message("user", "back to a", metadata={HANDOFF_TO_KEY: "a"}))
    assert [m.text for m in again.messages] == ["back to a", "a again"]

    # without a condition for it, the run stops at the handoff all the same
    alone = Handoff([_to_elsewhere("c", [transfer("elsewhere", "out")]), agent("d", [])])
    stopped = await alone.run("task")
    assert stopped.stop_reason == "c handed the conversation to elsewhere, who is not in the team"
    assert handoff_of(stopped.messages[-1]) is not None
    with pytest.raises(UsageError, match="handed to 'elsewhere'"):
        await alone.run("more")
