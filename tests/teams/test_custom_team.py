"""A team type of its own on the base: a manager that asks a person before the first turn
(a workflow request), answered through the session; the base does the rest."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from cantata.core import Message, UsageError, register
from cantata.teams import (
    ManagerState,
    StopMessage,
    TaskResult,
    Team,
    TeamManager,
    TurnDone,
)
from cantata.workflows import RequestInfoEvent, Workflow, WorkflowContext, response_handler

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


async def test_a_manager_can_ask_for_input_and_the_session_answers_it() -> None:
    team = AskFirstTeam([counting_agent("worker")], name="ask_first")
    session = team.create_session()
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
