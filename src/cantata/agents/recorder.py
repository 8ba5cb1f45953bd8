"""The one writer of a run into its thread: record the input, name the messages the loop
produces, hand the intermediate ones to the caller, and record each exactly once.

Messages reach the recorder twice: as the loop produces them (`on_message`) and in the
final response (`drain`). The thread is notified on first sight only, keyed by message id,
so a message is never stored twice and none is lost if the loop skips a notification. One
recorder serves a whole run, so an agent middleware that calls ``call_next`` again (to
retry), or answers after a failed attempt, never records what an earlier attempt did.

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
    """Per run: records its input, stamps produced messages with the agent's name and id,
    notifies the thread once per message id, in order, and the `on_intermediate` callback
    of tool traffic.

    Every attempt of the run (each ``call_next`` of an agent middleware) starts with
    `record_input`, which names the thread the attempt writes to. On the same thread, what
    an earlier attempt recorded is not repeated; a middleware that moves the run to another
    thread starts the record afresh there.
    """

    __slots__ = ("_agent_id", "_callback", "_held", "_name", "_open", "_seen", "_thread")

    def __init__(self, agent: Agent, callback: IntermediateCallback | None) -> None:
        self._thread: AgentThread | None = None
        self._name = agent.name
        self._agent_id = agent.id
        self._callback = callback
        self._seen: dict[str, Message] = {}
        self._held: list[Message] = []
        self._open: set[str] = set()

    def record_input(self, thread: AgentThread, incoming: list[Message]) -> Awaitable[None]:
        """Start an attempt on `thread`: append the messages of `incoming` not recorded yet
        (creating the thread when it is new); `RECORDED` when that was done at once (a
        thread in memory), else what the caller awaits. A call still held from a failed
        attempt is dropped (its results never came)."""
        if thread is not self._thread:
            self._thread = thread
            self._seen.clear()
        self._held = []
        self._open.clear()
        seen = self._seen
        fresh = []
        for m in incoming:
            if m.message_id not in seen:
                seen[m.message_id] = m
                fresh.append(m)
        if fresh and append_now(thread, fresh):
            return RECORDED
        if fresh or thread.state == "new":  # nothing to add: the thread only has to exist
            return thread.on_new_message(fresh)
        return RECORDED

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
        thread = self._thread
        assert thread is not None, "record_input starts every attempt"
        if append_now(thread, batch):
            return RECORDED
        return thread.on_new_message(batch)

    async def drain(
        self, messages: Sequence[Message], *, intermediate: bool = True
    ) -> list[Message]:
        """Record the messages of the final response not seen yet, and whatever was held
        (the run ended, so calls still open are the caller's to answer); returns the run's
        messages (the recorded objects, in the response's order). `intermediate=False`:
        the `on_intermediate` callback is not told (a middleware's own answer)."""
        thread = self._thread
        assert thread is not None, "record_input starts every attempt"
        callback = self._callback if intermediate else None
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
            if callback is not None and is_intermediate(message):
                await notify(callback, message)
        if fresh and not append_now(thread, fresh):
            await thread.on_new_message(fresh)
        return produced
