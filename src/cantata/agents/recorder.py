"""The bookkeeping of one run: name the messages the loop produces, hand the intermediate
ones to the caller, and record each in the thread exactly once.

Messages reach the recorder twice: as the loop produces them (`on_message`) and in the
final response (`drain`). The thread is notified on first sight only, keyed by message id,
so a message is never stored twice and none is lost if the loop skips a notification.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..core import FunctionCallContent, FunctionResultContent, Message
from .agent import AGENT_ID_KEY, IntermediateCallback, notify
from .thread import AgentThread

if TYPE_CHECKING:
    from .agent import Agent

__all__ = ["Recorder", "is_intermediate"]


def is_intermediate(message: Message) -> bool:
    """True for tool traffic: a message carrying tool calls or tool results."""
    for c in message.contents:
        kind = type(c)
        if kind is FunctionCallContent or kind is FunctionResultContent:
            return True
    return False


class Recorder:
    """Per-run: stamps produced messages with the agent's name and id, notifies the thread
    once per message id, in order, and the `on_intermediate` callback of tool traffic."""

    __slots__ = ("_agent_id", "_callback", "_name", "_seen", "_thread")

    def __init__(
        self, thread: AgentThread, agent: Agent, callback: IntermediateCallback | None
    ) -> None:
        self._thread = thread
        self._name = agent.name
        self._agent_id = agent.id
        self._callback = callback
        self._seen: dict[str, Message] = {}

    def _stamp(self, message: Message) -> None:
        if message.author_name is None:
            message.author_name = self._name
        message.metadata.setdefault(AGENT_ID_KEY, self._agent_id)

    async def on_message(self, message: Message) -> None:
        """Called by the loop with each message as it is produced."""
        if message.message_id in self._seen:
            return
        self._stamp(message)
        self._seen[message.message_id] = message
        if self._callback is not None and is_intermediate(message):
            await notify(self._callback, message)
        await self._thread.on_new_message([message])

    async def drain(self, messages: Sequence[Message]) -> list[Message]:
        """Record the messages of the final response not seen yet; returns the run's
        messages (the recorded objects, in the response's order)."""
        produced: list[Message] = []
        fresh: list[Message] = []
        seen = self._seen
        for message in messages:
            known = seen.get(message.message_id)
            if known is not None:
                produced.append(known)
                continue
            self._stamp(message)
            seen[message.message_id] = message
            produced.append(message)
            fresh.append(message)
            if self._callback is not None and is_intermediate(message):
                await notify(self._callback, message)
        if fresh:
            await self._thread.on_new_message(fresh)
        return produced
