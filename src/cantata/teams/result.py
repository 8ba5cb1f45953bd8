"""What a team run ends with: the stop message (why it stopped) and the `TaskResult`.

Both are registered with the JSON type registry: a team's result is a workflow output, so
it is written to checkpoints and must come back from them in a fresh process.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..core import Message, register

if TYPE_CHECKING:
    from .events import RoutingEvent

__all__ = ["StopMessage", "TaskResult"]


@register(name="cantata.teams.StopMessage")
@dataclass(slots=True)
class StopMessage:
    """Why a run stopped: `content` says it in words, `source` names what stopped it (a
    termination condition's name, ``"max_turns"``, or ``"cancelled"``)."""

    content: str
    source: str


@register(name="cantata.teams.TaskResult")
@dataclass(slots=True)
class TaskResult:
    """The outcome of one team run.

    `messages` is the visible transcript of this run, the task first: tool calls and
    results are left out unless one ended a turn (the whole history stays in the run).
    `stop_reason` is the stop message's text, `stop_message` the whole of it. `routing`
    holds the run's routing decisions (who was given the turn, among whom, why) when the
    run was asked for them (``run(task, include_routing=True)``); it is empty otherwise.
    """

    messages: list[Message] = field(default_factory=list)
    stop_message: StopMessage | None = None
    routing: list[RoutingEvent] = field(default_factory=list)

    @property
    def stop_reason(self) -> str | None:
        """Why the run stopped, in words (None if it never stopped on its own)."""
        return None if self.stop_message is None else self.stop_message.content
