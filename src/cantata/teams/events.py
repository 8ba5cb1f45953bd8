"""Events a team adds to its workflow's event stream (and `run_stream` yields).

They are `WorkflowEvent`s, so a team's run streams through the same machinery as any
workflow; `TeamSession.run_stream` keeps these and the agents' chunks and drops the
engine's own bookkeeping (supersteps, executor invocations). They are made only in a
streamed run: `run()` returns the `TaskResult` alone, so nobody could read them there.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..core import Message, register
from ..workflows import WorkflowEvent
from .result import StopMessage

__all__ = ["RoutingEvent", "TeamEvent", "TeamMessageEvent", "TeamStoppedEvent"]


@dataclass(slots=True)
class TeamEvent(WorkflowEvent):
    """Base of the events a team emits."""


@register(name="cantata.teams.TeamMessageEvent")
@dataclass(slots=True)
class TeamMessageEvent(TeamEvent):
    """A message joined the visible transcript (the task, or a participant's reply)."""

    message: Message
    source: str
    """Who wrote it: a participant's name, or ``"user"`` for the task."""


@register(name="cantata.teams.RoutingEvent")
@dataclass(slots=True)
class RoutingEvent(TeamEvent):
    """A routing decision: who works next, among whom, why, and whether a fallback chose.

    `correlation_id` is the id of the team run the decision belongs to (the same on every
    decision and handoff of one run), so a log of many concurrent runs can be split.
    """

    correlation_id: str
    candidates: list[str]
    choice: str
    reason: str
    fallback_used: bool = False
    turn: int = 0
    attempts: list[str] = field(default_factory=list)
    """What a model answered before a valid choice (empty when the first answer was valid)."""


@register(name="cantata.teams.TeamStoppedEvent")
@dataclass(slots=True)
class TeamStoppedEvent(TeamEvent):
    """The run stopped: a termination condition fired, the turn limit was reached, ..."""

    stop_message: StopMessage
    correlation_id: str = ""
