"""A team type of its own on the base: a manager that asks a person before the first turn
(a workflow request), answered through the session; the base does the rest."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from cantata.agents import Agent
from cantata.core import ConfigurationError, Message, UsageError, WorkflowError, register
from cantata.runtime import LocalRuntime
from cantata.teams import StopMessage, TaskResult, Team, TeamManager
from cantata.teams.manager import ManagerState, channels_of
from cantata.teams.turns import SpeakTurn, TurnDone
from cantata.workflows import (
    Executor,
    RequestInfoEvent,
    Workflow,
    WorkflowContext,
    handler,
    response_handler,
)

from ._agents import counting_agent


@register(name="tests.teams.Approval")
@dataclass(slots=True)
class Approval:
    question: str


class AskFirst(TeamManager):
    """Asks for a go-ahead, publishes the answer, lets the first participant speak once."""

    async def on_start(self, state: ManagerState, ctx: WorkflowContext[Any, Any]) -> None:
        ctx.request_info(Approval("go ahead?"), response_type=str)

    @response_handler
    async def answered(
        self, request: Approval, answer: str, ctx: WorkflowContext[Any, Any]
    ) -> None:
        state = self.state_of(ctx)
        self.publish(state, [Message("user", answer, author_name="boss")], ctx)
        self.speak(state, self.participants[0], ctx, reason="approved by the boss")

    async def on_turn(
        self, state: ManagerState, done: TurnDone, ctx: WorkflowContext[Any, Any]
    ) -> None:
        self.stop(state, StopMessage("one turn is enough", "ask_first"), ctx)


class AskFirstTeam(Team):
    def _build_workflow(self) -> Workflow:
        return self._star_workflow(AskFirst(self.participant_names), max_supersteps=20)


@pytest.fixture(params=["in process", "copying"])
async def runtime(request: pytest.FixtureRequest) -> AsyncIterator[LocalRuntime | None]:
    """No runtime, or one that copies messages (the team's executors then run as actors of
    their own, as on Ray)."""
    if request.param == "in process":
        yield None
        return
    async with LocalRuntime(serialize_messages=True) as copying:
        yield copying


async def test_a_manager_can_ask_for_input_and_the_session_answers_it(
    runtime: LocalRuntime | None,
) -> None:
    team = AskFirstTeam([counting_agent("worker")], name="ask_first")
    session = team.create_session(runtime=runtime)
    waiting = await session.run("do it")
    assert waiting.stop_message == StopMessage(
        f"waiting for answers to requests {[r.request_id for r in session.pending_requests]}",
        "input",
    )
    (request,) = session.pending_requests
    assert isinstance(request.data, Approval)
    with pytest.raises(UsageError, match="waits for answers to requests"):
        await session.run()
    done = await session.send_responses({request.request_id: "yes"})
    assert [(m.author_name, m.text) for m in done.messages] == [
        ("user", "do it"),
        ("boss", "yes"),
        ("worker", "worker says 2"),
    ]
    assert done.stop_reason == "one turn is enough"
    assert session.pending_requests == []


async def test_a_streamed_run_yields_the_request() -> None:
    team = AskFirstTeam([counting_agent("worker")], name="ask_first")
    items = [item async for item in team.create_session().run_stream("do it")]
    assert any(isinstance(i, RequestInfoEvent) and isinstance(i.data, Approval) for i in items)
    assert isinstance(items[-1], TaskResult)


class Reader(Executor):
    """A participant of its own that reads the team's channels without saying whose."""

    def __init__(self, agent: Agent) -> None:
        super().__init__(agent.name)
        self.agent = agent

    @handler(output=TurnDone)
    async def take_turn(self, turn: SpeakTurn, ctx: WorkflowContext[Any, Any]) -> None:
        channels_of(ctx)
        ctx.send_message(TurnDone(self.agent.name, [Message("assistant", "read")]))


class ReaderTeam(Team):
    def _build_workflow(self) -> Workflow:
        manager = AskFirst(self.participant_names)
        readers = [Reader(a) for a in self.participants]
        return self._star_workflow(manager, participants=readers, max_supersteps=20)


async def test_a_custom_participant_reading_channels_elsewhere_is_told_what_it_needs() -> None:
    team = ReaderTeam([counting_agent("worker")], name="readers")

    async def answered(runtime: LocalRuntime | None) -> TaskResult:
        session = team.create_session(runtime=runtime)
        await session.run("do it")
        (request,) = session.pending_requests
        return await session.send_responses({request.request_id: "yes"})

    assert (await answered(None)).messages[-1].text == "read"  # in process it has them
    async with LocalRuntime(serialize_messages=True) as copying:
        with pytest.raises(WorkflowError) as failed:
            await answered(copying)
    assert isinstance(failed.value.__cause__, ConfigurationError)
    assert "channels_of(ctx, executor)" in str(failed.value.__cause__)
