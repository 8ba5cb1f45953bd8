"""`TeamAgent`: a team used wherever an agent is (a tool, a workflow node, another team)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..agents import Agent, AgentInput, AgentResponse, AgentThread, IntermediateCallback
from ..core import CancellationToken, Usage
from ..models import ChatOptions

if TYPE_CHECKING:
    from .team import Team

__all__ = ["TeamAgent"]


class TeamAgent(Agent):
    """Runs its team once per call, on a fresh session, with the thread's conversation and
    the new messages as the task; answers with what the participants said (each message
    keeps its author) and records it on the thread."""

    def __init__(
        self, team: Team, *, name: str | None = None, description: str | None = None
    ) -> None:
        super().__init__(
            name=name or team.name,
            description=description if description is not None else team.description,
        )
        self.team = team

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
        """One team run on the conversation so far plus `messages`."""
        thread = self._thread_for_run(thread)
        incoming = self._incoming(messages)
        history = await thread.get_messages()
        session = self.team.create_session()
        try:
            result = await session.run([*history, *incoming], cancellation_token=cancellation_token)
        finally:
            await session.close()
        given = {m.message_id for m in [*history, *incoming]}
        replies = [m for m in result.messages if m.message_id not in given]
        await thread.on_new_message([*incoming, *replies])
        return AgentResponse(
            replies,
            thread=thread,
            usage=Usage(),
            agent_id=self.id,
            finish_reason=result.stop_reason,
        )
