"""`Handoff` (a swarm): the agent that has the conversation passes it on with a tool call.

Each participant is offered ``transfer_to_<name>`` tools for the agents it may hand off to:
everyone else (a full mesh, the default) or the targets declared in ``handoffs=``. A call
ends that agent's turn (the tools are declared without a function, so the function loop
hands the call back instead of running it) and the manager gives the turn to the target.
What travels is a small handoff message, not a copy of the history: the summary the model
wrote, the source and target, and the run's correlation id, in the message's metadata
(read it with `handoff_of`). Every participant already reads the one shared history.

When the active agent answers without handing off, the team asks the user: the run stops
with a stop message whose source is ``"user_input"`` (the agent's answer is the question),
and the workflow waits on its human-in-the-loop request for the next task; ``run(reply)``
answers it and the turn goes back to the agent that asked (Agent Framework's and AutoGen's
default; ``return_to_previous=False`` sends it to the start agent instead). A target named
``"user"`` in ``handoffs=`` gives an agent a ``transfer_to_user`` tool that asks the user
the same way; with the `Handoff` termination condition for ``"user"`` it ends the run
instead (AutoGen's `HandoffTermination`). In autonomous mode (``autonomous=True``) an
agent that does not hand off simply goes on, up to ``max_turns`` turns per run.

A handoff is carried out (the transfer call's result, the handoff note, the new active
agent) before termination is checked, so a run that stops on the handoff's turn (any
condition, or ``max_turns``) leaves no call without a result, and the next `run()` starts
with the agent handed to, as in AutoGen's swarm; the same holds after a resume.

An agent may also declare its own ``transfer_to_<name>`` tools (tool specs in its options,
as AutoGen's ``handoffs=`` on an agent) for a name outside the team: such a handoff is
carried out like any other (its result, its note in the transcript), and the run stops
there, since nobody in the team can take the conversation (a `Handoff` termination
condition for that name says so first). As in AutoGen's swarm, the next run is refused
unless its task hands the conversation to a participant: a message whose metadata has
``handoff_to`` (`HANDOFF_TO_KEY`) naming one, which then takes the task.

Where the seeds differ: AutoGen's swarm carries the history in the handoff message when
asked to; here nothing is copied (one authoritative history is the design); both Agent
Framework and AutoGen return to the agent that asked, and so does this.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..agents import Agent, Guardrail
from ..core import (
    ConfigurationError,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    UsageError,
)
from ..models import ChatOptions, ToolSpec
from ..workflows import Workflow, WorkflowContext
from .manager import ManagerState, TeamManager
from .participant import ParticipantExecutor
from .result import StopMessage
from .team import Team
from .termination import TerminationCondition
from .turns import TurnDone

__all__ = [
    "HANDOFF_FROM_KEY",
    "HANDOFF_TO_KEY",
    "TRANSFER_PREFIX",
    "USER",
    "Handoff",
    "HandoffInfo",
    "HandoffManager",
    "Swarm",
    "handoff_of",
]

TRANSFER_PREFIX = "transfer_to_"
USER = "user"
HANDOFF_TO_KEY = "handoff_to"  # the key the `Handoff` termination condition reads
HANDOFF_FROM_KEY = "handoff_from"
_SUMMARY_KEY = "handoff_summary"
_CORRELATION_KEY = "correlation_id"
_ACTIVE = "handoff.active"
_HANDED = "handoff.handed"
"""Set while the active agent was handed the conversation but has not spoken yet."""
_OUTSIDE = "handoff.outside"
"""Set when the conversation was handed to a name outside the team (the next run's task
must hand it to a participant)."""
_USER_INPUT = "user_input"
_OUTSIDE_SOURCE = "handoff"
"""The stop source of a run whose conversation was handed outside the team."""
_DEFAULT_AUTONOMOUS_TURNS = 20


@dataclass(slots=True, frozen=True)
class HandoffInfo:
    """What a handoff message says: who handed over to whom, why, in which run."""

    source: str
    target: str
    summary: str
    correlation_id: str


def handoff_of(message: Message) -> HandoffInfo | None:
    """The handoff a message records, or None for any other message."""
    meta = message.metadata
    target = meta.get(HANDOFF_TO_KEY)
    if not isinstance(target, str):
        return None
    return HandoffInfo(
        str(meta.get(HANDOFF_FROM_KEY, "")),
        target,
        str(meta.get(_SUMMARY_KEY, "")),
        str(meta.get(_CORRELATION_KEY, "")),
    )


def _transfer_spec(target: str, description: str) -> ToolSpec:
    about = f" ({description})" if description else ""
    return ToolSpec(
        f"{TRANSFER_PREFIX}{target}",
        f"Hand the conversation over to {target}{about}. Give a short summary of what "
        f"{target} needs to know.",
        {
            "type": "object",
            "properties": {
                # bounded: a grammar-constrained small model may otherwise ramble to max_tokens
                "summary": {"type": "string", "maxLength": 100, "description": "for the next agent"}
            },
            "required": ["summary"],
        },
    )


def _summary(call: FunctionCallContent) -> str:
    args = call.arguments
    if isinstance(args, Mapping):
        value = args.get("summary", "")
        return value if isinstance(value, str) else str(value)
    return str(args) if args else ""


class HandoffManager(TeamManager):
    """Routes on transfer calls; asks the user (or, autonomous, goes on) when there is none."""

    def __init__(
        self,
        participants: Sequence[str],
        *,
        start: str,
        targets: Mapping[str, tuple[str, ...]],
        autonomous: bool,
        return_to_previous: bool,
        termination: TerminationCondition | None,
        max_turns: int | None,
        outside: Mapping[str, tuple[str, ...]] | None = None,
    ) -> None:
        super().__init__(participants, termination=termination, max_turns=max_turns)
        self.start = start
        self.targets = dict(targets)
        self.outside = dict(outside or {})
        """Names outside the team each agent may hand off to (its own transfer tools)."""
        self.autonomous = autonomous
        self.return_to_previous = return_to_previous
        self._decided: tuple[TurnDone, FunctionCallContent | None, str] | None = None
        """The turn `settle` last decided on, with its chosen call and summary, so that
        `on_turn` does not work the decision out again (matched by identity: another
        session's turn on this manager in between only costs working it out again)."""

    def validate_task(self, state: ManagerState | None, messages: Sequence[Message]) -> None:
        """Refuse a run that would go on with a conversation handed outside the team, or
        a task that hands it to someone who is not a participant (AutoGen's swarm refuses
        both the same way)."""
        names = list(self.participants)
        target = _handed_in(messages)
        if target is not None:
            if target not in self.participants:
                raise UsageError(
                    f"the task hands the conversation to {target!r}, which is not a "
                    f"participant of this handoff team; participants are {names}"
                )
            return
        outside = None if state is None else state.extra.get(_OUTSIDE)
        if isinstance(outside, str):
            raise UsageError(
                f"the conversation was handed to {outside!r}, which is not a participant of "
                f"this handoff team (participants are {names}); start the next run with a "
                f"task that hands it to one: Message('user', text, metadata={{"
                f"{HANDOFF_TO_KEY!r}: name}}), or reset() the session"
            )

    async def on_start(self, state: ManagerState, ctx: WorkflowContext[Any, Any]) -> None:
        active = state.extra.get(_ACTIVE)
        handed = state.extra.pop(_HANDED, False)
        target = _handed_in(self.history(ctx)[state.run_start :])
        if target is not None and target in self.participants:
            state.extra.pop(_OUTSIDE, None)
            active, reason = target, f"the task hands the conversation to {target}"
        elif handed and isinstance(active, str) and active in self.participants:
            reason = f"{active} was handed the conversation when the last run stopped"
        elif self.return_to_previous and isinstance(active, str) and active in self.participants:
            reason = f"the user answered; back to {active}, who asked"
        else:
            active, reason = self.start, "the start agent takes the task"
        state.extra[_ACTIVE] = active
        self.speak(state, active, ctx, reason=reason, candidates=[active])

    def _chosen(
        self, done: TurnDone
    ) -> tuple[list[FunctionCallContent], FunctionCallContent | None]:
        """The turn's transfer calls, and the one carried out (the first allowed)."""
        allowed = self.targets.get(done.speaker, ()) + self.outside.get(done.speaker, ())
        calls = [
            c for m in done.messages for c in m.function_calls if c.name.startswith(TRANSFER_PREFIX)
        ]
        return calls, next((c for c in calls if c.name[len(TRANSFER_PREFIX) :] in allowed), None)

    def settle(self, state: ManagerState, done: TurnDone, ctx: WorkflowContext[Any, Any]) -> None:
        """Carry the handoff out before termination is checked: every transfer call gets
        its result, the handoff note joins the history and the target becomes the active
        agent, so a run that stops on this turn leaves no call without a result and the
        next run starts with the target (AutoGen's swarm does the same)."""
        calls, chosen = self._chosen(done)
        summary = "" if chosen is None else _summary(chosen)
        self._decided = (done, chosen, summary)
        if not calls:
            return
        speaker = done.speaker
        self._close_calls(state, speaker, calls, chosen, ctx)
        if chosen is None:
            return
        target = chosen.name[len(TRANSFER_PREFIX) :]
        note = Message(
            "assistant",
            f"{speaker} handed the conversation to {target}: {summary}".rstrip(": "),
            author_name=speaker,
            metadata={
                HANDOFF_TO_KEY: target,
                HANDOFF_FROM_KEY: speaker,
                _SUMMARY_KEY: summary,
                _CORRELATION_KEY: state.correlation_id,
            },
        )
        self.publish(state, [note], ctx, source=speaker)
        if target == USER:
            state.extra[_ACTIVE] = speaker  # the user's answer goes back to who asked
        elif target not in self.participants:
            state.extra[_OUTSIDE] = target  # nobody here takes it: the next task must
        else:
            state.extra[_ACTIVE] = target
            state.extra[_HANDED] = True  # until the target is given the turn

    async def on_turn(
        self, state: ManagerState, done: TurnDone, ctx: WorkflowContext[Any, Any]
    ) -> None:
        speaker = done.speaker
        decided, self._decided = self._decided, None
        if decided is not None and decided[0] is done:
            chosen, summary = decided[1], decided[2]
        else:
            chosen = self._chosen(done)[1]
            summary = "" if chosen is None else _summary(chosen)
        if chosen is None:
            self._no_handoff(state, speaker, done, ctx)
            return
        target = chosen.name[len(TRANSFER_PREFIX) :]
        if target == USER:
            self._ask_user(state, speaker, summary or "the agent asks for your input", ctx)
            return
        if target not in self.participants:
            state.extra[_ACTIVE] = speaker
            why = f"{speaker} handed the conversation to {target}, who is not in the team"
            self.stop(state, StopMessage(why, _OUTSIDE_SOURCE), ctx)
            return
        state.extra.pop(_HANDED, None)
        self.speak(
            state,
            target,
            ctx,
            reason=f"{speaker} handed off: {summary}" if summary else f"{speaker} handed off",
            candidates=list(self.targets.get(speaker, ())),
        )

    def _close_calls(
        self,
        state: ManagerState,
        speaker: str,
        calls: list[FunctionCallContent],
        chosen: FunctionCallContent | None,
        ctx: WorkflowContext[Any, Any],
    ) -> None:
        """Give every transfer call its result, so the history never holds a call without
        one (chat APIs refuse such a history)."""
        results: list[FunctionResultContent] = []
        for c in calls:
            if c is chosen:
                results.append(
                    FunctionResultContent(
                        c.call_id, result=f"transferred to {c.name[len(TRANSFER_PREFIX) :]}"
                    )
                )
            elif chosen is not None:
                results.append(
                    FunctionResultContent(c.call_id, error="not run: one handoff a turn")
                )
            else:
                results.append(
                    FunctionResultContent(c.call_id, error=f"{speaker} may not hand off that way")
                )
        self.publish(
            state, [Message("tool", list(results), author_name=speaker)], ctx, source=speaker
        )

    def _no_handoff(
        self, state: ManagerState, speaker: str, done: TurnDone, ctx: WorkflowContext[Any, Any]
    ) -> None:
        if self.autonomous:
            self.speak(
                state,
                speaker,
                ctx,
                reason="autonomous mode: no handoff, the agent goes on",
                candidates=[speaker, *self.targets.get(speaker, ())],
            )
            return
        said = next((m.text for m in reversed(done.messages) if m.text), "")
        self._ask_user(state, speaker, said, ctx)

    def _ask_user(
        self, state: ManagerState, speaker: str, question: str, ctx: WorkflowContext[Any, Any]
    ) -> None:
        state.extra[_ACTIVE] = speaker
        self.stop(state, StopMessage(f"{speaker} asks the user: {question}", _USER_INPUT), ctx)


class Handoff(Team):
    """A swarm: agents pass the conversation with ``transfer_to_<name>`` tool calls.

    `start` (default: the first participant) takes each new task; `handoffs` maps an
    agent's name to the names it may hand off to (``"user"`` allowed); agents it does not
    name may hand off to nobody. Without `handoffs`, everyone may hand off to everyone
    else. See the module docstring for asking the user and autonomous mode.
    """

    def __init__(
        self,
        participants: Sequence[Agent],
        *,
        start: str | Agent | None = None,
        handoffs: Mapping[str, Sequence[str]] | None = None,
        autonomous: bool = False,
        return_to_previous: bool = True,
        termination: TerminationCondition | None = None,
        max_turns: int | None = None,
        name: str = "handoff",
        description: str = "",
        guardrails: Iterable[Guardrail] = (),
    ) -> None:
        super().__init__(participants, name=name, description=description, guardrails=guardrails)
        names = self.participant_names
        if USER in names:
            raise ConfigurationError(
                f"handoff team {name!r} has a participant named {USER!r}, the name a handoff "
                "uses to ask the user; rename that agent"
            )
        first = start.name if isinstance(start, Agent) else start
        if first is None:
            first = names[0]
        if first not in names:
            raise ConfigurationError(
                f"handoff team {name!r}: start agent {first!r} is not a participant; "
                f"participants are {names}"
            )
        self.start = first
        self.targets = _targets(name, names, handoffs)
        self._outside = _outside_targets(self.participants, names)
        if autonomous and max_turns is None:
            max_turns = _DEFAULT_AUTONOMOUS_TURNS
        self.autonomous = autonomous
        self.return_to_previous = return_to_previous
        self.termination = termination
        self.max_turns = max_turns
        _ = self.workflow  # build now: a bad definition fails here, not at the first run

    def tools_for(self, name: str) -> list[ToolSpec]:
        """The transfer tools the participant `name` is offered."""
        described = {a.name: a.description for a in self.participants}
        return [_transfer_spec(t, described.get(t, "")) for t in self.targets.get(name, ())]

    def _build_workflow(self) -> Workflow:
        manager = HandoffManager(
            self.participant_names,
            start=self.start,
            targets=self.targets,
            autonomous=self.autonomous,
            return_to_previous=self.return_to_previous,
            termination=self.termination,
            max_turns=self.max_turns,
            outside=self._outside,
        )
        # The shared history through the channels (each agent's thread is handed only what
        # is new), with each agent's transfer tools as its run options.
        executors = []
        for a in self.participants:
            transfers = self.tools_for(a.name)
            executor = ParticipantExecutor(a, options=_transfer_options(a, transfers))
            outside = self._outside.get(a.name, ())
            executor.team_tools = frozenset(
                [spec.name for spec in transfers] + [TRANSFER_PREFIX + t for t in outside]
            )
            executors.append(executor)
        steps = 2 * self.max_turns + 8 if self.max_turns is not None else 10_000
        return self._star_workflow(manager, participants=executors, max_supersteps=steps)


Swarm = Handoff
"""AutoGen's name for the same team."""


def _transfer_options(agent: Agent, specs: list[ToolSpec]) -> ChatOptions | None:
    """The transfer tools, after the tools the agent itself declares in its options (the
    run's tools replace the agent's, so those would be lost)."""
    if not specs:
        return None
    own = getattr(agent, "options", None)
    declared = list(own.tools or ()) if isinstance(own, ChatOptions) else []
    return ChatOptions(tools=[*declared, *specs])


def _targets(
    team: str, names: list[str], handoffs: Mapping[str, Sequence[str]] | None
) -> dict[str, tuple[str, ...]]:
    """Who may hand off to whom, checked: every name is a participant (or "user")."""
    if handoffs is None:
        out = {n: tuple(t for t in names if t != n) for n in names}
    else:
        if not isinstance(handoffs, Mapping):
            raise ConfigurationError(
                f"handoff team {team!r}: handoffs must map an agent's name to the names it "
                f"may hand off to, got {handoffs!r}"
            )
        out = {}
        for source, targets in handoffs.items():
            if source not in names:
                raise ConfigurationError(
                    f"handoff team {team!r}: handoffs names {source!r}, which is not a "
                    f"participant; participants are {names}"
                )
            if isinstance(targets, str):
                raise ConfigurationError(
                    f"handoff team {team!r}: the targets of {source!r} must be a list of "
                    f"names, got the string {targets!r}"
                )
            for t in targets:
                if t != USER and t not in names:
                    raise ConfigurationError(
                        f"handoff team {team!r}: {source!r} may hand off to {t!r}, which is "
                        f"not a participant (nor 'user'); participants are {names}"
                    )
                if t == source:
                    raise ConfigurationError(
                        f"handoff team {team!r}: {source!r} cannot hand off to itself"
                    )
            out[source] = tuple(dict.fromkeys(targets))
        out = {n: out.get(n, ()) for n in names}
    for targets in out.values():
        for t in targets:
            if len(TRANSFER_PREFIX) + len(t) > 64:
                raise ConfigurationError(
                    f"handoff team {team!r}: the tool name {TRANSFER_PREFIX + t!r} is longer "
                    "than 64 characters; give the agent a shorter name"
                )
    return out


def _outside_targets(agents: Sequence[Agent], names: list[str]) -> dict[str, tuple[str, ...]]:
    """Per agent, the names outside the team its own declared ``transfer_to_<name>`` tools
    hand off to (the tool specs in its options, as AutoGen's agent ``handoffs=``)."""
    out: dict[str, tuple[str, ...]] = {}
    for agent in agents:
        own = getattr(agent, "options", None)
        declared = own.tools or () if isinstance(own, ChatOptions) else ()
        targets = [
            spec.name[len(TRANSFER_PREFIX) :]
            for spec in declared
            if isinstance(spec, ToolSpec) and spec.name.startswith(TRANSFER_PREFIX)
        ]
        found = tuple(t for t in dict.fromkeys(targets) if t and t not in names and t != USER)
        if found:
            out[agent.name] = found
    return out


def _handed_in(messages: Sequence[Message]) -> str | None:
    """The target of the last message among `messages` that hands the conversation on."""
    for m in reversed(messages):
        target = m.metadata.get(HANDOFF_TO_KEY)
        if isinstance(target, str):
            return target
    return None
