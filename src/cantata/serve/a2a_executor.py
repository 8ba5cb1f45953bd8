"""Runs a served agent (workflow, team) for one A2A message, on the thread of its context.

The A2A context id names a thread kept in the server's store (log ``a2a:ctx:<id>``), so a
conversation continues across messages, tasks and restarts of the server. Each message
is one task: submitted, working, then completed with the answer (as the final status
message and as an artifact) or failed with the error. For ``message/stream`` the
answer's text goes out in artifact chunks as the agent produces it.

A run that stops for a person (a tool needing approval, a workflow's request) leaves the
task ``input-required`` with the requests in its status message, and so does a team that
asks the user (a handoff's agent answered: its answer is the question, and the next
message on the task, any text, is the user's next turn); the next message on the
task answers them and the run goes on (see `human_input`). Each listed request carries its
arguments twice: ``arguments`` (an object, whose numbers a data part carries as doubles,
so ``3`` reads ``3.0``) and ``arguments_json``, the same as exact JSON text (integers stay
integers, of any size). An agent's approvals wait in the
thread, and a team's or workflow's waiting run in its checkpoint, both in the store, so any
server process over that store answers them, after a restart too. Two answers to one
waiting task, sent at once to two processes, never both go on: the first takes a claim in
the store (put-if-absent) before it writes the task, the other is refused and leaves the
task as it is; a claim whose process died is taken over after the run's time limit.

A run still going when the server's grace period at shutdown runs out is stopped and its
task failed with a message saying so (`Drain`).

Turns on one context run one at a time (a lock per context in this process), so two
messages sent at once do not interleave in the thread. Each run is bounded by the
server's request timeout, whatever the client does.
"""

from __future__ import annotations

import asyncio
import json
import logging
import weakref
from collections.abc import Awaitable
from typing import Any

from a2a.helpers import get_data_parts, get_text_parts, new_data_part, new_task, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types.a2a_pb2 import Message as A2AMessage
from a2a.types.a2a_pb2 import Part, TaskState
from a2a.utils.errors import InvalidRequestError

from ..agents import AgentResponse, Citation, LocalThread, StateStoreMessageStore
from ..agents.remote_a2a import a2a_parts, cantata_messages
from ..core import AlreadyAnsweredError, CantataError, DataContent, Message, TextContent, new_id
from ..stores import StateStore, take_claim
from ..teams import waits_for_user
from .drain import Drain
from .errors import RequestError
from .human_input import (
    INPUT_KEY,
    MAX_WAITING,
    InputRequest,
    WaitingThreads,
    answer_messages,
    input_requests,
    needs_held_run,
    read_answers,
    request_parts,
)
from .openai_messages import answer_text
from .owned_store import owned_key
from .served import Served

__all__ = [
    "CITATIONS_KEY",
    "CONTEXT_LOG_PREFIX",
    "MAX_WAITING",
    "ServedAgentExecutor",
    "context_thread",
]

CONTEXT_LOG_PREFIX = "a2a:ctx:"
"""The store log of an A2A context's thread is this prefix and the context id."""

_CLAIM_PREFIX = "a2a:answering:"
_CLAIM_SLACK = 60.0
_ANSWERED = "the task was answered by another request; get the task for where it stands"
_STREAMING = frozenset({"SendStreamingMessage", "message/stream"})
_log = logging.getLogger("cantata.serve.a2a")


def context_thread(store: StateStore, context_id: str) -> LocalThread:
    """The thread of A2A context `context_id`, its messages in `store`."""
    return LocalThread(
        StateStoreMessageStore(store, context_id, prefix=CONTEXT_LOG_PREFIX), id=context_id
    )


def _carried(message: Message) -> list[Part]:
    """The A2A parts of what an answer says (text, data); requests go in the status."""
    said = [c for c in message.contents if type(c) in (TextContent, DataContent)]
    return a2a_parts(Message(message.role, said)) if said else []


def _status_parts(requests: list[InputRequest], said: str, why: str = "") -> list[Part]:
    """`request_parts`, each listed request with ``arguments_json`` too: a data part is a
    protobuf Struct, whose numbers are doubles, so clients read ``3`` as ``3.0`` (and lose
    digits past 2**53); the text keeps the exact JSON."""
    text, _ = request_parts(requests, said, why)
    listed = []
    for request in requests:
        item = request.to_json()
        item["arguments_json"] = json.dumps(item["arguments"], ensure_ascii=False, default=str)
        listed.append(item)
    return [text, new_data_part({INPUT_KEY: listed})]


CITATIONS_KEY = "cantata_citations"
"""Key of the data part of a completed task's message that lists the answer's citations."""


def _citation(c: Citation) -> dict[str, Any]:
    """A citation as A2A data; offsets as text, since a data part's numbers are doubles."""
    return {
        "document": c.document,
        "chunk": c.chunk,
        "heading": c.heading,
        "start": str(c.start),
        "end": str(c.end),
        "page": str(c.page) if c.page is not None else "",
        "text": c.text,
    }


