"""`ChannelSet`: a conversation's channels in process, with the broadcast queue between them.

A new message is queued for every other channel and delivered in the background: the
writer does not wait. Reading a channel (to run an agent on it) waits until its queue is
empty; a delivery that failed is kept, and its error is raised there, at that sync point.
Delivery peeks at the head of the queue and pops it only once the channel took it, so a
failed batch is delivered again at the next sync and nothing is lost. A channel made late
receives the whole history first. Reducing the history resets every channel and delivers
the reduced history.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..agents import Agent
from ..core import Message
from .channels import (
    AgentChannel,
    ChannelFactory,
    ChannelSyncError,
    TeamChannels,
    _late,
    sourced,
)
from .turns import HISTORY_LOG

if TYPE_CHECKING:
    from ..workflows import WorkflowContext

__all__ = ["ChannelSet"]


class _Entry:
    __slots__ = ("channel", "failure", "queue", "task")

    def __init__(self, channel: AgentChannel) -> None:
        self.channel = channel
        self.queue: deque[list[tuple[str, Message]]] = deque()
        self.task: asyncio.Task[None] | None = None
        self.failure: BaseException | None = None


class ChannelSet(TeamChannels[_Entry]):
    """The channels of one conversation (one team run) and the queue between them.

    Made per session, never shared by two conversations. `sync_timeout` bounds how long
    reading a channel waits for its deliveries.
    """

    def __init__(
        self,
        factories: Mapping[str, ChannelFactory],
        *,
        sync_timeout: float = 60.0,
    ) -> None:
        super().__init__(factories, sync_timeout=sync_timeout)

    def publish(self, messages: Sequence[Message], *, exclude: str = "") -> None:
        entries = self._entries
        if len(entries) > 1 or (entries and exclude not in entries):  # another channel
            self.broadcast(sourced(messages), exclude=exclude)

    def broadcast(self, messages: Sequence[tuple[str, Message]], *, exclude: str = "") -> None:
        """Queue messages for every channel but `exclude`, and return at once."""
        for key, entry in self._entries.items():
            if key == exclude:
                continue
            admitted = [
                (source, kept)
                for source, m in messages
                if (kept := entry.channel.admit(m)) is not None
            ]
            if not admitted:
                continue
            idle = not entry.queue and entry.failure is None
            if not (idle and entry.channel.receive_nowait(admitted)):
                entry.queue.append(admitted)
                self._start(entry)

    def _start(self, entry: _Entry) -> None:
        if entry.failure is None and (entry.task is None or entry.task.done()):
            entry.task = asyncio.ensure_future(self._deliver(entry))

    async def _deliver(self, entry: _Entry) -> None:
        while entry.queue:
            batch = entry.queue[0]  # peek: popped only once delivered
            try:
                await entry.channel.receive(batch)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                entry.failure = exc
                return
            entry.queue.popleft()

    def ready(self, key: str) -> AgentChannel | None:
        """The channel `key` if reading it needs no wait: made, nothing queued or under
        way, no failure kept (else None: `sync` it)."""
        entry = self._entries.get(key)
        if (
            entry is None
            or entry.queue
            or entry.failure is not None
            or (entry.task is not None and not entry.task.done())
        ):
            return None
        return entry.channel

    async def read(self, key: str, agent: Agent, ctx: WorkflowContext[Any, Any]) -> AgentChannel:
        def history() -> list[tuple[str, Message]]:
            return sourced(ctx.log(HISTORY_LOG, shared=True).entries)

        return await self.sync(key, agent, history)

    async def sync(
        self,
        key: str,
        agent: Agent,
        history: Callable[[], Sequence[tuple[str, Message]]],
    ) -> AgentChannel:
        """The channel `key`, caught up with the history; raises a kept delivery failure.

        A channel made now first receives the whole `history()`."""
        entry = self._entries.get(key)
        if entry is None:
            entry = _Entry(self._make(key, agent))
            self._entries[key] = entry
            everything = [
                (source, kept)
                for source, m in history()
                if (kept := entry.channel.admit(m)) is not None
            ]
            if everything:
                entry.queue.append(everything)
        if entry.failure is not None:
            failure, entry.failure = entry.failure, None
            raise ChannelSyncError(
                f"channel {key!r} failed to receive {sum(len(b) for b in entry.queue)} "
                f"message(s) before participant {agent.name!r} could read it: {failure}; they "
                "are kept and delivered again at the next sync"
            ) from failure
        if entry.queue:
            self._start(entry)
        if entry.task is not None and not entry.task.done():
            try:
                await asyncio.wait_for(asyncio.shield(entry.task), self.sync_timeout)
            except TimeoutError as exc:
                raise _late(key, agent, self.sync_timeout) from exc
        if entry.failure is not None:
            return await self.sync(key, agent, history)
        return entry.channel

    async def apply_reduction(
        self, reduced: Sequence[Message], ctx: WorkflowContext[Any, Any]
    ) -> None:
        await self.reset(sourced(reduced))

    async def reset(self, history: Sequence[tuple[str, Message]]) -> None:
        """The history was reduced to `history`: reset every channel and deliver it."""
        for entry in self._entries.values():
            await self._stop(entry)
            entry.queue.clear()
            entry.failure = None
            await entry.channel.reset()
        self.broadcast(history)

    async def _stop(self, entry: _Entry) -> None:
        task, entry.task = entry.task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def close(self) -> None:
        """Stop deliveries under way and forget every channel."""
        for entry in self._entries.values():
            await self._stop(entry)
        self._entries.clear()

    def state(self) -> dict[str, Any]:
        """For tests and diagnostics: per channel, queued batches and a kept failure."""
        return {
            k: {"queued": len(e.queue), "failed": e.failure is not None}
            for k, e in self._entries.items()
        }
