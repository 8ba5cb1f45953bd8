"""`WorkflowAgent`: a workflow usable wherever an agent is (`workflow.as_agent()`).

The conversation goes in as the run's input (a list of messages when the start executor
takes one, else the last message's text); the run's outputs come back as assistant
messages. A streamed run yields the agents' chunks as they happen and each output as it is
yielded. A run that stops for input returns its requests as ``request_info`` function
calls; answer them with function results (call id = request id) in the next call on the
same thread. The waiting run is kept with the thread object; with a `checkpoint_store` the
message of calls also names the run's checkpoint (metadata `RUN_KEY`), so another thread
object holding the same messages (another process, or this one after a restart) restores
the run from there and answers it. The answer first claims that checkpoint in the store
(atomically, across processes): of two answers sent at once, one goes on and the other
raises `AlreadyAnsweredError`. A run that ends (done or failed) takes its checkpoints out of
the store; one that waits keeps them.
"""

from __future__ import annotations

import weakref
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Unpack

from ..agents import (
    Agent,
    AgentInput,
    AgentResponse,
    AgentResponseStream,
    AgentResponseUpdate,
    AgentThread,
    RunKeywords,
    chat_keywords,
)
from ..core import (
    ConfigurationError,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    WorkflowError,
    new_id,
    to_json,
)
from .checkpoint_store import StateStoreCheckpointStore
from .events import AgentUpdateEvent, OutputEvent, WorkflowEvent

if TYPE_CHECKING:
    from .checkpoint_store import CheckpointStore
    from .result import WorkflowRunResult
    from .run import WorkflowRun
    from .workflow import Workflow

__all__ = ["REQUEST_INFO", "RUN_KEY", "WorkflowAgent"]

RUN_KEY = "cantata_workflow_checkpoint"
"""Metadata key of the message of ``request_info`` calls: the waiting run's checkpoint."""

REQUEST_INFO = "request_info"
"""Name of the function call a `WorkflowAgent` returns for each pending request."""


def _as_messages(output: Any, name: str) -> list[Message]:
    if isinstance(output, AgentResponse):
        return list(output.messages)
    if isinstance(output, Message):
        return [output]
    if isinstance(output, list) and all(isinstance(m, Message) for m in output):
        return list(output)
    text = output if isinstance(output, str) else str(output)
    return [Message("assistant", text, author_name=name)]


