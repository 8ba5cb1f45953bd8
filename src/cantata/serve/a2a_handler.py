"""The a2a-sdk request handler with the server's rules: ids it can keep, and a client that
goes away cancels its task.

The SDK runs each task in a background task of its own, so a client that disconnects
from ``message/send`` or ``message/stream`` would leave its run going; here the request
that started a task cancels it when the request is cancelled (the server cancels a
request whose client disconnected, or that ran past its time limit). A client that asked
for ``returnImmediately`` gets its task id at once, and the task runs on (bounded by the
executor's time limit) for ``tasks/get`` to find.

Context and task ids become names in the server's store, so they are checked: 1 to 128
letters, digits, ``-``, ``_``, ``.`` or ``:``. A message that answers a task waiting for
input is checked against what the task waits for before the SDK takes it, so a bad answer
is a JSON-RPC ``InvalidParams`` error and the task goes on waiting, untouched. A good
answer then claims the task in the server's store, so of two answers at once (on one
process or two) one runs and the other is refused here, before the SDK takes it.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncGenerator
from typing import Any

from a2a.server.agent_execution import RequestContext, SimpleRequestContextBuilder
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import DefaultRequestHandlerV2
from a2a.server.tasks import TaskStore
from a2a.types.a2a_pb2 import AgentCard, CancelTaskRequest, SendMessageRequest, TaskState
from a2a.types.a2a_pb2 import Message as A2AMessage
from a2a.utils.errors import A2AError, InvalidParamsError, InvalidRequestError

from .a2a_executor import ServedAgentExecutor
from .errors import RequestError

__all__ = ["CANCEL_TIMEOUT", "IDLE_RELEASE", "ServedRequestHandler"]

CANCEL_TIMEOUT = 10.0
"""Seconds a cancellation after a disconnect may take before it is given up."""
IDLE_RELEASE = 60.0
"""Seconds a task waiting for input keeps its in-memory machinery; it stays in the store,
and its answer starts the machinery again."""

_RUNNING = frozenset({TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING})
_ID = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
_log = logging.getLogger("cantata.serve.a2a")


def _cancelling() -> bool:
    """Whether the request's task is being cancelled (the SDK's waits swallow it)."""
    request = asyncio.current_task()
    return request is not None and request.cancelling() > 0


class _CheckedIds(SimpleRequestContextBuilder):
    async def build(
        self,
        context: ServerCallContext,
        params: SendMessageRequest | None = None,
        task_id: str | None = None,
        context_id: str | None = None,
        task: Any = None,
    ) -> RequestContext:
        for label, value in (("contextId", context_id), ("taskId", task_id)):
            if value and not _ID.fullmatch(value):
                raise InvalidParamsError(
                    message=f"{label} {value[:60]!r} is not valid here: use 1 to 128 letters, "
                    "digits, '-', '_', '.' or ':' (or leave it out for a new one)"
                )
        result: RequestContext = await super().build(context, params, task_id, context_id, task)
        return result


class ServedRequestHandler(DefaultRequestHandlerV2):
    """`DefaultRequestHandlerV2` whose runs end with the request that started them."""

    def __init__(self, executor: ServedAgentExecutor, tasks: TaskStore, card: AgentCard) -> None:
        super().__init__(
            agent_executor=executor,
            task_store=tasks,
            agent_card=card,
            request_context_builder=_CheckedIds(should_populate_referred_tasks=False),
            interrupted_task_timeout=IDLE_RELEASE,
        )
        self._executor = executor
        self._tasks = tasks
        self._cancelling: set[asyncio.Task[None]] = set()

    async def _check_answer(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> str | None:
        """Refuse a message that answers a waiting task badly, or that another request
        answers already, before the SDK takes it; the id of the task whose answer this
        request claimed, if it answers one."""
        task_id = params.message.task_id
        if not task_id or not _ID.fullmatch(task_id):
            return None  # a new task, or an id the context builder refuses
        task = await self._tasks.get(task_id, context)
        if task is not None and task.status.state in _RUNNING:
            # another request answered it (or gave it work) and its run goes on: the SDK
            # would start this message as a new run of the task
            raise InvalidRequestError(
                message=f"task {task_id} is running: it was answered by another request; get "
                "the task for where it stands"
            )
        if task is None or task.status.state != TaskState.TASK_STATE_INPUT_REQUIRED:
            return None  # the SDK says what is wrong with it, or runs it
        if params.message.context_id and params.message.context_id != task.context_id:
            return None  # the SDK refuses the mismatch
        await self._check_answers(task_id, task.context_id, params.message)
        await self._executor.claim_answer(task_id)
        try:
            # again under the claim: an answer that ran meanwhile left nothing waiting
            await self._check_answers(task_id, task.context_id, params.message)
        except BaseException:
            await self._executor.release_answer(task_id)
            raise
        return task_id

    async def _check_answers(self, task_id: str, context_id: str, message: A2AMessage) -> None:
        try:
            await self._executor.check_answers(context_id, message)
        except RequestError as exc:
            raise InvalidParamsError(message=f"task {task_id} waits for input: {exc}") from None

    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Any:
        claimed = await self._check_answer(params, context)
        try:
            result = await super().on_message_send(params, context)
        except asyncio.CancelledError:
            self._cancel_soon(params, context)
            raise
        finally:
            if claimed:
                await self._executor.release_answer(claimed)
        if _cancelling():  # the SDK's wait swallowed it and answered the task as it was
            self._cancel_soon(params, context)
            raise asyncio.CancelledError("the request was cancelled")
        return result

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Any, None]:
        claimed = await self._check_answer(params, context)
        finished = False
        try:
            async for event in super().on_message_send_stream(params, context):
                yield event
            finished = True
        finally:
            if not finished or _cancelling():
                self._cancel_soon(params, context)
            if claimed:
                await self._executor.release_answer(claimed)

    def _cancel_soon(self, params: SendMessageRequest, context: ServerCallContext) -> None:
        task_id = params.message.task_id  # set by the SDK once the task is made
        if not task_id:
            return
        cancelling = asyncio.get_running_loop().create_task(self._cancel(task_id, context))
        self._cancelling.add(cancelling)
        cancelling.add_done_callback(self._cancelling.discard)

    async def _cancel(self, task_id: str, context: ServerCallContext) -> None:
        try:
            async with asyncio.timeout(CANCEL_TIMEOUT):
                await self.on_cancel_task(CancelTaskRequest(id=task_id), context)
        except A2AError:
            pass  # it ended meanwhile: nothing to cancel
        except TimeoutError:
            _log.warning("A2A task %s did not cancel within %s s", task_id, CANCEL_TIMEOUT)

    async def aclose(self) -> None:
        """Finish the cancellations under way, then the SDK's own shutdown."""
        if self._cancelling:
            await asyncio.gather(*self._cancelling, return_exceptions=True)
        await super().aclose()
