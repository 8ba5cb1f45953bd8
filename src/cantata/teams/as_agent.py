"""`TeamAgent`: a team used wherever an agent is (a tool, a workflow node, another team)."""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..agents import Agent, AgentInput, AgentResponse, AgentThread, IntermediateCallback
from ..core import (
    CancellationToken,
    FunctionApprovalRequestContent,
    FunctionApprovalResponseContent,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    Usage,
)
from ..models import ChatOptions
from ..workflows import CheckpointStore, RequestInfoEvent, StateStoreCheckpointStore

if TYPE_CHECKING:
    from .session import TeamSession
    from .team import Team

__all__ = ["SESSION_KEY", "TeamAgent"]

SESSION_KEY = "cantata_team_checkpoint"
"""Metadata key of the message that ends a waiting answer: the checkpoint of the waiting
session (with a `checkpoint_store`), so any process holding the thread can answer it."""


class TeamAgent(Agent):
    """Runs its team once per call, on a fresh session, with the thread's conversation and
    the new messages as the task; answers with what the participants said (each message
    keeps its author) and records it on the thread.

    A participant that stops to wait for a person (a tool's approval, a declared tool's
    result) stops the run: the answer ends with those requests, as an agent's own would
    (finish reason ``"approval_required"`` or ``"tool_calls"``), and the waiting session is
    kept with the thread object. The next run on that thread that brings the answers
    (approval responses, function results) goes on with that session.

    With a `checkpoint_store` (SQLite, PostgreSQL, ...: `cantata serve` gives its own), every
    session checkpoints there and the waiting answer's last message names the checkpoint
    (metadata `SESSION_KEY`), so the answer may come to another thread object holding the
    same messages: another process, or this one after a restart. The session is then
    restored from that checkpoint (`Team.resume`) and goes on as if it had never stopped.
    The answer claims the checkpoint in the store first, so of two answers sent at once
    (to two processes) one goes on and the other raises `AlreadyAnsweredError`. A session
    that ends (done or failed) takes its checkpoints out of the store; a waiting one keeps
    them."""

    def __init__(
        self,
        team: Team,
        *,
        name: str | None = None,
        description: str | None = None,
        checkpoint_store: CheckpointStore | None = None,
    ) -> None:
        super().__init__(
            name=name or team.name,
            description=description if description is not None else team.description,
        )
        self.team = team
        self.checkpoint_store = checkpoint_store
        self._waiting: weakref.WeakKeyDictionary[AgentThread, TeamSession] = (
            weakref.WeakKeyDictionary()
        )

    async def run(
        self,
        messages: AgentInput = None,
        *,
        thread: AgentThread | None = None,
        on_intermediate: IntermediateCallback | None = None,
        arguments: Mapping[str, Any] | None = None,
        options: ChatOptions | None = None,
        tools: Iterable[Any] | None = None,
        cancellation_token: CancellationToken | None = None,
        **kwargs: Any,
    ) -> AgentResponse:
        """One team run on the conversation so far plus `messages` (or, on a thread whose
        team waits for answers that `messages` bring, the rest of that run)."""
        thread = self._thread_for_run(thread)
        incoming = self._incoming(messages)
        history = await thread.get_messages()
        # An answer to a session waiting in the store claims it first: of two answers sent
        # at once (to two processes, or two requests here), one goes on.
        claimed = _stored_checkpoint(self.checkpoint_store, history, incoming)
        if claimed is not None:
            await claimed[0].claim(claimed[1])
        try:
            session = self._waiting.pop(thread, None) or await self._stored_session(history)
        except BaseException:
            if claimed is not None:
                await claimed[0].release(claimed[1])
            raise
        answers = _answers(session.pending_requests, incoming) if session is not None else {}
        if session is None or not answers:
            if claimed is not None:
                await claimed[0].release(claimed[1])
            if session is not None:
                await self._end(session)  # not answered: the new task starts over
            session = self.team.create_session(checkpoint_store=self.checkpoint_store)
            run = session.run([*history, *incoming], cancellation_token=cancellation_token)
        else:
            run = session.send_responses(answers, cancellation_token=cancellation_token)
        keep = False
        try:
            result = await run
            waiting = session.pending_requests
            asked = _asked(waiting)
            keep = bool(asked)
        finally:
            if keep:
                self._waiting[thread] = session
            else:
                await self._end(session)
        given = {m.message_id for m in [*history, *incoming]}
        replies = [m for m in result.messages if m.message_id not in given]
        finish = result.stop_reason
        if asked:
            if self.checkpoint_store is not None and session.checkpoint_id is not None:
                asked[-1].metadata[SESSION_KEY] = session.checkpoint_id
            replies += asked
            approvals = any(type(r.data) is FunctionApprovalRequestContent for r in waiting)
            finish = "approval_required" if approvals else "tool_calls"
        await thread.on_new_message([*incoming, *replies])
        return AgentResponse(
            replies,
            thread=thread,
            usage=Usage(),
            agent_id=self.id,
            finish_reason=finish,
        )

    async def _end(self, session: TeamSession) -> None:
        """Close an ended session; its checkpoints leave the store (only a waiting session
        needs them), so a served team's store does not grow with every conversation."""
        run_id = session.run_id
        await session.close()
        store = self.checkpoint_store
        if isinstance(store, StateStoreCheckpointStore) and run_id is not None:
            await store.delete_run(run_id)

    async def _stored_session(self, history: list[Message]) -> TeamSession | None:
        """The session the thread's last answer left waiting, restored from its checkpoint
        (None without a checkpoint store, or when the thread does not end waiting)."""
        store = self.checkpoint_store
        if store is None or not history or history[-1].role != "assistant":
            return None
        checkpoint_id = history[-1].metadata.get(SESSION_KEY)
        if type(checkpoint_id) is not str:
            return None
        return await self.team.resume(checkpoint_id, checkpoint_store=store)


