"""`ParticipantExecutor`: one team member as a node of the team's workflow.

On the turn token it brings its channel up to date (waiting for deliveries under way, and
raising one that failed), runs its agent on the channel's view of the history (with the
participant's run options, if it has any: a handoff's transfer tools, say), streaming the
agent's chunks as workflow events in a streamed run, and hands the turn's messages back to
the manager. A run that asks the caller for something (a tool's approval, a declared
tool's result) pauses the turn instead, until the caller answers (see `_paused.py`). It
reaches the session's channels through `channels_of`, whichever kind the session chose (on
a runtime that copies messages, made in this process from the channel factories the
executor carries: see `replication.py`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ..agents import Agent, AgentResponse, AgentResponseUpdate
from ..core import Message, Usage, tracing
from ..models import ChatOptions
from ..workflows import AgentUpdateEvent, WorkflowContext, handler
from ._paused import ASKING, PausingParticipant, WentOn, requests_of, team_tools_of
from ._run_kwargs import channels_of, turn_options, turn_span
from .channels import AgentChannel, ChannelFactory, channel_key
from .turns import PausedTurn, SpeakTurn, TurnDone, _authored

__all__ = ["ParticipantExecutor"]


class ParticipantExecutor(PausingParticipant):
    """Runs `agent` when it gets the turn token; its id is the agent's name. `options`
    are laid over the agent's own for each of its turns (its own options stay as they
    are, so the agent can serve elsewhere unchanged)."""

    def __init__(self, agent: Agent, *, options: ChatOptions | None = None) -> None:
        super().__init__(agent.name)
        self.agent = agent
        self.channel_key = channel_key(agent)
        self.options = options
        self.team_tools = team_tools_of(options)
        """Names of the tools the team declared in `options` (it answers their calls)."""
        self.channel_factories: Mapping[str, ChannelFactory] | None = None
        """The team's channel factories (its team sets them): in another process, the
        participant makes its session's channels with them."""
        self.sync_timeout = 60.0

    @handler(output=TurnDone)
    async def take_turn(self, turn: SpeakTurn, ctx: WorkflowContext[Any, Any]) -> None:
        """Speak: run the agent on the shared history, then give the turn back."""
        channels = channels_of(ctx, self)
        key = self.channel_key
        channel = channels.ready(key)
        if channel is None:  # deliveries under way, a failure to raise, a new channel, or
            channel = await channels.read(key, self.agent, ctx)  # the history log to read
        on_update = None
        if ctx.streaming:

            def on_update(update: AgentResponseUpdate) -> None:
                ctx.add_event(AgentUpdateEvent(self.id, update))

        if tracing.enabled():
            with turn_span(ctx, turn, self.agent.name):
                response = await self._run_agent(channel, on_update, ctx)
        else:
            response = await self._run_agent(channel, on_update, ctx)
        if response.finish_reason in ASKING:
            requests = requests_of(response, self.team_tools)
            if requests:
                usage = response.usage or Usage()
                state = await channel.paused(self.agent)
                self._pause(turn, response.messages, requests, usage, ctx, channel_state=state)
                return
        if channels.keeps_writes:
            channels.wrote(key, response.messages)
        name = self.agent.name
        messages = _authored(response.messages, name)
        ctx.send_message(TurnDone(name, messages, response.usage or Usage(), self.channel_key))

    async def _go_on(
        self, paused: PausedTurn, inputs: list[Message], ctx: WorkflowContext[Any, Any]
    ) -> WentOn:
        """The paused turn goes on on the participant's channel, caught up as for a turn
        (after a resume the channel is new, and is handed the turn so far again)."""
        channel = await channels_of(ctx, self).read(self.channel_key, self.agent, ctx)
        on_update = None
        if ctx.streaming:

            def on_update(update: AgentResponseUpdate) -> None:
                ctx.add_event(AgentUpdateEvent(self.id, update))

        response = await channel.continue_turn(
            self.agent,
            paused.messages,
            inputs,
            saved=paused.channel_state,
            options=turn_options(ctx, self.options),
            on_update=on_update,
            cancellation_token=ctx.cancellation_token,
        )
        return WentOn(response, self.team_tools, lambda: channel.paused(self.agent))

    def _went_on(self, said: list[Message], ctx: WorkflowContext[Any, Any]) -> str:
        channels_of(ctx, self).wrote(self.channel_key, said)
        return self.channel_key

    def _run_agent(
        self,
        channel: AgentChannel,
        on_update: Callable[[AgentResponseUpdate], None] | None,
        ctx: WorkflowContext[Any, Any],
    ) -> Awaitable[AgentResponse]:
        """The channel's run of the agent (a plain function: no coroutine of its own)."""
        options = turn_options(ctx, self.options)
        if options is None:  # a channel written before options= still serves
            return channel.invoke(
                self.agent, on_update=on_update, cancellation_token=ctx.cancellation_token
            )
        return channel.invoke(
            self.agent,
            options=options,
            on_update=on_update,
            cancellation_token=ctx.cancellation_token,
        )
