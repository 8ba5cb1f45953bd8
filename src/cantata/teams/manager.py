"""`TeamManager`: the executor at the centre of every team's workflow.

It owns the authoritative history (the run's shared log `HISTORY_LOG`), starts each team
run (fresh termination state, a new correlation id, the task into the history), checks
termination after the task and after every turn, logs each routing decision as a
`RoutingEvent`, and when the run stops yields the `TaskResult` and asks for the next task
(a human-in-the-loop request of the workflow), so the team waits, checkpointed, until
`run()` is called again. A team type subclasses it and decides who works next in
`on_start` and `on_turn` by calling `speak` (or `stop`).
"""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..agents import Guardrail
from ..core import (
    ConfigurationError,
    DataContent,
    Message,
    SerializationError,
    Usage,
    from_json,
    new_id,
    register,
    to_json,
    tracing,
)
from ..workflows import Executor, WorkflowContext, handler, response_handler
from ._control import CONTROL_KEY, RunControl
from ._run_kwargs import (
    CHANNELS_KEY,
    OPTIONS_KEY,
    TEAM_KEY,
    channels_of,
    team_name_of,
    turn_options,
    turn_span,
)
from .channels import ChannelFactory
from .events import RoutingEvent, TeamMessageEvent, TeamStoppedEvent
from .result import StopMessage, TaskResult
from .termination import Observation, TerminationCondition
from .turn_guard import check_turn
from .turns import HISTORY_LOG, AwaitingTask, SpeakTurn, TeamTask, TurnDone, _authored

__all__ = [
    "CHANNELS_KEY",
    "MANAGER_ID",
    "OPTIONS_KEY",
    "TEAM_KEY",
    "ManagerState",
    "TeamManager",
    "channels_of",
    "team_name_of",
    "turn_options",
    "turn_span",
    "visible",
]

TRANSCRIPT_LOG = "team.transcript"
"""The run's shared log of the visible transcript (what `TaskResult.messages` shows)."""
ROUTING_LOG = "team.routing"
"""The run's shared log of routing decisions, kept only for runs that asked for them in
their `TaskResult` (``run(task, include_routing=True)``)."""
MANAGER_ID = "team.manager"
"""Executor id of a team's manager (agent names cannot contain a dot, so it never clashes)."""
STOP_SOURCE = "stop"
"""The source of the stop message of a run ended by `TeamSession.stop()`."""


@register(name="cantata.teams.ManagerState")
@dataclass(slots=True)
class ManagerState:
    """What a manager keeps in its run (checkpointed as its executor state)."""

    correlation_id: str = ""
    turn: int = 0
    """Turns taken in the current team run."""
    run_start: int = 0
    """Index in the history where the current team run began."""
    last_speaker: str | None = None
    streak: int = 0
    """How many turns in a row `last_speaker` took."""
    termination: dict[str, Any] = field(default_factory=dict)
    stopped: bool = True
    extra: dict[str, Any] = field(default_factory=dict)
    """Free JSON for a team type's own bookkeeping."""
    transcript_start: int = 0
    """Index in the visible transcript where the current team run began."""
    routing_start: int = -1
    """Index in the routing log where the current team run began (-1: the run keeps no
    routing log)."""
    usage: Usage = field(default_factory=Usage)
    """The token usage of the current team run: the sum of its turns' (its agents')."""

    def __deepcopy__(self, memo: dict[int, Any]) -> ManagerState:
        # A run hands each handler its own copy of the state: copy only what can change
        # in place (the JSON dicts), which keeps a turn cheap.
        return ManagerState(
            self.correlation_id,
            self.turn,
            self.run_start,
            self.last_speaker,
            self.streak,
            copy.deepcopy(self.termination, memo) if self.termination else {},
            self.stopped,
            copy.deepcopy(self.extra, memo) if self.extra else {},
            self.transcript_start,
            self.routing_start,
            self.usage,  # replaced, never changed in place
        )

    def _private(self) -> ManagerState:
        """The copy a handler may change (what `__deepcopy__` makes, without its memo)."""
        return self.__deepcopy__({})


def visible(turn: Sequence[Message]) -> list[Message]:
    """A turn's messages as the transcript shows them: tool calls and results are hidden
    unless they are the turn's last message."""
    out: list[Message] = []
    last = len(turn) - 1
    for i, m in enumerate(turn):
        if i == last or m.text or any(type(c) is DataContent for c in m.contents):
            out.append(m)
    return out


