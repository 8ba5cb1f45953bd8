"""Runs a served agent (workflow, team) for one A2A message, on the thread of its context.

The A2A context id names a thread kept in the server's store (log ``a2a:ctx:<id>``), so a
conversation continues across messages, tasks and restarts of the server. Each message
is one task: submitted, working, then completed with the answer (as the final status
message and as an artifact) or failed with the error. For ``message/stream`` the
answer's text goes out in artifact chunks as the agent produces it.

Turns on one context run one at a time (a lock per context in this process), so two
messages sent at once do not interleave in the thread. Each run is bounded by the
server's request timeout, whatever the client does.
"""

from __future__ import annotations

import asyncio
import logging
import weakref

from a2a.helpers import new_task, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types.a2a_pb2 import TaskState

from ..agents import LocalThread, StateStoreMessageStore
from ..agents.remote_a2a import a2a_parts, cantata_messages
from ..core import CantataError, new_id
from ..stores import StateStore
from .served import Served

__all__ = ["CONTEXT_LOG_PREFIX", "ServedAgentExecutor", "context_thread"]

CONTEXT_LOG_PREFIX = "a2a:ctx:"
"""The store log of an A2A context's thread is this prefix and the context id."""

_STREAMING = frozenset({"SendStreamingMessage", "message/stream"})
_log = logging.getLogger("cantata.serve.a2a")


def context_thread(store: StateStore, context_id: str) -> LocalThread:
    """The thread of A2A context `context_id`, its messages in `store`."""
    return LocalThread(
        StateStoreMessageStore(store, context_id, prefix=CONTEXT_LOG_PREFIX), id=context_id
    )


class ServedAgentExecutor(AgentExecutor):
    """The a2a-sdk `AgentExecutor` for one served entry."""

    def __init__(self, served: Served, store: StateStore, *, timeout: float) -> None:
        self._served = served
        self._store = store
        self._timeout = timeout
        self._turns: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    def _turn(self, context_id: str) -> asyncio.Lock:
        lock = self._turns.get(context_id)
        if lock is None:
            lock = self._turns[context_id] = asyncio.Lock()
        return lock

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """One turn: the message in, the answer out as the task's final status."""
        task_id, context_id = context.task_id, context.context_id
        assert task_id and context_id and context.message is not None  # the SDK sets them
        if context.current_task is None:
            await event_queue.enqueue_event(
                new_task(task_id, context_id, TaskState.TASK_STATE_SUBMITTED, [], [context.message])
            )
        updater = TaskUpdater(event_queue, task_id, context_id)
        streaming = context.call_context.state.get("method") in _STREAMING
        lock = self._turn(context_id)
        async with lock:
            await updater.start_work()
            bound = asyncio.timeout(self._timeout)
            try:
                async with bound:
                    text = await self._run(context, updater, streaming)
            except Exception as exc:
                await updater.failed(
                    updater.new_agent_message([new_text_part(self._why(exc, bound))])
                )
                return
        await updater.complete(updater.new_agent_message([new_text_part(text)]))

    def _why(self, exc: Exception, bound: asyncio.Timeout) -> str:
        """What the failed task says: the time limit, a cantata error's own words, or the
        error's type and text (logged with its traceback)."""
        if isinstance(exc, TimeoutError) and bound.expired():
            return (
                f"the run of `{self._served.name}` took longer than the server's limit of "
                f"{self._timeout:g} s"
            )
        if isinstance(exc, CantataError):
            return str(exc)
        _log.error("A2A run of %s failed", self._served.name, exc_info=exc)
        return f"the run of `{self._served.name}` failed: {exc!r:.300}"

    async def _run(self, context: RequestContext, updater: TaskUpdater, streaming: bool) -> str:
        assert context.message is not None and context.context_id is not None
        incoming = cantata_messages(context.message)
        thread = context_thread(self._store, context.context_id)
        agent = self._served.agent
        artifact = new_id()
        if not streaming:
            response = await agent.run(incoming, thread=thread)
            parts = [p for m in response.messages for p in a2a_parts(m)] or [new_text_part("")]
            await updater.add_artifact(parts, artifact_id=artifact, name="answer", last_chunk=True)
            return response.text
        stream = agent.run_stream(incoming, thread=thread)
        first = True
        async for update in stream:
            piece = update.text
            if piece:
                await updater.add_artifact(
                    [new_text_part(piece)],
                    artifact_id=artifact,
                    name="answer",
                    append=not first,
                    last_chunk=False,
                )
                first = False
        return stream.response.text

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """The SDK has cancelled `execute` already; record the task as canceled."""
        assert context.task_id and context.context_id
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()
