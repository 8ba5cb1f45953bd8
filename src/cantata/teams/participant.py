"""`ParticipantExecutor`: one team member as a node of the team's workflow.

On the turn token it brings its channel up to date (waiting for deliveries under way, and
raising one that failed), runs its agent on the channel's view of the history (with the
participant's run options, if it has any: a handoff's transfer tools, say), streaming the
agent's chunks as workflow events in a streamed run, and hands the turn's messages back to
the manager. A run that asks the caller for something (a tool's approval, a declared
tool's result) pauses the turn instead, until the caller answers (see `_paused.py`). On a
runtime that copies messages it runs in a process of its own: there its
channel catches up from the run's history log instead (see `channels.py`), made from the
channel factories the executor carries.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ..agents import Agent, AgentResponse, AgentResponseUpdate
from ..core import Message, Usage, tracing
from ..models import ChatOptions
from ..workflows import AgentUpdateEvent, WorkflowContext, handler
from ._paused import ASKING, PausingParticipant, WentOn, requests_of, team_tools_of
from .channels import REDUCED_LOG, AgentChannel, ChannelFactory, ChannelSet, channel_key
from .manager import CHANNELS_KEY, channels_of, sourced, turn_options, turn_span
from .turns import HISTORY_LOG, PausedTurn, SpeakTurn, TurnDone, _authored

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
        given: Any = ctx.kwargs.get(CHANNELS_KEY)
        copying = not isinstance(given, ChannelSet)
        channels: ChannelSet = channels_of(ctx, self) if copying else given
        if copying:  # the session's key: perhaps another process, so the history log
            channel = await channels.catch_up(
                self.channel_key,
                self.agent,
                ctx.log(HISTORY_LOG, shared=True).entries,
                ctx.log(REDUCED_LOG, shared=True).entries,
            )
        else:
            ready = channels.ready(self.channel_key)
            if ready is None:  # deliveries under way, a failure to raise, or a new channel

                def history() -> list[tuple[str, Message]]:
                    return sourced(ctx.log(HISTORY_LOG, shared=True).entries)

                ready = await channels.sync(self.channel_key, self.agent, history)
            channel = ready
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
        if copying:
            channels.wrote(self.channel_key, response.messages)
        name = self.agent.name
        messages = _authored(response.messages, name)
        ctx.send_message(TurnDone(name, messages, response.usage or Usage(), self.channel_key))

    async def _go_on(
        self, paused: PausedTurn, inputs: list[Message], ctx: WorkflowContext[Any, Any]
    ) -> WentOn:
        """The paused turn goes on on the participant's channel, caught up as for a turn
        (after a resume the channel is new, and is handed the turn so far again)."""
        given: Any = ctx.kwargs.get(CHANNELS_KEY)
        channels: ChannelSet = given if isinstance(given, ChannelSet) else channels_of(ctx, self)
        history = ctx.log(HISTORY_LOG, shared=True).entries
        if isinstance(given, ChannelSet):
            channel = await channels.sync(self.channel_key, self.agent, lambda: sourced(history))
        else:
            channel = await channels.catch_up(
                self.channel_key, self.agent, history, ctx.log(REDUCED_LOG, shared=True).entries
            )
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
        if not isinstance(ctx.kwargs.get(CHANNELS_KEY), ChannelSet):  # a copying runtime
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
