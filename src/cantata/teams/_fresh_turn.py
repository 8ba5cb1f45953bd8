"""A participant that speaks on a fresh thread built from a slice of the team's history.

The group chat's and the handoff's participants read the history through the session's
channels, which mirror it once per thread kind (a handoff's transfer tools are the
participant's run options there). Some team types need a participant to see something
else: only the previous agent's reply (a sequential chain), or the history as it stood
before its siblings answered (a concurrent fan-out, whose members run in one superstep, so
a shared channel would show one sibling's answer to the next). `FreshTurnParticipant`
builds a new thread of the agent's kind for each turn from the messages its `select`
picks, shown as the local channel shows them (its own messages as they are, others'
replies as user messages), and runs the agent there with per-turn options. The history
itself stays the manager's, so a checkpoint and a resume see the same thing. A turn that
pauses for a person (see `_paused.py`) goes on on a thread built the same way, from the
history as it was when the turn began, with what the turn said and the answers after it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..agents import Agent, AgentResponse, AgentResponseUpdate
from ..core import Message, Usage, tracing
from ..models import ChatOptions
from ..workflows import AgentUpdateEvent, WorkflowContext, handler
from ._paused import ASKING, PausingParticipant, WentOn, requests_of, team_tools_of
from ._run_kwargs import turn_options, turn_span
from .channels import LocalChannel, sourced
from .turns import HISTORY_LOG, PausedTurn, SpeakTurn, TurnDone, _authored

__all__ = ["FreshTurnParticipant", "HistorySelector", "OptionsFor", "view_for"]

HistorySelector = Callable[[list[Message]], list[Message]]
"""Picks what a participant sees from the whole history."""
OptionsFor = Callable[[list[Message]], ChatOptions | None]
"""Chat options for one turn, given the history (e.g. the tools a handoff allows now)."""


async def view_for(agent: Agent, messages: Sequence[Message]) -> list[Message]:
    """`messages` as the participant reads them (the local channel's view)."""
    channel = LocalChannel("fresh")
    admitted = [(s, kept) for s, m in sourced(messages) if (kept := channel.admit(m)) is not None]
    await channel.receive(admitted)
    return channel.view(agent.name)


class FreshTurnParticipant(PausingParticipant):
    """Runs `agent` on the turn token, on a new thread holding what `select` picks from
    the history (all of it by default), with `options_for(history)` for that run."""

    def __init__(
        self,
        agent: Agent,
        *,
        select: HistorySelector | None = None,
        options_for: OptionsFor | None = None,
    ) -> None:
        super().__init__(agent.name)
        self.agent = agent
        self._select = select
        self._options_for = options_for

    @handler(output=TurnDone)
    async def take_turn(self, turn: SpeakTurn, ctx: WorkflowContext[Any, Any]) -> None:
        """Speak on a fresh thread, then give the turn back with what was said."""
        history: list[Message] = list(ctx.log(HISTORY_LOG, shared=True).entries)
        shown = self._select(history) if self._select is not None else history
        options = self._options_for(history) if self._options_for is not None else None
        options = turn_options(ctx, options)
        view = await view_for(self.agent, shown)
        if tracing.enabled():
            with turn_span(ctx, turn, self.agent.name):
                response = await self._run(view, options, ctx)
        else:
            response = await self._run(view, options, ctx)
        if response.finish_reason in ASKING:
            requests = requests_of(response, team_tools_of(options))
            if requests:
                usage = response.usage or Usage()
                self._pause(turn, response.messages, requests, usage, ctx, start=len(history))
                return
        name = self.agent.name
        messages = _authored(response.messages, name)
        ctx.send_message(TurnDone(name, messages, response.usage or Usage(), ""))

    async def _go_on(
        self, paused: PausedTurn, inputs: list[Message], ctx: WorkflowContext[Any, Any]
    ) -> WentOn:
        """The paused turn goes on: its view rebuilt from the history as the turn began,
        then what it said and the answers."""
        history: list[Message] = list(ctx.log(HISTORY_LOG, shared=True).entries[: paused.start])
        shown = self._select(history) if self._select is not None else history
        options = self._options_for(history) if self._options_for is not None else None
        options = turn_options(ctx, options)
        view = await view_for(self.agent, shown)
        response = await self._run([*view, *paused.messages, *inputs], options, ctx)
        return WentOn(response, team_tools_of(options))

    async def _run(
        self, view: list[Message], options: ChatOptions | None, ctx: WorkflowContext[Any, Any]
    ) -> AgentResponse:
        thread = self.agent.create_thread()
        if view:
            await thread.on_new_message(view)
        token = ctx.cancellation_token
        if not ctx.streaming:
            return await self.agent.run(
                None, thread=thread, options=options, cancellation_token=token
            )
        stream = self.agent.run_stream(
            None, thread=thread, options=options, cancellation_token=token
        )
        update: AgentResponseUpdate
        async for update in stream:
            ctx.add_event(AgentUpdateEvent(self.id, update))
        return stream.response