class TeamManager(Executor):
    """Base of a team's manager executor. Subclasses implement `on_start` and `on_turn`.

    `participants` are the participant executor ids (the agents' names); the manager sends
    the turn token to one of them with `speak`, and stops the run with `stop`.
    """

    def __init__(
        self,
        participants: Sequence[str],
        *,
        termination: TerminationCondition | None = None,
        max_turns: int | None = None,
        id: str = MANAGER_ID,
    ) -> None:
        super().__init__(id)
        if max_turns is not None and (
            isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1
        ):
            raise ConfigurationError(f"max_turns must be a positive integer, got {max_turns!r}")
        if termination is not None and not isinstance(termination, TerminationCondition):
            raise ConfigurationError(
                f"termination must be a TerminationCondition, got {termination!r}"
            )
        self.participants = tuple(participants)
        self.termination = termination
        self.max_turns = max_turns
        self.channel_factories: Mapping[str, ChannelFactory] | None = None
        """The team's channel factories (its team sets them), so that the manager reaches
        the session's channels through `channels_of` on a copying runtime too."""
        self.sync_timeout = 60.0
        self.guardrails: tuple[Guardrail, ...] = ()
        """Checks on each turn's message (the team sets them: see `turn_guard.py`)."""

    # -- hooks for team types ----------------------------------------------------------

    async def on_start(self, state: ManagerState, ctx: WorkflowContext[Any, Any]) -> None:
        """A team run started (its task is in the history): route the first turn."""
        raise NotImplementedError

    async def on_turn(
        self, state: ManagerState, done: TurnDone, ctx: WorkflowContext[Any, Any]
    ) -> None:
        """A participant finished its turn (its messages are in the history): route on."""
        raise NotImplementedError

    # -- what team types call -----------------------------------------------------------

    def history(self, ctx: WorkflowContext[Any, Any]) -> list[Message]:
        """The whole authoritative history, tool traffic included."""
        entries: list[Message] = ctx.log(HISTORY_LOG, shared=True).entries
        return entries

    async def reduce_channels(
        self, reduced: Sequence[Message], ctx: WorkflowContext[Any, Any]
    ) -> None:
        """The history was reduced to `reduced`: every channel mirrors that from now on
        (the authoritative history stays whole). In process the channels are reset here;
        elsewhere the reduction is written to the shared log `REDUCED_LOG`, from which each
        channel resets when it is next read."""
        await channels_of(ctx, self).apply_reduction(reduced, ctx)

    def publish(
        self,
        state: ManagerState,
        messages: Sequence[Message],
        ctx: WorkflowContext[Any, Any],
        *,
        source: str = "user",
        channel: str = "",
    ) -> None:
        """Add messages to the history, and the visible ones to the transcript (tool traffic
        only when it ends the batch); broadcast them to every channel but `channel` (the
        one they were written on)."""
        if not messages:
            return
        ctx.log(HISTORY_LOG, shared=True).extend(
            messages if type(messages) is list else list(messages)
        )
        shown = visible(messages)
        ctx.log(TRANSCRIPT_LOG, shared=True).extend(shown)
        if ctx.streaming:
            for m in shown:
                ctx.add_event(TeamMessageEvent(m, m.author_name or source))
        channels_of(ctx, self).publish(messages, exclude=channel)

    def speak(
        self,
        state: ManagerState,
        speaker: str,
        ctx: WorkflowContext[Any, Any],
        *,
        reason: str,
        candidates: Sequence[str] | None = None,
        fallback_used: bool = False,
        attempts: Sequence[str] = (),
    ) -> None:
        """Give the turn to `speaker`, logging the decision as a `RoutingEvent`."""
        if speaker not in self.participants:
            raise ConfigurationError(
                f"the team routed to {speaker!r}, which is not a participant; participants "
                f"are {list(self.participants)}"
            )
        state.streak = state.streak + 1 if speaker == state.last_speaker else 1
        state.last_speaker = speaker
        state.turn += 1
        ctx.set_executor_state(state)
        if tracing.enabled():
            team = team_name_of(ctx)
            attributes = {
                "cantata.route.candidates": list(
                    candidates if candidates is not None else self.participants
                ),
                "cantata.route.choice": speaker,
                "cantata.route.reason": reason,
                "cantata.route.fallback": fallback_used,
                "cantata.correlation_id": state.correlation_id,
            }
            with tracing.span(f"route {team}", attributes):
                pass  # the decision is made: the span records it
        if ctx.streaming or state.routing_start >= 0:
            decision = RoutingEvent(
                state.correlation_id,
                list(candidates if candidates is not None else self.participants),
                speaker,
                reason,
                fallback_used,
                state.turn,
                list(attempts),
            )
            if ctx.streaming:
                ctx.add_event(decision)
            if state.routing_start >= 0:
                ctx.log(ROUTING_LOG, shared=True).append(decision)
        ctx.send_message(SpeakTurn(state.correlation_id, state.turn), target_id=speaker)

    def stop(self, state: ManagerState, stop: StopMessage, ctx: WorkflowContext[Any, Any]) -> None:
        """End the team run: yield its `TaskResult`, then wait for the next task."""
        state.stopped = True
        ctx.set_executor_state(state)
        shown = ctx.log(TRANSCRIPT_LOG, shared=True).entries[state.transcript_start :]
        routing: list[RoutingEvent] = []
        if state.routing_start >= 0:
            routing = ctx.log(ROUTING_LOG, shared=True).entries[state.routing_start :]
        ctx.add_event(TeamStoppedEvent(stop, state.correlation_id))
        ctx.yield_output(TaskResult(shown, stop, routing))
        ctx.request_info(AwaitingTask(state.correlation_id))

    # -- the workflow's handlers ---------------------------------------------------------

    def state_of(self, ctx: WorkflowContext[Any, Any]) -> ManagerState:
        """This run's manager state, a copy of its own (give it back through `speak`,
        `stop`, or ``ctx.set_executor_state``): for response handlers of team types."""
        state = ctx._committed_executor_state()
        if state is None:
            return ManagerState()
        if type(state) is ManagerState:  # the usual case: copied here, not by deepcopy
            return state._private() if ctx._state_is_committed() else state
        state = ctx.get_executor_state()
        if not isinstance(state, ManagerState):
            raise ConfigurationError(
                f"manager {self.id!r} found executor state of type {type(state).__name__}"
            )
        return state

    _state = state_of

    @handler(output=SpeakTurn, workflow_output=TaskResult)
    async def take_task(self, task: TeamTask, ctx: WorkflowContext[Any, Any]) -> None:
        """The first task of a session."""
        await self._begin(task, ctx)

    @response_handler(output=SpeakTurn, workflow_output=TaskResult)
    async def take_next_task(
        self, request: AwaitingTask, task: TeamTask, ctx: WorkflowContext[Any, Any]
    ) -> None:
        """The task of a later run (empty: continue the conversation)."""
        await self._begin(task, ctx)

    async def _begin(self, task: TeamTask, ctx: WorkflowContext[Any, Any]) -> None:
        control: RunControl | None = ctx.kwargs.get(CONTROL_KEY)
        if control is None or control.due():
            await self._boundary(control, ctx)
        state = self._state(ctx)
        if task.carry is not None:
            self.take_carry(state, task.carry)
        if task.context:
            # a conversation held elsewhere (a served team's thread): history, not this run
            self.publish(state, _authored_users(task.context), ctx)
        state.correlation_id = new_id()
        state.turn = 0
        state.usage = Usage()
        state.run_start = len(ctx.log(HISTORY_LOG, shared=True))
        state.transcript_start = len(ctx.log(TRANSCRIPT_LOG, shared=True))
        state.routing_start = len(ctx.log(ROUTING_LOG, shared=True)) if task.include_routing else -1
        state.stopped = False
        if self.termination is not None:
            state.termination = self.termination.start(time.time())
        messages = _authored(task.messages, "user")
        self.publish(state, messages, ctx)
        ctx.set_executor_state(state)
        if await self._should_stop(state, messages, Usage(), ctx, control):
            return
        await self.on_start(state, ctx)

    @handler(output=SpeakTurn, workflow_output=TaskResult)
    async def take_turn(self, done: TurnDone, ctx: WorkflowContext[Any, Any]) -> None:
        """A participant's turn: into the history (carried out: see `settle`), then
        termination, then the next turn."""
        control: RunControl | None = ctx.kwargs.get(CONTROL_KEY)
        if control is None or control.due():  # inline: most boundaries only read the clock
            await self._boundary(control, ctx)
        state = self._state(ctx)
        if state.stopped:
            return  # a turn that ended after the run stopped (a fan-out's other replies)
        if self.guardrails:  # before the turn joins the history (see turn_guard.py)
            checked = await check_turn(self.guardrails, done)
            if isinstance(checked, StopMessage):
                self.stop(state, checked, ctx)
                return
            done = checked
        self.publish(state, done.messages, ctx, source=done.speaker, channel=done.channel)
        state.usage = state.usage + done.usage
        if self._settles:
            self.settle(state, done, ctx)
        ctx.set_executor_state(state)
        if await self._should_stop(state, done.messages, done.usage, ctx, control):
            return
        await self.on_turn(state, done, ctx)

    def validate_task(self, state: ManagerState | None, messages: Sequence[Message]) -> None:
        """Refuse a team run on `messages` before it starts (raise a `UsageError`), given
        the state the last run left (None before the first): the session asks it at every
        `run()`. Nothing by default; a handoff team refuses to go on with a conversation
        handed outside the team (AutoGen's `validate_group_state`)."""

    def carry(self, state: ManagerState) -> dict[str, Any]:
        """What of `state` outlives a team run (who spoke last and how often in a row,
        the team type's bookkeeping: a handoff's active agent, magentic's ledger), as
        JSON: a served team keeps it with its conversation, and the next run there takes
        it up with `take_carry`, so it goes on as the next `run()` of one session would.
        What is per run (turn count, termination, usage) starts afresh either way."""
        return {
            "last_speaker": state.last_speaker,
            "streak": state.streak,
            "extra": to_json(state.extra),
        }

    def take_carry(self, state: ManagerState, carry: dict[str, Any]) -> None:
        """Take up what `carry` wrote (a carry this team cannot read is a
        `SerializationError`; a speaker who is no participant here is left out)."""
        speaker = carry.get("last_speaker")
        streak = carry.get("streak")
        extra = from_json(carry.get("extra") or {})
        if not isinstance(extra, dict):
            raise SerializationError(f"a team's carried state must be an object, got {extra!r}")
        if isinstance(speaker, str) and speaker in self.participants:
            state.last_speaker = speaker
            state.streak = streak if type(streak) is int and streak > 0 else 1
        state.extra = extra

    def settle(self, state: ManagerState, done: TurnDone, ctx: WorkflowContext[Any, Any]) -> None:
        """Carry out what the turn did that must hold even if the run stops on it, before
        termination is checked (a handoff: its tool result, its note, the new active
        agent). Routing the next turn waits for `on_turn`. Nothing by default (and a team
        type that does not override it is not called at all)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._settles = cls.settle is not TeamManager.settle

    _settles: bool = False
    """Whether the team type overrides `settle` (decided once per class, not per turn)."""

    async def _boundary(self, control: RunControl | None, ctx: WorkflowContext[Any, Any]) -> None:
        """A due turn boundary (see `RunControl.due`; on a copying runtime, which has no
        control object, every one): give the event loop its turn, so a team whose agents
        never suspend does not starve the process's other tasks and a cancellation set by
        one of them lands at the next superstep, and wait here while the session is
        paused."""
        await asyncio.sleep(0)
        if control is not None and control.paused:
            await control.wait(ctx.cancellation_token)

    async def _should_stop(
        self,
        state: ManagerState,
        messages: Sequence[Message],
        usage: Usage,
        ctx: WorkflowContext[Any, Any],
        control: RunControl | None,
    ) -> bool:
        if self.termination is not None:
            seen = Observation(messages, usage, time.time())
            stop = await self.termination.check(state.termination, seen)
            if stop is not None:
                self.stop(state, stop, ctx)
                return True
        if self.max_turns is not None and state.turn >= self.max_turns:
            self.stop(
                state, StopMessage(f"maximum of {self.max_turns} turns reached", "max_turns"), ctx
            )
            return True
        if control is not None and control.stopping:
            self.stop(state, StopMessage("stopped by stop()", STOP_SOURCE), ctx)
            return True
        return False


def _authored_users(messages: Sequence[Message]) -> list[Message]:
    """A held conversation's messages as the history keeps them: a user's without an
    author shown as ``"user"``'s, the others as they are."""
    return [
        m.copy(author_name="user") if m.role == "user" and not m.author_name else m
        for m in messages
    ]
