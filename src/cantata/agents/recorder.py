"""The bookkeeping of one run: name the messages the loop produces, hand the intermediate
ones to the caller, and record each in the thread exactly once.

Messages reach the recorder twice: as the loop produces them (`on_message`) and in the
final response (`drain`). The thread is notified on first sight only, keyed by message id,
so a message is never stored twice and none is lost if the loop skips a notification.

A message that asks for tool calls is held back until every call it makes is answered (by
a result, or by an approval request that the next run resumes), and then written together
with its answers in one append. If the run fails in between (a cancelled tool, a crashed
middleware), the thread never holds a call without its result: every chat API refuses a
request with such a dangling call, so one failed run would break every later one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING

from ..core import (
    FunctionApprovalRequestContent,
    FunctionCallContent,
    FunctionResultContent,
    Message,
)
from ..tools.invoking import RECORDED
from .agent import AGENT_ID_KEY, IntermediateCallback, notify
from .thread import AgentThread, append_now

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
    once per message id, in order, and the `on_intermediate` callback of tool traffic.

    `seen` may be shared by several recorders of one run (an agent middleware that calls
    ``call_next`` again, to retry): what one attempt recorded, the next does not repeat.
    """

    __slots__ = ("_agent_id", "_callback", "_held", "_name", "_open", "_seen", "_thread")

    def __init__(
        self,
        thread: AgentThread,
        agent: Agent,
        callback: IntermediateCallback | None,
        seen: dict[str, Message] | None = None,
    ) -> None:
        self._thread = thread
        self._name = agent.name
        self._agent_id = agent.id
        self._callback = callback
        self._seen: dict[str, Message] = {} if seen is None else seen
        self._held: list[Message] = []
        self._open: set[str] = set()

    def _stamp(self, message: Message) -> None:
        if message.author_name is None:
            message.author_name = self._name
        message.metadata.setdefault(AGENT_ID_KEY, self._agent_id)

    def _hold(self, message: Message) -> bool:
        """Add `message` to the held batch when calls are open or it opens some; returns
        True when the batch is complete (every call answered) and should be written now."""
        opened = False
        for c in message.contents:
            if isinstance(c, FunctionCallContent):
                self._open.add(c.call_id)
                opened = True
            elif isinstance(c, FunctionResultContent):
                self._open.discard(c.call_id)
            elif isinstance(c, FunctionApprovalRequestContent):
                self._open.discard(c.function_call.call_id)
        if not opened and not self._held:
            return False  # the common case: nothing pending, write the message alone
        self._held.append(message)
        return not self._open

    def on_message(self, message: Message) -> Awaitable[None]:
        """Called by the loop with each message as it is produced: `RECORDED` when it is
        recorded already (a thread in memory, the usual case: no coroutine), else what
        the loop awaits to record it."""
        seen = self._seen
        if message.message_id in seen:
            return RECORDED
        if message.author_name is None:  # `_stamp`, inline
            message.author_name = self._name
        message.metadata.setdefault(AGENT_ID_KEY, self._agent_id)
        seen[message.message_id] = message
        if self._callback is not None and is_intermediate(message):
            return self._notified(message)
        return self._write(message)

    async def _notified(self, message: Message) -> None:
        await notify(self._callback, message)
        await self._write(message)

    def _write(self, message: Message) -> Awaitable[None]:
        if self._hold(message):
            batch, self._held = self._held, []
        elif not self._held:
            batch = [message]
        else:
            return RECORDED  # held until its calls are answered
        if append_now(self._thread, batch):
            return RECORDED
        return self._thread.on_new_message(batch)

    async def drain(self, messages: Sequence[Message]) -> list[Message]:
        """Record the messages of the final response not seen yet, and whatever was held
        (the run ended, so calls still open are the caller's to answer); returns the run's
        messages (the recorded objects, in the response's order)."""
        produced: list[Message] = []
        fresh: list[Message] = self._held
        self._held = []
        self._open.clear()
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
        if fresh and not append_now(self._thread, fresh):
            await self._thread.on_new_message(fresh)
        return produced
