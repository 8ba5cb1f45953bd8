"""A running team answers other tasks: it yields to the event loop at every turn, so a
timer keeps its time, a cancellation token or `stop()` lands within one turn, and
`pause()`/`resume()` hold and release the same run (checkpoint-safe)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from cantata.agents import Agent, AgentInput, AgentResponse, ChatAgent
from cantata.core import CancellationToken, CancelledError, Message, UsageError
from cantata.models import ChatOptions, ScriptedChatClient
from cantata.runtime import LocalRuntime
from cantata.stores import SQLiteStore
from cantata.teams import Concurrent, GroupChat, Handoff, Sequential, TaskResult
from cantata.teams._control import SLICE
from cantata.workflows import StateStoreCheckpointStore

TURNS = 1_000


class Counter:
    """How many turns the participants took, shared by the test and its other tasks."""

    def __init__(self) -> None:
        self.turns = 0


def instant(name: str, counter: Counter) -> ChatAgent:
    """A participant whose model answers at once (it never suspends)."""

    def answer(messages: list[Message], options: ChatOptions) -> str:
        counter.turns += 1
        return f"{name} {counter.turns}"

    return ChatAgent(ScriptedChatClient(answer), name=name)


class Told(Agent):
    """An instant participant that records being paused and resumed (AutoGen's hooks)."""

    def __init__(self, name: str, counter: Counter, log: list[str]) -> None:
        super().__init__(name=name)
        self.counter = counter
        self.log = log

    async def run(self, messages: AgentInput = None, **kwargs: Any) -> AgentResponse:
        self.counter.turns += 1
        return AgentResponse([Message("assistant", f"{self.name} {self.counter.turns}")])

    async def on_pause(self) -> None:
        self.log.append(f"{self.name} paused")

    async def on_resume(self) -> None:
        self.log.append(f"{self.name} resumed")


async def until(predicate: Any, *, within: float = 10.0) -> None:
    """Yield until `predicate()` holds (bounded)."""
    deadline = time.monotonic() + within
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0)


