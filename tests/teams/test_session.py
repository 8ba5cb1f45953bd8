"""Running a team: sessions, one activity at a time, cancellation, external termination,
reset, save/load as JSON, as an agent, and 100 concurrent runs of one definition."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from cantata.core import CancellationToken, CancelledError, Message, SchemaVersionError
from cantata.stores import SQLiteStore
from cantata.teams import (
    External,
    GroupChat,
    MaxMessage,
    TaskResult,
    TeamAgent,
    TeamBusyError,
    TeamSession,
)
from cantata.workflows import StateStoreCheckpointStore

from ._agents import counting_agent, function_agent


def _texts(result: TaskResult) -> list[str]:
    return [m.text for m in result.messages]


class Gate:
    """A model answer that waits until the test lets it go (bounded), and says when it
    has started."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()

    async def __call__(self, messages: Sequence[Message], options: object) -> str:
        self.started.set()
        await asyncio.wait_for(self.release.wait(), 5)
        return f"slow answered {len(messages)}"


def _slow_team(gate: Gate, **kwargs: object) -> GroupChat:
    from cantata.agents import ChatAgent
    from cantata.models import ScriptedChatClient

    slow = ChatAgent(ScriptedChatClient(gate), name="slow")
    return GroupChat([slow, counting_agent("quick")], **kwargs)  # type: ignore[arg-type]


async def test_a_session_does_one_thing_at_a_time_but_sessions_run_at_once() -> None:
    gate = Gate()
    team = _slow_team(gate, max_turns=2)
    session = team.create_session()
    first = asyncio.ensure_future(session.run("one"))
    await asyncio.wait_for(gate.started.wait(), 5)
    assert session.is_running
    with pytest.raises(TeamBusyError, match="already running in this session"):
        await session.run("two")
    with pytest.raises(TeamBusyError):
        await team.run("x") if team.session is session else await session.reset()
    other = team.create_session()  # another conversation of the same definition
    gate.release.set()
    second = await other.run("independent")
    assert _texts(await first)[0] == "one"
    assert _texts(second)[0] == "independent"


async def test_the_default_session_raises_when_already_running() -> None:
    gate = Gate()
    team = _slow_team(gate, max_turns=2)
    running = asyncio.ensure_future(team.run("one"))
    await asyncio.wait_for(gate.started.wait(), 5)
    with pytest.raises(TeamBusyError, match="team 'group_chat' is already running"):
        await team.run("again")
    gate.release.set()
    await running


async def test_cancellation_stops_at_once_and_run_finishes_the_turn_later() -> None:
    gate = Gate()
    team = _slow_team(gate, max_turns=2)
    session = team.create_session()
    token = CancellationToken()
    running = asyncio.ensure_future(session.run("go", cancellation_token=token))
    await asyncio.wait_for(gate.started.wait(), 5)
    token.cancel()  # the model call under way is cancelled; nothing waits for it
    with pytest.raises(CancelledError, match="was cancelled"):
        await running
    with pytest.raises(Exception, match="stopped in the middle of a run"):
        await session.run("a new task")
    gate.release.set()
    rest = await session.run()  # the interrupted turn runs again, then the run goes on
    assert _texts(rest) == ["go", "slow answered 1", "quick says 2"]


async def test_external_termination_stops_after_the_current_turn() -> None:
    gate = Gate()
    stop = External()
    team = _slow_team(gate, termination=stop | MaxMessage(50))
    session = team.create_session()
    running = asyncio.ensure_future(session.run("go"))
    await asyncio.wait_for(gate.started.wait(), 5)
    stop.set()  # during slow's turn: that turn finishes, then the run stops
    gate.release.set()
    result = await running
    assert _texts(result) == ["go", "slow answered 1"]
    assert result.stop_message is not None and result.stop_message.source == "External"
    # the next run is not stopped by the earlier set()
    gate.started.clear()
    nxt = await session.run()
    assert len(nxt.messages) > 2


async def test_reset_starts_the_conversation_over() -> None:
    team = GroupChat([counting_agent("a"), counting_agent("b")], max_turns=2)
    await team.run("first")
    await team.reset()
    again = await team.run("second")
    assert _texts(again) == ["second", "a says 1", "b says 2"]
    await team.close()  # closing stops deliveries; the conversation is kept
    assert _texts(await team.run()) == ["a says 3", "b says 4"]


async def test_save_state_is_json_and_load_state_continues_in_another_session() -> None:
    team = GroupChat([counting_agent("a"), counting_agent("b")], max_turns=2)
    await team.run("first")
    state = json.loads(json.dumps(await team.save_state()))  # plain JSON, no pickle
    assert state["schema_version"] == 1 and state["team"] == "group_chat"

    twin = GroupChat([counting_agent("a"), counting_agent("b")], max_turns=2)
    await twin.load_state(state)
    after_load = await twin.run()
    reference = await team.run()
    assert _texts(after_load) == _texts(reference) == ["a says 3", "b says 4"]