class _Refused(Exception):
    """An answer the run itself refused (a workflow's type check): the task waits again."""

    def __init__(self, requests: list[InputRequest], why: str) -> None:
        super().__init__(why)
        self.requests = requests


class ServedAgentExecutor(AgentExecutor):
    """The a2a-sdk `AgentExecutor` for one served entry."""

    def __init__(
        self,
        served: Served,
        store: StateStore,
        *,
        timeout: float,
        drain: Drain | None = None,
        waiting: WaitingThreads | None = None,
    ) -> None:
        self._served = served
        self._store = store
        self._timeout = timeout
        self._drain = drain or Drain()
        self._turns: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
        # a workflow agent keeps its waiting run with the thread object, so the object of a
        # context whose run waits is kept until the answer comes
        self._waiting = waiting or WaitingThreads()
        # answers whose claim the request handler took, for `execute` to take over
        self._claimed: set[str] = set()

    def _turn(self, context_id: str) -> asyncio.Lock:
        key = owned_key(context_id)  # one identity's context never waits on another's
        lock = self._turns.get(key)
        if lock is None:
            lock = self._turns[key] = asyncio.Lock()
        return lock

    def _thread(self, context_id: str) -> LocalThread:
        return self._waiting.take(context_id) or context_thread(self._store, context_id)

    async def waiting(self, context_id: str) -> list[InputRequest]:
        """The requests the run on `context_id` waits for (read from its thread)."""
        return input_requests(await context_thread(self._store, context_id).get_messages())

    async def check_answers(
        self, context_id: str, message: A2AMessage
    ) -> tuple[list[InputRequest], dict[str, Any]]:
        """What `context_id` waits for and `message`'s answers to it, or a `RequestError`
        saying why they do not fit (the handler asks before the task runs)."""
        messages = await context_thread(self._store, context_id).get_messages()
        requests = input_requests(messages)
        if not requests and waits_for_user(messages):
            return [], {}  # a team asked the user: any message is the next turn
        texts = "\n".join(get_text_parts(message.parts))
        return requests, read_answers(requests, texts, get_data_parts(message.parts))

    async def answers(self, context_id: str, message: A2AMessage) -> list[Message]:
        """The messages answering what `context_id` waits for, or a `RequestError`."""
        requests, answers = await self.check_answers(context_id, message)
        if not requests:
            return cantata_messages(message)
        if needs_held_run(requests) and context_id not in self._waiting:
            raise CantataError(
                f"the run of `{self._served.name}` that asked on context {context_id!r} is no "
                "longer held by this server (it restarted, or more runs waited than it keeps); "
                "send a new message to start again"
            )
        return answer_messages(requests, answers)

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """One turn: the message in, the answer out as the task's final status (or, when
        the run waits for a person, the task waits for the next message)."""
        task_id, context_id = context.task_id, context.context_id
        assert task_id and context_id and context.message is not None  # the SDK sets them
        task = context.current_task
        if task is None:
            await event_queue.enqueue_event(
                new_task(task_id, context_id, TaskState.TASK_STATE_SUBMITTED, [], [context.message])
            )
        answering = task is not None and task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        updater = TaskUpdater(event_queue, task_id, context_id)
        streaming = context.call_context.state.get("method") in _STREAMING
        async with self._turn(context_id):
            if not answering:
                await self._execute(context.message, context_id, updater, streaming, False)
                return
            # one answer per wait across every server process on the store: the claim is
            # taken before the task is written (by the request handler, which refuses the
            # other answer before the SDK takes it), so the other answer leaves the task as is
            if task_id in self._claimed:
                self._claimed.discard(task_id)
            elif not await self._claim(task_id):
                raise InvalidRequestError(message=f"task {task_id}: {_ANSWERED}")
            try:
                await self._execute(context.message, context_id, updater, streaming, True)
            finally:
                await self._store.delete(_CLAIM_PREFIX + task_id)

    async def _execute(
        self,
        message: A2AMessage,
        context_id: str,
        updater: TaskUpdater,
        streaming: bool,
        answering: bool,
    ) -> None:
        incoming = cantata_messages(message)
        if answering:
            try:
                incoming = await self._answers(context_id, message)
            except _Refused as exc:
                if not exc.requests:  # answered meanwhile by another message
                    raise InvalidRequestError(
                        message=f"task {updater.task_id}: {_ANSWERED}"
                    ) from None
                parts = _status_parts(exc.requests, "", f"refused: {exc}")
                await updater.requires_input(updater.new_agent_message(parts))
                return
            except CantataError as exc:
                await updater.failed(updater.new_agent_message([new_text_part(str(exc))]))
                return
        await updater.start_work()
        bound = asyncio.timeout(self._timeout)
        try:
            async with bound, self._drain.stoppable():
                thread = self._thread(context_id)
                response = await self._run(incoming, thread, updater, streaming, answering)
        except AlreadyAnsweredError as exc:
            # another process took the answer and runs the task: leave it to that one
            raise InvalidRequestError(message=f"task {updater.task_id}: {exc}") from None
        except _Refused as exc:
            parts = _status_parts(exc.requests, "", f"refused: {exc}")
            await updater.requires_input(updater.new_agent_message(parts))
            return
        except Exception as exc:
            await updater.failed(updater.new_agent_message([new_text_part(self._why(exc, bound))]))
            return
        requests = input_requests(response.messages)
        if requests:
            self._waiting.hold(context_id, thread)
            parts = _status_parts(requests, answer_text(response))
            await updater.requires_input(updater.new_agent_message(parts))
            return
        text = answer_text(response)
        if waits_for_user(response.messages):  # a team asks the user: the task stays open
            await updater.requires_input(updater.new_agent_message([new_text_part(text)]))
            return
        parts = [new_text_part(text)]
        if response.citations:  # where the answer read it: a data part beside the text
            parts.append(new_data_part({CITATIONS_KEY: [_citation(c) for c in response.citations]}))
        await updater.complete(updater.new_agent_message(parts))

    async def claim_answer(self, task_id: str) -> None:
        """Take the answer to waiting task `task_id` for this request before the SDK runs
        it, or raise `InvalidRequestError` if another request holds it. The SDK turns an
        error raised inside `execute` into a FAILED write on the task (over the other
        answer's run) and, at times, answers the request with the stored task instead of
        the error; refused here, the SDK never sees the losing answer."""
        if not await self._claim(task_id):
            raise InvalidRequestError(message=f"task {task_id}: {_ANSWERED}")
        self._claimed.add(task_id)

    async def release_answer(self, task_id: str) -> None:
        """Give back a claim `execute` did not take over (the SDK refused the message)."""
        if task_id in self._claimed:
            self._claimed.discard(task_id)
            await self._store.delete(_CLAIM_PREFIX + task_id)

    async def _claim(self, task_id: str) -> bool:
        """Take the answer to waiting task `task_id` for this request, atomically across
        processes (the store's put-if-absent, `take_claim`). A claim outlives its run only
        when the process holding it died; past its deadline one other answer takes it over."""
        lease = self._timeout + _CLAIM_SLACK
        return await take_claim(self._store, _CLAIM_PREFIX + task_id, lease=lease)

    async def _answers(self, context_id: str, message: A2AMessage) -> list[Message]:
        """`answers`, a refused answer leaving the task waiting (the handler checks answers
        before the SDK runs the task, so this is the rare race of two answers at once)."""
        try:
            return await self.answers(context_id, message)
        except RequestError as exc:
            raise _Refused(await self.waiting(context_id), str(exc)) from exc

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

    async def _run(
        self,
        incoming: list[Message],
        thread: LocalThread,
        updater: TaskUpdater,
        streaming: bool,
        answering: bool,
    ) -> AgentResponse:
        agent = self._served.agent
        artifact = new_id()
        if not streaming:
            response = await self._refusable(agent.run(incoming, thread=thread), thread, answering)
            parts = [p for m in response.messages for p in _carried(m)] or [new_text_part("")]
            await updater.add_artifact(parts, artifact_id=artifact, name="answer", last_chunk=True)
            return response
        stream = agent.run_stream(incoming, thread=thread)
        first = True
        last_message: str | None = None
        try:
            async for update in stream:
                piece = update.text
                if piece and update.role == "assistant":
                    if not first and update.message_id != last_message:
                        piece = "\n\n" + piece  # a new message, as Responses separates them
                    last_message = update.message_id
                    await updater.add_artifact(
                        [new_text_part(piece)],
                        artifact_id=artifact,
                        name="answer",
                        append=not first,
                        last_chunk=False,
                    )
                    first = False
        except CantataError as exc:
            await self._refused(exc, thread, answering, started=not first)
            raise
        return stream.response

    async def _refusable(
        self, running: Awaitable[AgentResponse], thread: LocalThread, answering: bool
    ) -> AgentResponse:
        try:
            return await running
        except CantataError as exc:
            await self._refused(exc, thread, answering, started=False)
            raise

    async def _refused(
        self, exc: CantataError, thread: LocalThread, answering: bool, *, started: bool
    ) -> None:
        """An answer the run refused before doing anything: the thread still waits, so the
        task does too (raises `_Refused`); otherwise the failure stands."""
        if not answering or started or isinstance(exc, AlreadyAnsweredError):
            return
        requests = input_requests(await thread.get_messages())
        if requests:
            self._waiting.hold(thread.id or "", thread)
            raise _Refused(requests, str(exc)) from exc

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """The SDK has cancelled `execute` already; record the task as canceled."""
        assert context.task_id and context.context_id
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()
