"""`ReplicatedChannels`: a conversation's channels on a runtime that copies messages.

There the participants run in other processes, where no broadcast reaches. Each process
keeps the channels it serves by session key (`channels_for`; the session's own process
has the session's, `register_channels`), and a channel catches up from the run's shared
history log when it is read: whatever it has not seen, minus the messages it wrote
itself, after the latest reduction (kept in the run's shared log `REDUCED_LOG`).
"""

from __future__ import annotations

import asyncio
import weakref
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..agents import Agent
from ..core import Message, register
from .channels import AgentChannel, ChannelFactory, ChannelSyncError, TeamChannels, _late
from .turns import HISTORY_LOG

if TYPE_CHECKING:
    from ..workflows import WorkflowContext

__all__ = [
    "REDUCED_LOG",
    "Reduction",
    "ReplicatedChannels",
    "channels_for",
    "register_channels",
]


@register(name="cantata.teams.Reduction")
@dataclass(slots=True)
class Reduction:
    """A history reduction, as data in the run's shared log `REDUCED_LOG`: the history
    had `at` entries when it was reduced to `messages` (what the channels then mirror)."""

    at: int
    messages: list[Message] = field(default_factory=list)


REDUCED_LOG = "team.reduced"
"""The run's shared log of history reductions (channels in other processes reset from it)."""


class _Replica:
    __slots__ = ("broken", "channel", "own", "reductions", "seen")

    def __init__(self, channel: AgentChannel) -> None:
        self.channel = channel
        self.seen = 0
        """How many history entries the channel has taken (or skipped as its own)."""
        self.own: set[str] = set()
        """Ids of messages written on this channel, not yet passed in the history."""
        self.reductions = 0
        """How many history reductions the channel has applied."""
        self.broken = False
        """A reset began and its delivery failed: the next catch-up starts over."""


class ReplicatedChannels(TeamChannels[_Replica]):
    """The channels one process serves for one conversation, caught up from its logs."""

    keeps_writes = True

    def __init__(
        self, factories: Mapping[str, ChannelFactory], *, sync_timeout: float = 60.0
    ) -> None:
        super().__init__(factories, sync_timeout=sync_timeout)

    async def read(self, key: str, agent: Agent, ctx: WorkflowContext[Any, Any]) -> AgentChannel:
        history = ctx.log(HISTORY_LOG, shared=True).entries
        return await self.catch_up(key, agent, history, ctx.log(REDUCED_LOG, shared=True).entries)

    def wrote(self, key: str, messages: Sequence[Message]) -> None:
        """Messages written on channel `key` (an agent's reply): it skips them when it
        catches up, since it has them already."""
        entry = self._entries.get(key)
        if entry is not None:
            entry.own.update(m.message_id for m in messages)

    async def apply_reduction(
        self, reduced: Sequence[Message], ctx: WorkflowContext[Any, Any]
    ) -> None:
        """Written to `REDUCED_LOG`, from which each channel resets when it is next read."""
        at = len(ctx.log(HISTORY_LOG, shared=True))
        ctx.log(REDUCED_LOG, shared=True).append(Reduction(at, list(reduced)))

    async def catch_up(
        self,
        key: str,
        agent: Agent,
        history: Sequence[Message],
        reductions: Sequence[Reduction] = (),
    ) -> AgentChannel:
        """The channel `key`, given what it has not seen of `history` (the run's shared
        log), minus what was written on it, after the latest of `reductions`; made first
        if needed. A delivery that fails raises `ChannelSyncError`, and the next catch-up
        delivers the same messages again."""
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = _Replica(self._make(key, agent))
        channel = entry.channel
        reset, start, batch = self._plan(entry, history, reductions)
        own = entry.own
        passed: list[str] = []  # its own messages, passed in the history
        for m in history[start:]:
            if m.message_id in own:
                passed.append(m.message_id)
                continue
            kept = channel.admit(m)
            if kept is not None:
                batch.append((m.author_name or m.role, kept))
        try:
            async with asyncio.timeout(self.sync_timeout):
                if reset:
                    await channel.reset()
                if batch:
                    await channel.receive(batch)
        except TimeoutError as exc:
            raise _late(key, agent, self.sync_timeout) from exc
        except Exception as exc:
            raise ChannelSyncError(
                f"channel {key!r} failed to receive {len(batch)} message(s) before "
                f"participant {agent.name!r} could read it: {exc}; they are delivered again "
                "at the next sync"
            ) from exc
        own.difference_update(passed)  # only now: a failed delivery is done again in full
        entry.seen = len(history)
        entry.reductions = len(reductions)
        entry.broken = False
        return channel

    @staticmethod
    def _plan(
        entry: _Replica, history: Sequence[Message], reductions: Sequence[Reduction]
    ) -> tuple[bool, int, list[tuple[str, Message]]]:
        """Whether the channel starts over, from which history entry, and what it takes
        before that (the latest reduction's messages, when it has not applied it)."""
        own = entry.own
        unseen = history[entry.seen :] if entry.seen <= len(history) else None
        # a reply written here that never reached the history (its turn was cancelled, and
        # the cancellation came late): the channel holds what the team never said
        orphaned = bool(own) and (unseen is None or not own <= {m.message_id for m in unseen})
        if len(reductions) > entry.reductions:
            latest = reductions[-1]
            admit = entry.channel.admit
            batch = [
                (m.author_name or m.role, kept)
                for m in latest.messages
                if (kept := admit(m)) is not None
            ]
            start = min(latest.at, len(history))
        elif unseen is None or orphaned or entry.broken:  # start over from the whole history
            batch, start = [], 0
        else:
            return False, entry.seen, []
        own.clear()  # an empty channel takes its own messages too
        entry.broken = True
        return True, start, batch


_MADE_HERE = 64
"""How many channel sets of sessions in other processes one process keeps (the least
recently used beyond that are dropped: a later turn there rebuilds from the history log)."""

_sessions: weakref.WeakValueDictionary[str, ReplicatedChannels] = weakref.WeakValueDictionary()
"""Channel sets of sessions of this process, by session key (the session holds them)."""
_made: OrderedDict[str, ReplicatedChannels] = OrderedDict()
"""Channel sets this process made for sessions elsewhere, least recently used first."""


def register_channels(session: str, channels: ReplicatedChannels) -> None:
    """Make a session's own channel set the one its participants in this process use."""
    _sessions[session] = channels


def channels_for(
    session: str, factories: Mapping[str, ChannelFactory], sync_timeout: float
) -> ReplicatedChannels:
    """The channel set of `session` in this process: the session's own if it lives here,
    else one made here from `factories` and kept (bounded) for the session's next turns."""
    found = _sessions.get(session)
    if found is not None:
        return found
    found = _made.get(session)
    if found is None:
        found = _made[session] = ReplicatedChannels(factories, sync_timeout=sync_timeout)
        while len(_made) > _MADE_HERE:
            _made.popitem(last=False)
    else:
        _made.move_to_end(session)
    return found
