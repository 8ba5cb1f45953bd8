"""`AgentActor`: any high-level `Agent` as an actor of the runtime.

The runtime layer cannot import agents, so the bridge lives here. Each `AgentId` of the
registered type is one conversation: its actor keeps a thread (made by the agent on the
first message, saved and loaded with the runtime's state as the thread's JSON), and runs
the agent on every message it gets, one at a time as actors do. So core-level code (direct
messages, topics, interventions) and team-level code (agents, teams as agents) mix.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..agents import Agent, AgentThread
from ..core import ConfigurationError, Message, Usage, register
from ..runtime import AgentRuntime, MessageContext, RoutedAgent, TopicId, event, rpc
from .turns import _authored

__all__ = ["AgentActor", "AgentReply", "AgentTask", "register_agent"]


@register(name="cantata.teams.AgentTask")
@dataclass(slots=True)
class AgentTask:
    """Messages for an agent actor; `reply_topic` publishes the reply there as well."""

    messages: list[Message] = field(default_factory=list)
    reply_topic: str | None = None
    """A topic type: the reply is published to ``TopicId(reply_topic, <this actor's key>)``."""


@register(name="cantata.teams.AgentReply")
@dataclass(slots=True)
class AgentReply:
    """What an agent actor answers: the agent's new messages and their usage."""

    agent: str
    messages: list[Message] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)

    @property
    def text(self) -> str:
        """The last message's text."""
        return self.messages[-1].text if self.messages else ""


class AgentActor(RoutedAgent):
    """Runs `agent` on each message; the conversation lives in one thread per `AgentId`.

    Direct messages (`send_message`) get the `AgentReply` back: text, a `Message`, a list
    of messages or an `AgentTask`. Published `AgentTask`s run the agent too, and their
    reply goes to `reply_topic` when one is given.
    """

    __slots__ = ("agent", "thread")

    def __init__(self, agent: Agent) -> None:
        if not isinstance(agent, Agent):
            raise ConfigurationError(f"AgentActor runs an Agent, got {agent!r}")
        self.agent = agent
        self.thread: AgentThread | None = None

    async def _answer(self, messages: list[Message], ctx: MessageContext) -> AgentReply:
        if self.thread is None:
            self.thread = self.agent.create_thread()
        response = await self.agent.run(
            messages, thread=self.thread, cancellation_token=ctx.cancellation_token
        )
        name = self.agent.name
        out = _authored(response.messages, name)
        return AgentReply(name, out, response.usage or Usage())

    @rpc
    async def on_text(self, message: str, ctx: MessageContext) -> AgentReply:
        """A user message as text."""
        return await self._answer([Message("user", message)], ctx)

    @rpc
    async def on_one_message(self, message: Message, ctx: MessageContext) -> AgentReply:
        """One message."""
        return await self._answer([message], ctx)

    @rpc
    async def on_messages(self, message: list[Message], ctx: MessageContext) -> AgentReply:
        """Several messages."""
        return await self._answer(list(message), ctx)

    @rpc
    async def on_task(self, message: AgentTask, ctx: MessageContext) -> AgentReply:
        """A task sent directly: the reply comes back (and goes to its topic, if any)."""
        reply = await self._answer(list(message.messages), ctx)
        await self._publish(message, reply)
        return reply

    @event
    async def on_published_task(self, message: AgentTask, ctx: MessageContext) -> None:
        """A task published to a topic this actor subscribes to."""
        await self._publish(message, await self._answer(list(message.messages), ctx))

    async def _publish(self, task: AgentTask, reply: AgentReply) -> None:
        if task.reply_topic is not None:
            await self.publish_message(reply, TopicId(task.reply_topic, self.id.key))

    async def save_state(self) -> Mapping[str, Any]:
        """The thread as JSON (nothing before the first message)."""
        if self.thread is None:
            return {}
        return {"thread": await self.thread.serialize()}

    async def load_state(self, state: Mapping[str, Any]) -> None:
        """Take back the thread `save_state` wrote, through the agent's own loader."""
        data = state.get("thread")
        self.thread = None if data is None else await self.agent.deserialize_thread(data)


async def register_agent(
    runtime: AgentRuntime, agent: Agent, *, agent_type: str | None = None
) -> str:
    """Put `agent` on `runtime` under `agent_type` (default: the agent's name): every
    `AgentId(agent_type, key)` is a conversation of its own. Returns the type."""
    kind = agent_type or agent.name
    await runtime.register_factory(kind, lambda: AgentActor(agent), agent_class=AgentActor)
    return kind
