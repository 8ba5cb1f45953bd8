"""`ParticipantExecutor`: one team member as a node of the team's workflow.

On the turn token it brings its channel up to date (waiting for deliveries under way, and
raising one that failed), runs its agent on the channel's view of the history (with the
participant's run options, if it has any: a handoff's transfer tools, say), streaming the
agent's chunks as workflow events in a streamed run, and hands the turn's messages back to
the manager.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ..agents import Agent, AgentResponse, AgentResponseUpdate
from ..core import Message, Usage, tracing
from ..models import ChatOptions
from ..workflows import AgentUpdateEvent, Executor, WorkflowContext, handler
from .channels import AgentChannel, channel_key
from .manager import channels_of, sourced, turn_span
from .turns import HISTORY_LOG, SpeakTurn, TurnDone

__all__ = ["ParticipantExecutor"]


class ParticipantExecutor(Executor):
    """Runs `agent` when it gets the turn token; its id is the agent's name. `options`
    are laid over the agent's own for each of its turns (its own options stay as they
    are, so the agent can serve elsewhere unchanged)."""

    def __init__(self, agent: Agent, *, options: ChatOptions | None = None) -> None:
        super().__init__(agent.name)
        self.agent = agent
        self.channel_key = channel_key(agent)
        self.options = options

    @handler(output=TurnDone)
    async def take_turn(self, turn: SpeakTurn, ctx: WorkflowContext[Any, Any]) -> None:
        """Speak: run the agent on the shared history, then give the turn back."""
        channels = channels_of(ctx)
        channel = channels.ready(self.channel_key)
        if channel is None:  # deliveries under way, a failure to raise, or a new channel

            def history() -> list[tuple[str, Message]]:
                return sourced(ctx.log(HISTORY_LOG, shared=True).entries)

            channel = await channels.sync(self.channel_key, self.agent, history)
        on_update = None
        if ctx.streaming:

            def on_update(update: AgentResponseUpdate) -> None:
                ctx.add_event(AgentUpdateEvent(self.id, update))

        if tracing.enabled():
            with turn_span(ctx, turn, self.agent.name):
                response = await self._run_agent(channel, on_update, ctx)
        else:
            response = await self._run_agent(channel, on_update, ctx)
        name = self.agent.name
        messages = [m if m.author_name else m.copy(author_name=name) for m in response.messages]
        ctx.send_message(TurnDone(name, messages, response.usage or Usage(), self.channel_key))

    def _run_agent(
        self,
        channel: AgentChannel,
        on_update: Callable[[AgentResponseUpdate], None] | None,
        ctx: WorkflowContext[Any, Any],
    ) -> Awaitable[AgentResponse]:
        """The channel's run of the agent (a plain function: no coroutine of its own)."""
        if self.options is None:  # a channel written before options= still serves
            return channel.invoke(
                self.agent, on_update=on_update, cancellation_token=ctx.cancellation_token
            )
        return channel.invoke(
            self.agent,
            options=self.options,
            on_update=on_update,
            cancellation_token=ctx.cancellation_token,
        )
