"""`TeamAgent`: a team used wherever an agent is (a tool, a workflow node, another team)."""

from __future__ import annotations

import hashlib
import json
import weakref
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..agents import Agent, AgentInput, AgentResponse, AgentThread, IntermediateCallback
from ..agents.run_options import call_options, chat_keywords
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

__all__ = ["CARRIES_KEPT", "SESSION_KEY", "STATE_KEY", "TeamAgent", "waits_for_user"]

SESSION_KEY = "cantata_team_checkpoint"
"""Metadata key of the message that ends a waiting answer: the checkpoint of the waiting
session (with a `checkpoint_store`), so any process holding the thread can answer it."""
STATE_KEY = "cantata_team_state"
"""Metadata key of the message that ends an answer: the team's name, what its manager
keeps between runs (``carry``: the active agent of a handoff, the last speaker of a group
chat, magentic's ledger) and whether the team waits for the user (``waits_for_user``)."""
CARRY_PREFIX = "team-carry:"
CARRIES_KEPT = 4096
"""How many conversations' carried state a `TeamAgent` without a store-backed checkpoint
store keeps in memory for clients that hold the history themselves (with one, the store
keeps them all and the process none, so a served team stays flat)."""
USER_INPUT = "user_input"
"""The stop source of a team run that asks the user (a handoff's agent answered)."""