async def test_a_timer_keeps_its_time_beside_a_thousand_instant_turns() -> None:
    counter = Counter()
    team = GroupChat([instant("a", counter), instant("b", counter)], max_turns=TURNS)
    lateness: list[float] = []
    ended: list[float] = []

    async def timer() -> None:
        while not ended:
            due = time.perf_counter() + 0.002
            await asyncio.sleep(0.002)
            lateness.append(time.perf_counter() - due)

    ticking = asyncio.create_task(timer())
    start = time.perf_counter()
    result = await team.create_session().run("go")
    took = time.perf_counter() - start
    ticks_during_run = len(lateness)
    ended.append(took)
    await ticking
    assert len(result.messages) == TURNS + 1
    # A run that never yields would leave the timer asleep until it ended (one tick, as
    # late as the run is long); here it ticks all along, late by about a slice and a turn
    # (the median: a busy machine may hold any one tick back)
    assert ticks_during_run >= 3
    during = sorted(lateness[:ticks_during_run])
    assert during[len(during) // 2] < max(10 * SLICE, took / 10)


@pytest.mark.parametrize("kind", ["round robin", "handoff", "sequential"])
async def test_a_cancellation_from_another_task_lands_within_one_turn(kind: str) -> None:
    counter = Counter()
    agents = [instant("a", counter), instant("b", counter)]
    if kind == "round robin":
        team: Any = GroupChat(agents, max_turns=TURNS)
    elif kind == "handoff":
        team = Handoff(agents, autonomous=True, max_turns=TURNS)
    else:
        team = Sequential([instant(f"s{i}", counter) for i in range(200)])
    token = CancellationToken()
    at_cancel: list[int] = []

    async def cancel_later() -> None:
        await until(lambda: counter.turns >= 50)
        at_cancel.append(counter.turns)
        token.cancel()

    canceller = asyncio.create_task(cancel_later())
    session = team.create_session()
    with pytest.raises(CancelledError):
        await session.run("go", cancellation_token=token)
    await canceller
    assert counter.turns <= at_cancel[0] + 1
    # the session is whole: run() without a task finishes the interrupted turn and goes on
    if kind == "round robin":
        result = await session.run()
        assert result.stop_message is not None


async def test_every_kind_of_team_yields_within_its_first_turn() -> None:
    counter = Counter()
    teams: list[Any] = [
        GroupChat([instant("a", counter)], max_turns=1),
        Handoff([instant("a", counter)], autonomous=True, max_turns=1),
        Sequential([instant("a", counter)]),
        Concurrent([instant(f"c{i}", counter) for i in range(3)]),
    ]
    for team in teams:
        ticks: list[int] = []

        async def tick(into: list[int] = ticks) -> None:
            into.append(counter.turns)

        before = counter.turns
        ticking = asyncio.ensure_future(tick())
        await team.create_session().run("go")
        await ticking
        assert ticks == [before], type(team).__name__  # it ran before the first turn
        assert counter.turns > before


async def test_a_yield_comes_at_least_once_a_slice() -> None:
    # agents that answer at once never suspend: the manager gives the loop its turn at the
    # first boundary after each slice (SLICE seconds), so a task made ready meanwhile
    # waits about a slice and a turn, not the whole run
    counter = Counter()
    team = GroupChat([instant("a", counter), instant("b", counter)], max_turns=TURNS)
    waits: list[float] = []
    done: list[bool] = []

    async def ready_at_once() -> None:
        while not done:
            asked = time.perf_counter()
            await asyncio.sleep(0)
            waits.append(time.perf_counter() - asked)

    spinning = asyncio.create_task(ready_at_once())
    start = time.perf_counter()
    await team.create_session().run("go")
    took = time.perf_counter() - start
    count = len(waits)
    done.append(True)
    await spinning
    assert count >= min(5, took / SLICE / 4)
    assert sorted(waits[:count])[count // 2] < max(10 * SLICE, took / 4)  # the median wait


async def test_stop_from_another_task_ends_the_run_after_the_turn_under_way() -> None:
    counter = Counter()
    team = GroupChat([instant("a", counter), instant("b", counter)], max_turns=TURNS)
    at_stop: list[int] = []

    async def stop_later() -> None:
        await until(lambda: counter.turns >= 30)
        at_stop.append(counter.turns)
        team.stop()

    stopper = asyncio.create_task(stop_later())
    result = await team.run("go")
    await stopper
    assert result.stop_message is not None and result.stop_message.source == "stop"
    assert counter.turns <= at_stop[0] + 1
    assert len(result.messages) == counter.turns + 1
    # a stop asks the run under way only: the next run goes on to its own end
    team.stop()  # nothing is running: nothing happens
    again = await team.run()
    assert again.stop_message is not None and again.stop_message.source == "max_turns"


async def test_pause_holds_the_run_and_resume_continues_the_same_run(tmp_path: Path) -> None:
    store = StateStoreCheckpointStore(SQLiteStore(tmp_path / "paused.db"))
    try:
        counter, log = Counter(), []
        team = GroupChat([Told("a", counter, log), Told("b", counter, log)], max_turns=40)
        session = team.create_session(checkpoint_store=store)
        running = asyncio.create_task(session.run("go"))
        await until(lambda: counter.turns >= 10)
        await session.pause()
        assert session.is_paused
        assert log == ["a paused", "b paused"]
        paused_at = counter.turns
        await asyncio.sleep(0.05)
        assert not running.done()
        assert counter.turns <= paused_at + 1  # the turn under way finished, no other began
        held = counter.turns

        # checkpoint-safe: what the store has is the whole conversation up to the pause, and
        # a new session resumed from it (another process would do the same) goes on alike
        checkpoints = await store.list_checkpoints()
        checkpoint = max(checkpoints, key=lambda c: c.superstep).checkpoint_id
        elsewhere_counter = Counter()
        twin = GroupChat(
            [Told("a", elsewhere_counter, []), Told("b", elsewhere_counter, [])], max_turns=40
        )
        resumed = await twin.resume(checkpoint, checkpoint_store=store)
        elsewhere = await resumed.run()

        await session.resume()
        assert not session.is_paused
        assert log[2:] == ["a resumed", "b resumed"]
        result: TaskResult = await asyncio.wait_for(running, 10)
        assert result.stop_message is not None and result.stop_message.source == "max_turns"
        assert len(result.messages) == 41  # one run: the task and its 40 turns
        assert counter.turns == 40 and held <= 40
        assert [m.author_name for m in elsewhere.messages[-5:]] == [
            m.author_name for m in result.messages[-5:]
        ]
    finally:
        await store.close()


async def test_the_default_session_pauses_and_resumes_as_autogen_teams_do() -> None:
    counter = Counter()
    team = GroupChat([instant("a", counter), instant("b", counter)], max_turns=200)
    running = asyncio.create_task(team.run("go"))
    await until(lambda: counter.turns >= 5)
    await team.pause()
    held = counter.turns
    await asyncio.sleep(0.02)
    assert counter.turns <= held + 1 and not running.done()
    assert await team.resume() is team.session
    result = await asyncio.wait_for(running, 10)
    assert len(result.messages) == 201


async def test_a_cancellation_ends_a_paused_run() -> None:
    counter = Counter()
    team = GroupChat([instant("a", counter), instant("b", counter)], max_turns=200)
    session = team.create_session()
    token = CancellationToken()
    running = asyncio.create_task(session.run("go", cancellation_token=token))
    await until(lambda: counter.turns >= 5)
    await session.pause()
    await asyncio.sleep(0.01)
    token.cancel()
    with pytest.raises(CancelledError):
        await asyncio.wait_for(running, 5)
    await session.resume()
    result = await session.run()  # the interrupted run goes on
    assert len(result.messages) == 201


async def test_stop_ends_a_paused_run_at_once() -> None:
    counter = Counter()
    team = GroupChat([instant("a", counter), instant("b", counter)], max_turns=200)
    session = team.create_session()
    running = asyncio.create_task(session.run("go"))
    await until(lambda: counter.turns >= 5)
    await session.pause()
    session.stop()
    result = await asyncio.wait_for(running, 5)
    assert result.stop_message is not None and result.stop_message.source == "stop"


async def test_pause_on_a_copying_runtime_is_refused_with_what_to_do() -> None:
    counter = Counter()
    team = GroupChat([instant("a", counter)], max_turns=1)
    async with LocalRuntime(serialize_messages=True) as copying:
        session = team.create_session(runtime=copying)
        with pytest.raises(UsageError, match="cancellation token"):
            await session.pause()
        with pytest.raises(UsageError, match="cancellation token"):
            session.stop()


class AsksAt(Agent):
    """An instant participant that, on turn `at`, calls `ask` inside its own turn (so no
    yield comes between the request and the next turn boundary)."""

    def __init__(self, name: str, counter: Counter, at: int, ask: Any) -> None:
        super().__init__(name=name)
        self.counter, self.at, self.ask = counter, at, ask

    async def run(self, messages: AgentInput = None, **kwargs: Any) -> AgentResponse:
        self.counter.turns += 1
        if self.counter.turns == self.at:
            asked = self.ask()
            if asked is not None:
                await asked
        return AgentResponse([Message("assistant", f"{self.name} {self.counter.turns}")])


async def test_a_stop_asked_mid_slice_lands_at_the_next_boundary() -> None:
    # a boundary looks at stop and pause only when it is due; asking makes it due, so a
    # request made within a slice is not left for the slice's end
    counter = Counter()
    box: list[Any] = []
    team = GroupChat(
        [AsksAt("a", counter, 7, lambda: box[0].stop()), instant("b", counter)], max_turns=TURNS
    )
    box.append(team.create_session())
    result = await box[0].run("go")
    assert result.stop_message is not None and result.stop_message.source == "stop"
    assert counter.turns == 7 and len(result.messages) == 8


async def test_a_pause_asked_mid_slice_holds_the_next_turn() -> None:
    counter = Counter()
    box: list[Any] = []
    team = GroupChat(
        [AsksAt("a", counter, 5, lambda: box[0].pause()), instant("b", counter)], max_turns=20
    )
    box.append(team.create_session())
    running = asyncio.create_task(box[0].run("go"))
    await until(lambda: counter.turns >= 5)
    await asyncio.sleep(0.05)
    assert counter.turns == 5 and not running.done()
    await box[0].resume()
    result: TaskResult = await asyncio.wait_for(running, 10)
    assert counter.turns == 20 and len(result.messages) == 21