async def test_the_default_session_checkpoints_only_when_its_state_is_saved() -> None:
    # AutoGen's path (team.run, team.reset) writes no checkpoint as it runs; save_state
    # saves when asked, each save after the first writing only what changed, and the
    # states saved along the way load into a new team as they were
    team = GroupChat([counting_agent("a"), counting_agent("b")], max_turns=2)
    await team.run("first")
    assert team.session.checkpoint_id is None  # nothing written per step
    one = json.loads(json.dumps(await team.save_state()))
    await team.run()
    two = json.loads(json.dumps(await team.save_state()))
    for state, expected in ((one, ["a says 3", "b says 4"]), (two, ["a says 5", "b says 6"])):
        twin = GroupChat([counting_agent("a"), counting_agent("b")], max_turns=2)
        await twin.load_state(state)
        assert _texts(await twin.run()) == expected
        assert twin.session.checkpoint_id is None  # a loaded session runs without a store
        again = json.loads(json.dumps(await twin.save_state()))
        assert again["run"]["checkpoint"]["superstep"] > state["run"]["checkpoint"]["superstep"]
    await team.reset()
    assert (await team.save_state())["run"] is None
    assert _texts(await team.run("new")) == ["new", "a says 1", "b says 2"]


async def test_load_state_refuses_unknown_versions_and_other_teams() -> None:
    team = GroupChat([counting_agent("a")], max_turns=1)
    with pytest.raises(SchemaVersionError):
        await team.load_state({"schema_version": 99, "team": "group_chat", "run": None})
    from cantata.core import CheckpointError

    with pytest.raises(CheckpointError, match="saved by team 'other'"):
        await team.load_state({"schema_version": 1, "team": "other", "run": None})
    with pytest.raises(CheckpointError, match="damaged"):
        await team.load_state({"schema_version": 1, "team": "group_chat", "run": {"x": 1}})


async def test_a_team_as_an_agent_answers_with_its_participants_messages() -> None:
    team = GroupChat([counting_agent("a"), counting_agent("b")], max_turns=2, name="duo")
    agent = team.as_agent()
    assert isinstance(agent, TeamAgent) and agent.name == "duo"
    response = await agent.run("hello")
    assert [(m.author_name, m.text) for m in response.messages] == [
        ("a", "a says 1"),
        ("b", "b says 2"),
    ]
    # the thread carries the conversation into the next call
    assert response.thread is not None
    again = await agent.run("more", thread=response.thread)
    assert again.messages[0].text == "a says 4"


async def test_a_team_agent_can_be_a_participant_of_another_team() -> None:
    inner = GroupChat([counting_agent("x"), counting_agent("y")], max_turns=2, name="inner")
    outer = GroupChat([inner.as_agent(), counting_agent("z")], max_turns=2)
    result = await outer.create_session().run("task")
    assert [m.author_name for m in result.messages] == ["user", "x", "y", "z"]


async def test_one_hundred_concurrent_runs_of_one_definition_stay_isolated() -> None:
    def echo_task(name: str) -> function_agent:  # type: ignore[valid-type]
        return function_agent(name, lambda ms: f"{name}:{ms[0].text}:{len(ms)}")

    team = GroupChat([echo_task("a"), echo_task("b"), echo_task("c")], max_turns=6)
    sessions = [team.create_session() for _ in range(100)]
    results = await asyncio.gather(*(s.run(f"task-{i}") for i, s in enumerate(sessions)))
    for i, result in enumerate(results):
        expected = [f"task-{i}"] + [
            f"{n}:task-{i}:{k}" for k, n in zip(range(1, 7), "abcabc", strict=True)
        ]
        assert _texts(result) == expected
    again = await asyncio.gather(*(s.run() for s in sessions[:10]))
    assert all(r.messages[0].text == f"a:task-{i}:7" for i, r in enumerate(again))


def test_sessions_are_independent_objects() -> None:
    team = GroupChat([counting_agent("a")], max_turns=1)
    one, two = team.create_session(), team.create_session()
    assert isinstance(one, TeamSession) and one is not two
    assert one.channels is not two.channels
    assert team.session is team.session


async def test_the_default_session_can_checkpoint_into_a_durable_store(tmp_path: Path) -> None:
    store = StateStoreCheckpointStore(SQLiteStore(tmp_path / "team.db"))
    try:
        team = GroupChat([counting_agent("a"), counting_agent("b")], max_turns=2)
        session = team.use_checkpoint_store(store)
        assert team.session is session
        await team.run("first")
        assert session.checkpoint_id is not None
        resumed = await GroupChat([counting_agent("a"), counting_agent("b")], max_turns=2).resume(
            session.checkpoint_id, checkpoint_store=store
        )
        assert _texts(await resumed.run()) == ["a says 3", "b says 4"]
    finally:
        await store.close()