class TeamAgent(Agent):
    """Runs its team once per call, on a fresh session: the thread's conversation up to its
    last answer is the context, what came after it (the user's new turn) the task, so the
    run's termination counts this turn only, and system messages are context wherever they
    are; answers with what the participants said (each message
    keeps its author) and records it on the thread.

    The team's state between runs (a handoff's active agent, a group chat's last speaker,
    magentic's ledger) goes with the conversation: on the answer's last message (metadata
    `STATE_KEY`) and, for a client that sends the history back as plain role and text,
    kept under the conversation's text (in memory, and in the checkpoint store when it is a
    `StateStoreCheckpointStore`), so the next call goes on as the next `team.run()` of one
    session would. Chat options given to a call (``temperature=...``) reach every
    participant's turns, laid under the participant's own team options; an
    ``instructions_override`` reaches them as a system message at the head of the
    conversation (each agent keeps its own instructions). The answer's usage is the sum of
    its agents'.

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
        self._carries: OrderedDict[str, dict[str, Any]] = OrderedDict()

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
        chat = call_options(self.name, options, chat_keywords(kwargs))
        instructions = kwargs.get("instructions_override")
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
        before = Usage()
        if session is None or not answers:
            if claimed is not None:
                await claimed[0].release(claimed[1])
            if session is not None:
                await self._end(session)  # not answered: the new task starts over
            session = self.team.create_session(checkpoint_store=self.checkpoint_store)
            context, task = _split([*history, *incoming])
            carry = await self._carried(context) if task else None
            if not task:  # nothing new after an answer: the whole conversation is the task
                context, task = _split_system([*history, *incoming])
            if isinstance(instructions, str) and instructions:
                context = [Message("system", instructions), *context]
            run = session._run_held(
                task,
                context=context,
                carry=carry,
                cancellation_token=cancellation_token,
                options=chat,
            )
        else:
            state = session._manager_state()
            before = state.usage if state is not None else Usage()
            run = session.send_responses(answers, cancellation_token=cancellation_token)
        keep = False
        try:
            result = await run
            waiting = session.pending_requests
            asked = _asked(waiting)
            keep = bool(asked)
            state = session._manager_state()
            usage = _minus(state.usage, before) if state is not None else Usage()
            carry = None if keep else session._carry()
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
        elif carry is not None:
            stop = result.stop_message
            said = {
                "team": self.team.name,
                "carry": carry,
                "waits_for_user": stop is not None and stop.source == USER_INPUT,
            }
            if replies:
                last = replies[-1]
                replies[-1] = last.copy(metadata={**last.metadata, STATE_KEY: said})
            await self._keep_carry([*history, *incoming, *replies], carry)
        await thread.on_new_message([*incoming, *replies])
        return AgentResponse(
            replies,
            thread=thread,
            usage=usage,
            agent_id=self.id,
            finish_reason=finish,
        )

    async def _carried(self, context: list[Message]) -> dict[str, Any] | None:
        """The manager state this team's last answer in `context` left (None when the
        conversation does not end with one): read from the answer's metadata (a thread kept
        by cantata), else looked up by the conversation's text (a client that sends the
        history back as plain role and content)."""
        last = next((m for m in reversed(context) if m.role == "assistant"), None)
        if last is None:
            return None
        said = last.metadata.get(STATE_KEY)
        if isinstance(said, dict) and said.get("team") == self.team.name:
            carry = said.get("carry")
            return carry if isinstance(carry, dict) else None
        key = self._carry_key(context)
        carry = self._carries.get(key)
        if carry is not None:
            self._carries.move_to_end(key)
            return carry
        store = self.checkpoint_store
        if isinstance(store, StateStoreCheckpointStore):
            found = await store.store.get(key)
            return found if isinstance(found, dict) else None
        return None

    async def _keep_carry(self, conversation: list[Message], carry: dict[str, Any]) -> None:
        """Keep `carry` under the conversation's text, for the next turn of a client that
        holds the history itself: in this agent's memory (the last `CARRIES_KEPT`), and in
        the checkpoint store's state store when it has one (any process over it reads it;
        then not in memory)."""
        key = self._carry_key(conversation)
        store = self.checkpoint_store
        if isinstance(store, StateStoreCheckpointStore):
            await store.store.put(key, carry)
            return
        self._carries[key] = carry
        self._carries.move_to_end(key)
        while len(self._carries) > CARRIES_KEPT:
            self._carries.popitem(last=False)

    def _carry_key(self, conversation: list[Message]) -> str:
        return CARRY_PREFIX + _digest(self.team.name, conversation)

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


def waits_for_user(messages: Sequence[Message]) -> bool:
    """Whether a team's answer (its messages) ends with the team waiting for the user: a
    handoff's agent answered, and the user's next message goes back to it. A server keeps
    such a conversation open (an A2A task stays ``input-required``)."""
    for m in reversed(messages):
        said = m.metadata.get(STATE_KEY)
        if isinstance(said, dict):
            return said.get("waits_for_user") is True
        if m.role == "assistant":
            return False
    return False


def _split(conversation: list[Message]) -> tuple[list[Message], list[Message]]:
    """The conversation as a team run's context and task: the task is what came after the
    last assistant message (the user's new turn), the rest is context; system messages
    (a client's system prompt) are context wherever they are, never a turn."""
    last = max((i for i, m in enumerate(conversation) if m.role == "assistant"), default=-1)
    context = conversation[: last + 1]
    rest = conversation[last + 1 :]
    return [*context, *(m for m in rest if m.role == "system")], [
        m for m in rest if m.role != "system"
    ]


def _split_system(conversation: list[Message]) -> tuple[list[Message], list[Message]]:
    """System messages as context, everything else the task."""
    return [m for m in conversation if m.role == "system"], [
        m for m in conversation if m.role != "system"
    ]


def _digest(team: str, conversation: Sequence[Message]) -> str:
    """A conversation's text as a client sends it back (user and assistant turns, one
    team answer as one message of its speakers' texts; whitespace folded), hashed with
    the team's name."""
    turns: list[list[str]] = []
    for m in conversation:
        if m.role not in ("user", "assistant"):
            continue
        text = " ".join(m.text.split())
        if not text:
            continue
        if turns and turns[-1][0] == m.role:
            turns[-1].append(text)
        else:
            turns.append([m.role, text])
    data = json.dumps([team, [[t[0], " ".join(t[1:])] for t in turns]], ensure_ascii=False)
    return hashlib.sha256(data.encode()).hexdigest()


def _minus(usage: Usage, before: Usage) -> Usage:
    return Usage(
        max(0, usage.input_tokens - before.input_tokens),
        max(0, usage.output_tokens - before.output_tokens),
        max(0, usage.cached_input_tokens - before.cached_input_tokens),
        max(0, usage.cache_write_tokens - before.cache_write_tokens),
    )
