"""The messages a team's workflow passes: the task in, the turn token out to a participant,
the participant's turn back to the manager, and the manager's request for the next task;
and what a participant keeps while its turn waits for a person (`PausedTurn`).

All are registered with the JSON type registry: any of them may be in flight at a
checkpoint, or be the pending request (or the paused turn) a saved team waits on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core import Message, Usage, register

__all__ = ["HISTORY_LOG", "AwaitingTask", "PausedTurn", "SpeakTurn", "TeamTask", "TurnDone"]


def _authored(messages: Sequence[Message], name: str) -> list[Message]:
    """`messages`, each without an author shown as `name`'s (the transcript names who spoke)."""
    return [m if m.author_name else m.copy(author_name=name) for m in messages]


HISTORY_LOG = "team.history"
"""Name of the run's shared log holding the team's authoritative history."""


@register(name="cantata.teams.TeamTask")
@dataclass(slots=True)
class TeamTask:
    """A team run's input: the task's messages (empty to continue the previous run), and
    whether its `TaskResult` carries the run's routing decisions.

    A session's first run may also bring a conversation held elsewhere (a served team's
    thread): `context`, messages that join the history before the task without counting
    toward termination or showing in the run's transcript, and `carry`, the manager's
    state between runs as that conversation's last run left it (`TeamManager.carry`)."""

    messages: list[Message] = field(default_factory=list)
    include_routing: bool = False
    context: list[Message] = field(default_factory=list)
    carry: dict[str, Any] | None = None


@register(name="cantata.teams.AwaitingTask")
@dataclass(slots=True)
class AwaitingTask:
    """The request a stopped team waits on: the next run's task answers it."""

    correlation_id: str = ""


@register(name="cantata.teams.SpeakTurn")
@dataclass(slots=True)
class SpeakTurn:
    """The turn token: the participant that receives it speaks now, then hands it back."""

    correlation_id: str = ""
    turn: int = 0


@register(name="cantata.teams.TurnDone")
@dataclass(slots=True)
class TurnDone:
    """What a participant produced in its turn, handed back to the manager."""

    speaker: str
    messages: list[Message] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    channel: str = ""
    """The key of the channel the speaker ran on (that channel has the messages already)."""


@register(name="cantata.teams.PausedTurn")
@dataclass(slots=True)
class PausedTurn:
    """A participant's turn that waits for a person (an approval, the result of a tool
    declared without a function): kept as the participant's executor state, so a
    checkpoint taken while the team waits holds what the turn said so far."""

    correlation_id: str = ""
    turn: int = 0
    messages: list[Message] = field(default_factory=list)
    """What the participant said in this turn before it paused (its requests last)."""
    requests: list[str] = field(default_factory=list)
    """The ids of the workflow requests it waits on, in the order they were made."""
    answers: dict[str, Message] = field(default_factory=dict)
    """The answers that came, by request id (each a message holding the answer)."""
    usage: Usage = field(default_factory=Usage)
    start: int = 0
    """How long the history was when the turn began (a participant that builds its view
    from the history afresh builds the same one to go on)."""
    channel_state: dict[str, Any] | None = None
    """What the participant's channel needs to go on after a resume (a server-side
    thread's serialized data: the server holds the turn), from `AgentChannel.paused`."""

    @property
    def waiting(self) -> list[str]:
        """The requests not answered yet."""
        return [r for r in self.requests if r not in self.answers]