def _stored_checkpoint(
    store: CheckpointStore | None, history: list[Message], incoming: list[Message]
) -> tuple[StateStoreCheckpointStore, str] | None:
    """The store and checkpoint of the session the thread ends waiting on, when `incoming`
    brings answers (approval responses, function results) and the store can claim it."""
    if not isinstance(store, StateStoreCheckpointStore) or not history:
        return None
    checkpoint_id = history[-1].metadata.get(SESSION_KEY)
    if history[-1].role != "assistant" or type(checkpoint_id) is not str:
        return None
    answering = any(
        type(c) is FunctionApprovalResponseContent or type(c) is FunctionResultContent
        for m in incoming
        for c in m.contents
    )
    return (store, checkpoint_id) if answering else None


def _asked(waiting: list[RequestInfoEvent]) -> list[Message]:
    """The requests a stopped run waits on, as the messages of the participants that made
    them (approval requests and calls, as an agent's own answer would end)."""
    out: list[Message] = []
    for r in waiting:
        data = r.data
        if isinstance(data, FunctionApprovalRequestContent | FunctionCallContent):
            out.append(Message("assistant", [data], author_name=r.executor_id))
    return out


def _answers(waiting: list[RequestInfoEvent], incoming: list[Message]) -> dict[str, Any]:
    """The workflow requests `incoming` answers, by request id: an approval response by
    its approval request's id, a function result by its call's id."""
    by_key: dict[tuple[str, str], str] = {}
    for r in waiting:
        if isinstance(r.data, FunctionApprovalRequestContent):
            by_key["approval", r.data.request_id] = r.request_id
        elif isinstance(r.data, FunctionCallContent):
            by_key["call", r.data.call_id] = r.request_id
    out: dict[str, Any] = {}
    for m in incoming:
        for c in m.contents:
            if type(c) is FunctionApprovalResponseContent:
                key = ("approval", c.request_id)
            elif type(c) is FunctionResultContent:
                key = ("call", c.call_id)
            else:
                continue
            request_id = by_key.get(key)
            if request_id is not None:
                out.setdefault(request_id, c)
    return out
