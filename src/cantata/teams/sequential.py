"""`Sequential`: the participants answer one after another, each once per run.

``Sequential([writer, editor, translator])`` gives the task to the writer, the writer's
answer to the editor, and so on; the run stops after the last one with the reason
``"sequence complete"``. By default each participant sees the whole conversation so far
(Agent Framework's sequential orchestration and Semantic Kernel's agree on this); with
``chain_only_agent_responses=True`` each sees only the previous participant's reply (the
first one sees the task), as a pipeline of transformations would want.

It is a team like any other: the manager logs each hand-over as a `RoutingEvent`, a
termination condition may stop the chain early, and a second `run()` continues the
conversation with a new pass through the chain.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..agents import Agent, Guardrail
from ..core import Message
from ..workflows import Workflow, WorkflowContext
from ._fresh_turn import FreshTurnParticipant
from .manager import ManagerState, TeamManager, visible
from .result import StopMessage
from .team import Team
from .termination import TerminationCondition
from .turns import TurnDone

__all__ = ["Sequential", "SequentialManager", "last_turn"]

SEQUENCE_COMPLETE = "sequence complete"


def last_turn(history: list[Message]) -> list[Message]:
    """The visible messages of the last turn: the trailing run of messages by one author
    (the previous participant's reply, or the task)."""
    if not history:
        return []
    author = history[-1].author_name
    start = len(history)
    while start > 0 and history[start - 1].author_name == author:
        start -= 1
    return visible(history[start:])


class SequentialManager(TeamManager):
    """Gives the turn to each participant in order, then stops."""

    async def on_start(self, state: ManagerState, ctx: WorkflowContext[Any, Any]) -> None:
        first = self.participants[0]
        self.speak(state, first, ctx, reason="first in the sequence", candidates=[first])

    async def on_turn(
        self, state: ManagerState, done: TurnDone, ctx: WorkflowContext[Any, Any]
    ) -> None:
        at = self.participants.index(done.speaker)
        if at + 1 == len(self.participants):
            stop = StopMessage(
                f"{SEQUENCE_COMPLETE}: all {len(self.participants)} participants answered",
                "sequence",
            )
            self.stop(state, stop, ctx)
            return
        after = self.participants[at + 1]
        self.speak(
            state,
            after,
            ctx,
            reason=f"next after {done.speaker} in the sequence",
            candidates=[after],
        )


class Sequential(Team):
    """Participants answer in order, each once per run (see the module docstring)."""

    def __init__(
        self,
        participants: Sequence[Agent],
        *,
        chain_only_agent_responses: bool = False,
        termination: TerminationCondition | None = None,
        name: str = "sequential",
        description: str = "",
        guardrails: Iterable[Guardrail] = (),
    ) -> None:
        super().__init__(participants, name=name, description=description, guardrails=guardrails)
        self.chain_only_agent_responses = chain_only_agent_responses
        self.termination = termination
        _ = self.workflow  # build now: a bad definition fails here, not at the first run

    def _build_workflow(self) -> Workflow:
        manager = SequentialManager(self.participant_names, termination=self.termination)
        steps = 2 * len(self.participants) + 8
        if not self.chain_only_agent_responses:  # the shared history, through the channels
            return self._star_workflow(manager, max_supersteps=steps)
        executors = [FreshTurnParticipant(a, select=last_turn) for a in self.participants]
        return self._star_workflow(manager, participants=executors, max_supersteps=steps)
