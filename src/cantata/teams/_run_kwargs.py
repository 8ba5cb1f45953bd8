"""What a session hands its team's run, and how the executors read it.

The run's keyword arguments carry the session's channels (`CHANNELS_KEY`), the team's
name (`TEAM_KEY`, for spans) and chat options for every turn (`OPTIONS_KEY`). The session
chooses the channels' kind once, for the whole conversation, and hands the run
a keyword argument (`CHANNELS_KEY`): in process, the `TeamChannels` object itself (a
`ChannelSet`); on a runtime that copies messages, the session's key, a string (objects do
not travel), by which each process finds or makes its `ReplicatedChannels`. `channels_of` is
the one accessor, and the only place that tells the two apart.
"""

from __future__ import annotations

from typing import Any

from ..core import ConfigurationError, tracing
from ..models import ChatOptions
from ..workflows import WorkflowContext
from .channels import TeamChannels
from .replication import channels_for
from .turns import SpeakTurn

__all__ = [
    "CHANNELS_KEY",
    "OPTIONS_KEY",
    "TEAM_KEY",
    "channels_of",
    "team_name_of",
    "turn_options",
    "turn_span",
]

CHANNELS_KEY = "cantata.teams.channels"
"""The run keyword argument that carries the session's channels to the executors (in
process), or the session's key (a string: on a runtime that copies messages, where each
process finds the session's channels with `channels_for`)."""
TEAM_KEY = "cantata.teams.team"
"""The run keyword argument that carries the team's name (for its spans)."""
OPTIONS_KEY = "cantata.teams.options"
"""The run keyword argument that carries chat options for every participant's turns (a
served request's ``temperature``, say), laid over the agents' own."""


def channels_of(ctx: WorkflowContext[Any, Any], executor: Any = None) -> TeamChannels[Any]:
    """The session's channels: handed to the run as a keyword argument in process, or
    found by the session key in this process's registry (made from `executor`'s channel
    factories, which travel with the executor, on a runtime that copies messages)."""
    channels = ctx.kwargs.get(CHANNELS_KEY)
    if isinstance(channels, TeamChannels):
        return channels
    if isinstance(channels, str):
        factories = getattr(executor, "channel_factories", None)
        if factories is not None:
            return channels_for(channels, factories, executor.sync_timeout)
        raise ConfigurationError(
            f"executor {ctx.executor_id!r} of a team reads the team's channels on a runtime "
            "that copies messages, where they are made in each process from the team's "
            "channel factories: pass the executor to channels_of(ctx, executor), and give "
            "it channel_factories and sync_timeout as ParticipantExecutor has (a team sets "
            "them on every ParticipantExecutor of its workflow)"
        )
    raise ConfigurationError(
        f"executor {ctx.executor_id!r} of a team runs without its channels: run a team "
        "through team.run(), team.create_session() or team.resume(), not its workflow"
    )


def team_name_of(ctx: WorkflowContext[Any, Any]) -> str:
    """The name of the team whose run this is (a session hands it to the run)."""
    name = ctx.kwargs.get(TEAM_KEY)
    return name if isinstance(name, str) else "team"


def turn_options(ctx: WorkflowContext[Any, Any], own: ChatOptions | None) -> ChatOptions | None:
    """A participant's options for a turn: the session's (`OPTIONS_KEY`), with the
    participant's own in the team (a handoff's transfer tools) laid over them."""
    given = ctx.kwargs.get(OPTIONS_KEY)
    if not isinstance(given, ChatOptions):
        return own
    return given.merge(own)


def turn_span(ctx: WorkflowContext[Any, Any], turn: SpeakTurn, speaker: str) -> Any:
    """The ``team_turn {team}`` span around one participant's turn (its agent's span nests
    inside); a no-op context manager while tracing is off."""
    team = team_name_of(ctx)
    return tracing.span(
        f"team_turn {team}",
        {
            "cantata.team.name": team,
            "cantata.team.turn": turn.turn,
            "cantata.team.speaker": speaker,
            "cantata.correlation_id": turn.correlation_id,
        },
    )
