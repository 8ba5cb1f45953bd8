"""`Concurrent`: every participant answers the task at once; an aggregator combines them.

``Concurrent([legal, finance, marketing])`` hands the task to all three in one superstep
(so they run concurrently, and none sees another's answer), waits for every answer, then
stops with the reason ``"all 3 participants answered"``. The default aggregator returns
them all: the run's messages are the task and each answer, in participant order. A custom
``aggregator(answers)`` (sync or async) gets the answers and returns the combined answer
(text, a message, or messages), which joins the transcript as the last word; it may call a
model, as Agent Framework's summarizing aggregators do.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from ..agents import Agent, Guardrail
from ..core import ConfigurationError, Message
from ..workflows import Workflow, WorkflowContext
from ._fresh_turn import FreshTurnParticipant
from .manager import ManagerState, TeamManager, visible
from .result import StopMessage
from .team import Team
from .termination import TerminationCondition
from .turns import TurnDone, _authored

__all__ = ["Aggregator", "Concurrent", "ConcurrentAnswer", "ConcurrentManager"]

_WAITING = "concurrent.waiting"
AGGREGATOR_NAME = "aggregator"


@dataclass(slots=True)
class ConcurrentAnswer:
    """One participant's answer to the task: its visible messages."""

    name: str
    messages: list[Message] = field(default_factory=list)

    @property
    def text(self) -> str:
        """The text of the answer's last message."""
        return self.messages[-1].text if self.messages else ""


AggregateResult: TypeAlias = str | Message | list[Message] | None
Aggregator: TypeAlias = Callable[
    [list[ConcurrentAnswer]], AggregateResult | Awaitable[AggregateResult]
]
"""Combines the answers; None adds nothing (the answers themselves are the result)."""


class ConcurrentManager(TeamManager):
    """Gives the turn to everyone at once, waits for every answer, then aggregates."""

    def __init__(
        self,
        participants: Sequence[str],
        *,
        aggregator: Aggregator | None,
        termination: TerminationCondition | None,
    ) -> None:
        super().__init__(participants, termination=termination)
        self.aggregator = aggregator

    async def on_start(self, state: ManagerState, ctx: WorkflowContext[Any, Any]) -> None:
        state.extra[_WAITING] = list(self.participants)
        for name in self.participants:
            self.speak(state, name, ctx, reason="fan-out: every participant answers the task")

    async def on_turn(
        self, state: ManagerState, done: TurnDone, ctx: WorkflowContext[Any, Any]
    ) -> None:
        waiting = [n for n in state.extra.get(_WAITING, []) if n != done.speaker]
        state.extra[_WAITING] = waiting
        ctx.set_executor_state(state)
        if waiting:
            return
        run = self.history(ctx)[state.run_start :]
        answers = [
            ConcurrentAnswer(name, visible([m for m in run if m.author_name == name]))
            for name in self.participants
        ]
        combined = await self._aggregate(answers)
        if combined:
            self.publish(state, combined, ctx, source=AGGREGATOR_NAME)
        count = len(self.participants)
        self.stop(state, StopMessage(f"all {count} participants answered", "concurrent"), ctx)

    async def _aggregate(self, answers: list[ConcurrentAnswer]) -> list[Message]:
        if self.aggregator is None:
            return []
        result = self.aggregator(answers)
        if inspect.isawaitable(result):
            result = await result
        if result is None:
            return []
        if isinstance(result, str):
            return [Message("assistant", result, author_name=AGGREGATOR_NAME)]
        if isinstance(result, Message):
            result = [result]
        if isinstance(result, list) and all(isinstance(m, Message) for m in result):
            return _authored(result, AGGREGATOR_NAME)
        name = getattr(self.aggregator, "__name__", repr(self.aggregator))
        raise ConfigurationError(
            f"aggregator {name!r} returned {type(result).__name__}; return text, a Message, "
            "a list of Messages, or None"
        )


class Concurrent(Team):
    """Everyone answers the task concurrently; see the module docstring."""

    def __init__(
        self,
        participants: Sequence[Agent],
        *,
        aggregator: Aggregator | None = None,
        termination: TerminationCondition | None = None,
        name: str = "concurrent",
        description: str = "",
        guardrails: Iterable[Guardrail] = (),
    ) -> None:
        super().__init__(participants, name=name, description=description, guardrails=guardrails)
        if aggregator is not None and not callable(aggregator):
            raise ConfigurationError(
                f"concurrent team {name!r}: aggregator must be a function of the answers, "
                f"got {aggregator!r}"
            )
        self.aggregator = aggregator
        self.termination = termination
        _ = self.workflow  # build now: a bad definition fails here, not at the first run

    def _build_workflow(self) -> Workflow:
        manager = ConcurrentManager(
            self.participant_names, aggregator=self.aggregator, termination=self.termination
        )
        # Fresh threads: siblings run in one superstep, and none may see another's answer.
        executors = [FreshTurnParticipant(a) for a in self.participants]
        return self._star_workflow(manager, participants=executors, max_supersteps=16)
