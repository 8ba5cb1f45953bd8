"""`GroupChat`: participants share one conversation; a speaker policy picks who is next.

``GroupChat([writer, critic], speaker=RoundRobin(), termination=TextMention("APPROVE"))``
is AutoGen's round-robin group chat, ``speaker=Selector(client)`` its selector group chat,
and a plain function of the `ChatState` is a custom policy. Participants of different
thread kinds share the history through channels, as in Semantic Kernel's group chat.

Where the seeds differ, this follows what a user would expect: the task counts toward
termination (AutoGen); a run stops at the first of its termination condition and
`max_turns`, and either way the next `run()` continues the same conversation with fresh
conditions; a history reducer shrinks what the channels mirror (Semantic Kernel), never
the authoritative history the manager keeps.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..agents import Agent, AgentThread, Guardrail, HistoryReducer
from ..core import ConfigurationError
from ..workflows import Workflow, WorkflowContext
from .channels import ChannelFactory
from .manager import ManagerState, TeamManager
from .speakers import (
    ChatState,
    RoundRobin,
    SpeakerChoice,
    SpeakerFunction,
    SpeakerPolicy,
    as_policy,
)
from .team import Team
from .termination import TerminationCondition
from .turns import TurnDone

__all__ = ["GroupChat", "GroupChatManager"]


class GroupChatManager(TeamManager):
    """The manager of a group chat: asks the speaker policy after the task and each turn."""

    def __init__(
        self,
        participants: Sequence[str],
        *,
        speaker: SpeakerPolicy,
        descriptions: Mapping[str, str],
        termination: TerminationCondition | None,
        max_turns: int | None,
        history_reducer: HistoryReducer | None = None,
    ) -> None:
        super().__init__(participants, termination=termination, max_turns=max_turns)
        self.speaker = speaker
        self.descriptions = dict(descriptions)
        self.history_reducer = history_reducer
        self._plain_round_robin = type(speaker) is RoundRobin
        """The built-in round robin, not a subclass: its choice needs no view of the chat."""

    async def on_start(self, state: ManagerState, ctx: WorkflowContext[Any, Any]) -> None:
        await self._next(state, ctx)

    async def on_turn(
        self, state: ManagerState, done: TurnDone, ctx: WorkflowContext[Any, Any]
    ) -> None:
        if self.history_reducer is not None:
            await self._reduce(ctx)
        if self._plain_round_robin:  # decided here: no state view, no coroutine, no choice
            # object (what RoundRobin.next_of chooses, routed as `_route` would)
            speaker = RoundRobin.after(state.last_speaker, self.participants)
            self.speak(state, speaker, ctx, reason=RoundRobin.reason)
            return
        await self._next(state, ctx)

    async def _next(self, state: ManagerState, ctx: WorkflowContext[Any, Any]) -> None:
        view = ChatState(
            self.history(ctx),
            self.participants,
            self.descriptions,
            state.last_speaker,
            state.streak,
            state.turn,
            state.correlation_id,
        )
        choice = await self.speaker.select(view, cancellation_token=ctx.cancellation_token)
        self._route(state, choice, ctx)

    def _route(
        self, state: ManagerState, choice: SpeakerChoice, ctx: WorkflowContext[Any, Any]
    ) -> None:
        self.speak(
            state,
            choice.speaker,
            ctx,
            reason=choice.reason,
            candidates=choice.candidates,
            fallback_used=choice.fallback_used,
            attempts=choice.attempts,
        )

    async def _reduce(self, ctx: WorkflowContext[Any, Any]) -> None:
        """Shrink what the channels mirror when the reducer shortens the history."""
        if self.history_reducer is None:
            return
        history = self.history(ctx)
        reduced = await self.history_reducer.reduce(history)
        if len(reduced) < len(history):
            await self.reduce_channels(reduced, ctx)


class GroupChat(Team):
    """Participants share one conversation; `speaker` picks who talks next.

    `speaker` is `RoundRobin()` (the default), a `Selector(...)`, or any function of the
    `ChatState` returning a participant's name. The run stops when `termination` fires or
    after `max_turns` turns, whichever comes first; with neither, it stops after 10,000
    workflow steps with an error, so give it one.
    """

    def __init__(
        self,
        participants: Sequence[Agent],
        *,
        speaker: SpeakerPolicy | SpeakerFunction | None = None,
        termination: TerminationCondition | None = None,
        max_turns: int | None = None,
        name: str = "group_chat",
        description: str = "",
        history_reducer: HistoryReducer | None = None,
        channels: Mapping[type[AgentThread], ChannelFactory] | None = None,
        sync_timeout: float = 60.0,
        guardrails: Iterable[Guardrail] = (),
    ) -> None:
        super().__init__(
            participants,
            name=name,
            description=description,
            channels=channels,
            sync_timeout=sync_timeout,
            guardrails=guardrails,
        )
        self.speaker = as_policy(speaker) if speaker is not None else RoundRobin()
        if termination is not None and not isinstance(termination, TerminationCondition):
            raise ConfigurationError(
                f"group chat {name!r}: termination must be a TerminationCondition, got "
                f"{termination!r}"
            )
        self.termination = termination
        self.max_turns = max_turns
        self.history_reducer = history_reducer
        _ = self.workflow  # build now: a bad definition fails here, not at the first run

    def _build_workflow(self) -> Workflow:
        manager = GroupChatManager(
            self.participant_names,
            speaker=self.speaker,
            descriptions={a.name: a.description for a in self.participants},
            termination=self.termination,
            max_turns=self.max_turns,
            history_reducer=self.history_reducer,
        )
        steps = 2 * self.max_turns + 8 if self.max_turns is not None else 10_000
        return self._star_workflow(manager, max_supersteps=steps)