class WorkflowAgent(Agent):
    """An agent whose every run is a run of a workflow."""

    def __init__(
        self,
        workflow: Workflow,
        *,
        name: str | None = None,
        description: str | None = None,
        checkpoint_store: CheckpointStore | None = None,
    ) -> None:
        safe = "".join(c if c.isalnum() or c in "_-" else "_" for c in workflow.name)[:64]
        super().__init__(name=name or safe or "workflow", description=description or "")
        self.workflow = workflow
        self.checkpoint_store = checkpoint_store
        # A run waiting for answers belongs to the conversation, so it is kept per thread
        # object, and goes away with it.
        self._waiting: weakref.WeakKeyDictionary[AgentThread, WorkflowRun] = (
            weakref.WeakKeyDictionary()
        )

    def _input(self, messages: list[Message]) -> Any:
        start = self.workflow.start_executor
        if start.can_handle(messages):
            return messages
        if messages and start.can_handle(messages[-1]):
            return messages[-1]
        text = messages[-1].text if messages else ""
        if start.can_handle(text):
            return text
        raise WorkflowError(
            f"workflow {self.workflow.name!r} used as an agent: its start executor "
            f"{start.id!r} takes none of list[Message], Message or str"
        )

    async def _begin(
        self, incoming: list[Message], thread: AgentThread
    ) -> tuple[WorkflowRun | None, Any, str | None]:
        """The waiting run, its answers taken, or the input of a new run; and the checkpoint
        the answer claimed in the store (of two answers sent at once, one goes on)."""
        answers = {
            c.call_id: c.result
            for m in incoming
            for c in m.contents
            if type(c) is FunctionResultContent
        }
        claimed = await self._claim(thread) if answers else None
        try:
            run = self._waiting.get(thread)
            if run is None and claimed is not None and self.checkpoint_store is not None:
                run = await self.workflow.restore(claimed, checkpoint_store=self.checkpoint_store)
                self._waiting[thread] = run
            if run is not None and answers:
                # checked before the run leaves the thread: a wrong answer keeps it waiting
                run._accept(answers)
                del self._waiting[thread]
                return run, None, claimed
        except BaseException:
            await self._release(claimed)
            raise
        await self._release(claimed)
        return None, self._input(incoming), None

    async def _claim(self, thread: AgentThread) -> str | None:
        """The checkpoint of the run the thread's last answer left waiting, claimed when the
        store can claim (None without a store, or when the thread does not end waiting)."""
        store = self.checkpoint_store
        if store is None:
            return None
        history = await thread.get_messages()
        if not history or history[-1].role != "assistant":
            return None
        checkpoint_id = history[-1].metadata.get(RUN_KEY)
        if type(checkpoint_id) is not str:
            return None
        if isinstance(store, StateStoreCheckpointStore):
            await store.claim(checkpoint_id)
        return checkpoint_id

    async def _release(self, claimed: str | None) -> None:
        store = self.checkpoint_store
        if claimed is not None and isinstance(store, StateStoreCheckpointStore):
            await store.release(claimed)

    async def _settle(self, run_id: str, claimed: str | None, waiting: bool) -> None:
        """After a run: one that waits (again, or given its requests back after a failure)
        keeps its checkpoints and frees its claim for the next answer; one that ended takes
        its checkpoints out of the store, so served runs do not grow it without bound."""
        if not isinstance(self.checkpoint_store, StateStoreCheckpointStore):
            return
        if waiting:
            await self._release(claimed)
        else:
            await self.checkpoint_store.delete_run(run_id)

    def _keep_waiting(self, run: WorkflowRun, thread: AgentThread) -> None:
        """A continued run that failed or was cancelled gives its requests back (see
        `WorkflowRun`): it waits on the thread again, to be answered anew."""
        if run.pending_requests:
            self._waiting[thread] = run

    def _finish(
        self, result: WorkflowRunResult, thread: AgentThread, new: list[Any]
    ) -> list[Message]:
        produced = [m for out in new for m in _as_messages(out, self.name)]
        if result.pending_requests:
            self._waiting[thread] = result.run
            calls = [
                FunctionCallContent(r.request_id, REQUEST_INFO, {"data": to_json(r.data)})
                for r in result.pending_requests
            ]
            asking = Message("assistant", list(calls), author_name=self.name)
            if self.checkpoint_store is not None and result.run.checkpoint_id is not None:
                asking.metadata[RUN_KEY] = result.run.checkpoint_id
            produced.append(asking)
        return produced

    async def run(
        self,
        messages: AgentInput = None,
        **kw: Unpack[RunKeywords],
    ) -> AgentResponse:
        """Run the workflow on the conversation; its outputs are the answer.

        `tool_kwargs` (and any keyword that is not the run's own) reach every executor as
        ``ctx.kwargs``.
        """
        kwargs = self._run_kwargs(kw)
        cancellation_token = kw.get("cancellation_token")
        thread = self._thread_for_run(kw.get("thread"))
        incoming = self._incoming(messages)
        run, start, claimed = await self._begin(incoming, thread)
        await thread.on_new_message(incoming)  # only once taken: a refused answer is not kept
        run_id = run.run_id if run is not None else new_id()
        waiting = False
        try:
            if run is not None:
                before = len(run.outputs)
                try:
                    result = await run._drive_collect(cancellation_token=cancellation_token)
                finally:
                    self._keep_waiting(run, thread)
            else:
                before = 0
                result = await self.workflow.run(
                    start,
                    kwargs=kwargs,
                    checkpoint_store=self.checkpoint_store,
                    run_id=run_id,
                    cancellation_token=cancellation_token,
                )
            waiting = bool(result.pending_requests)
        finally:
            waiting = waiting or (run is not None and bool(run.pending_requests))
            await self._settle(run_id, claimed, waiting)
        produced = self._finish(result, thread, result.outputs[before:])
        await thread.on_new_message(produced)
        return AgentResponse(produced, thread=thread, agent_id=self.id)

    def run_stream(
        self,
        messages: AgentInput = None,
        **kw: Unpack[RunKeywords],
    ) -> AgentResponseStream:
        """Run the workflow and stream agent chunks and outputs as they happen."""
        kwargs = self._run_kwargs(kw)
        cancellation_token = kw.get("cancellation_token")
        final: list[AgentResponse] = []

        async def updates() -> AsyncIterator[AgentResponseUpdate]:
            used = self._thread_for_run(kw.get("thread"))
            incoming = self._incoming(messages)
            run, start, claimed = await self._begin(incoming, used)
            await used.on_new_message(incoming)
            run_id = run.run_id if run is not None else new_id()
            if run is not None:
                stream = run._drive_stream(cancellation_token=cancellation_token)
            else:
                stream = self.workflow.run_stream(
                    start,
                    kwargs=kwargs,
                    checkpoint_store=self.checkpoint_store,
                    run_id=run_id,
                    cancellation_token=cancellation_token,
                )
            new: list[Any] = []
            waiting = False
            try:
                async with stream:  # a consumer that stops early cancels the run at once
                    async for event in stream:
                        update = self._update(event, new)
                        if update is not None:
                            yield update
                waiting = bool(stream.result.pending_requests)
            finally:
                if run is not None:
                    self._keep_waiting(run, used)
                    waiting = waiting or bool(run.pending_requests)
                await self._settle(run_id, claimed, waiting)
            produced = self._finish(stream.result, used, new)
            await used.on_new_message(produced)
            final.append(AgentResponse(produced, thread=used, agent_id=self.id))

        return AgentResponseStream(updates(), lambda: final[-1])

    def _run_kwargs(self, kw: RunKeywords) -> dict[str, Any]:
        """The workflow's kwargs: the tool kwargs (an agent-as-tool call passes its
        caller's) and any keyword that is not the run's own."""
        if kw.get("instructions_override") is not None:
            raise ConfigurationError(
                f"agent {self.name!r} runs workflow {self.workflow.name!r}, which has no "
                "instructions to override; drop instructions_override= (or set the "
                "instructions of the agents inside the workflow)"
            )
        return {**(kw.get("tool_kwargs") or {}), **chat_keywords(kw)}

    def _update(self, event: WorkflowEvent, new: list[Any]) -> AgentResponseUpdate | None:
        if isinstance(event, AgentUpdateEvent) and isinstance(event.data, AgentResponseUpdate):
            return event.data
        if isinstance(event, OutputEvent):
            new.append(event.data)
            if isinstance(event.data, AgentResponse):
                return None  # its chunks were streamed already (or the caller reads .response)
            contents = [c for m in _as_messages(event.data, self.name) for c in m.contents]
            return AgentResponseUpdate(contents, author_name=self.name, agent_id=self.id)
        return None
