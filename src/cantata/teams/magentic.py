"""`Magentic`: a manager plans, delegates and checks progress (AutoGen's Magentic-One).

``Magentic(client, [file_reader, coder])``: when a task arrives, the manager's model writes
the task ledger (facts, then a plan: steps, each for one participant), optionally sends it
for human review, then works in rounds. Each round it asks its model for the progress
ledger (is the request satisfied, are we in a loop, is progress being made, who speaks
next, with what instruction; all structured output, the next speaker constrained to the
participants' names) and gives the turn to that participant with the instruction. A round
judged looping or without progress adds to a stall counter (a good one takes one off);
past `max_stalls` the manager re-plans (new facts and plan, counter cleared), at most
`max_resets` times. The run stops with the final answer when the request is satisfied, or
at `max_rounds`, or when the re-plans run out, or when a termination condition fires.

Where the seeds differ: Agent Framework's manager may answer without delegating, as may
this one. Two guards serve small models (both off by default): ``max_repeats=n`` leaves a
participant that spoke n turns in a row out of the next-speaker enum, so the choice moves
on; ``require_plan_done=True`` accepts "satisfied" only once every participant the plan
names has spoken in the run, so a model cannot declare the task done before any work.
``compact_ledgers=True`` asks for answers without reasons (and fewer, shorter facts): a
third of the tokens, for a local model. An invalid ledger (on models without
grammar-constrained output) is asked for again `ledger_retries` times; then the next
participant in order takes the turn with the current plan step (logged as a fallback,
and counted as a stall).

Plan review is a human-in-the-loop request of the workflow: the run pauses with a
`PlanReview` pending (`run_stream` yields its `RequestInfoEvent`); answer it with
``session.send_responses({request_id: PlanReviewAnswer(...)})``: approve, give a revised
plan, or comment (the manager re-plans with the comments and asks again, at most
`max_plan_reviews` times, then goes ahead).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..agents import Agent, ChatAgent, Guardrail
from ..core import ConfigurationError, Message, register
from ..models import ChatClient, ChatOptions
from ..workflows import Workflow, WorkflowContext, response_handler
from ._magentic_ledger import (
    LedgerAnswer,
    PlanStep,
    ProgressLedger,
    TaskLedger,
    ask_facts,
    ask_final_answer,
    ask_plan,
    ask_progress,
)
from .events import TeamEvent
from .manager import ManagerState, TeamManager, visible
from .result import StopMessage, TaskResult
from .team import Team
from .termination import TerminationCondition
from .turns import SpeakTurn, TurnDone

__all__ = [
    "Magentic",
    "MagenticLedgerEvent",
    "MagenticManager",
    "PlanReview",
    "PlanReviewAnswer",
    "PlanStep",
    "ProgressLedger",
    "TaskLedger",
]

_KEY = "magentic"


@register(name="cantata.teams.PlanReview")
@dataclass(slots=True)
class PlanReview:
    """The request a person answers before work starts: the task ledger to approve."""

    ledger: TaskLedger
    review: int = 1
    """1 for the first plan, 2 for the plan revised after the first comments, ..."""


@register(name="cantata.teams.PlanReviewAnswer")
@dataclass(slots=True)
class PlanReviewAnswer:
    """A person's answer to a `PlanReview`: approve it, replace the plan, or comment."""

    approved: bool = True
    comments: str = ""
    plan: list[PlanStep] | None = None
    """A plan to use instead (taken as approved)."""


@register(name="cantata.teams.MagenticLedgerEvent")
@dataclass(slots=True)
class MagenticLedgerEvent(TeamEvent):
    """The manager wrote a ledger: the task ledger (`task`) or a round's `progress`."""

    correlation_id: str
    round: int
    task: TaskLedger | None = None
    progress: ProgressLedger | None = None
    fallback_used: bool = False
    attempts: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Limits:
    max_rounds: int
    max_stalls: int
    max_resets: int
    max_plan_reviews: int
    ledger_retries: int


class MagenticManager(TeamManager):
    """The ledger-keeping manager; its bookkeeping lives in ``state.extra["magentic"]``."""

    def __init__(
        self,
        participants: Sequence[str],
        *,
        client: ChatClient,
        descriptions: Sequence[tuple[str, str]],
        limits: _Limits,
        plan_review: bool,
        require_plan_done: bool,
        options: ChatOptions,
        name: str,
        termination: TerminationCondition | None,
        max_repeats: int | None = None,
        compact: bool = False,
    ) -> None:
        super().__init__(participants, termination=termination)
        self.max_repeats = max_repeats
        self.compact = compact
        self.client = client
        self.descriptions = list(descriptions)
        self.limits = limits
        self.plan_review = plan_review
        self.require_plan_done = require_plan_done
        self.options = options
        self.name = name

    # -- bookkeeping ---------------------------------------------------------------------

    def _book(self, state: ManagerState) -> dict[str, Any]:
        book: dict[str, Any] = state.extra.setdefault(_KEY, {})
        return book

    def _ledger(self, state: ManagerState) -> TaskLedger:
        ledger = self._book(state).get("ledger")
        if not isinstance(ledger, TaskLedger):
            raise ConfigurationError(f"magentic manager {self.name!r} has no task ledger yet")
        return ledger

    def _transcript(self, state: ManagerState, ctx: WorkflowContext[Any, Any]) -> list[Message]:
        """The run so far as the manager's model reads it: text only, each line signed."""
        out: list[Message] = []
        for m in visible(self.history(ctx)[state.run_start :]):
            if not m.text:
                continue
            mine = m.author_name == self.name
            text = m.text if mine else f"{m.author_name or m.role}: {m.text}"
            out.append(Message("assistant" if mine else "user", text))
        return out

    def _say(self, state: ManagerState, text: str, ctx: WorkflowContext[Any, Any]) -> None:
        self.publish(state, [Message("assistant", text, author_name=self.name)], ctx)

    # -- planning ------------------------------------------------------------------------

    async def on_start(self, state: ManagerState, ctx: WorkflowContext[Any, Any]) -> None:
        task = "\n".join(m.text for m in self.history(ctx)[state.run_start :] if m.text)
        book = self._book(state)
        if not task and isinstance(book.get("ledger"), TaskLedger):
            await self._round(state, ctx)  # no new task: go on with the ledger we have
            return
        book.update(round=0, stalls=0, resets=0, reviews=0)
        await self._plan(state, TaskLedger(task), ctx)
        if self.plan_review:
            self._ask_review(state, ctx)
            return
        self._say(state, self._ledger(state).as_text(), ctx)
        await self._round(state, ctx)

    async def _plan(
        self,
        state: ManagerState,
        ledger: TaskLedger,
        ctx: WorkflowContext[Any, Any],
        *,
        comments: str = "",
    ) -> None:
        history = self._transcript(state, ctx) if ledger.facts or comments else []
        token = ctx.cancellation_token
        retries = self.limits.ledger_retries
        if not comments:
            facts = await ask_facts(
                self.client, ledger.task, self.descriptions, history=history,
                compact=self.compact, retries=retries, options=self.options, token=token,
            )  # fmt: skip
            ledger = TaskLedger(ledger.task, list(facts.value), ledger.plan)
        plan = await ask_plan(
            self.client, ledger, self.descriptions, history=history, comments=comments,
            retries=retries, options=self.options, token=token,
        )  # fmt: skip
        ledger = TaskLedger(ledger.task, ledger.facts, list(plan.value))
        self._book(state)["ledger"] = ledger
        ctx.set_executor_state(state)
        ctx.add_event(
            MagenticLedgerEvent(
                state.correlation_id,
                self._book(state).get("round", 0),
                task=ledger,
                fallback_used=plan.fallback_used,
                attempts=plan.attempts,
            )
        )

    def _ask_review(self, state: ManagerState, ctx: WorkflowContext[Any, Any]) -> None:
        book = self._book(state)
        book["reviews"] = int(book.get("reviews", 0)) + 1
        ctx.set_executor_state(state)
        ctx.request_info(PlanReview(self._ledger(state), book["reviews"]))

    @response_handler(output=SpeakTurn, workflow_output=TaskResult)
    async def take_review(
        self, request: PlanReview, answer: PlanReviewAnswer, ctx: WorkflowContext[Any, Any]
    ) -> None:
        """A person reviewed the plan: go ahead, take their plan, or re-plan with comments."""
        state = self._state(ctx)
        ledger = self._ledger(state)
        if answer.plan is not None:
            bad = [s.agent for s in answer.plan if s.agent not in self.participants]
            if bad:
                raise ConfigurationError(
                    f"the reviewed plan names {bad}, who are not participants of "
                    f"{self.name!r}; participants are {list(self.participants)}"
                )
            self._book(state)["ledger"] = TaskLedger(ledger.task, ledger.facts, list(answer.plan))
        elif not answer.approved:
            await self._plan(state, ledger, ctx, comments=answer.comments or "revise the plan")
            if int(self._book(state).get("reviews", 0)) < self.limits.max_plan_reviews:
                self._ask_review(state, ctx)
                return
        ctx.set_executor_state(state)
        self._say(state, self._ledger(state).as_text(), ctx)
        await self._round(state, ctx)

    # -- the rounds ----------------------------------------------------------------------

    async def on_turn(
        self, state: ManagerState, done: TurnDone, ctx: WorkflowContext[Any, Any]
    ) -> None:
        spoken = self._book(state).setdefault("spoken", [])
        if done.speaker not in spoken:
            spoken.append(done.speaker)
        await self._round(state, ctx)

    async def _round(self, state: ManagerState, ctx: WorkflowContext[Any, Any]) -> None:
        book = self._book(state)
        book["round"] = int(book.get("round", 0)) + 1
        ctx.set_executor_state(state)
        if book["round"] > self.limits.max_rounds:
            limit = self.limits.max_rounds
            self.stop(state, StopMessage(f"maximum of {limit} rounds reached", "max_rounds"), ctx)
            return
        ledger = self._ledger(state)
        answer = await ask_progress(
            self.client, ledger, self.descriptions, self._transcript(state, ctx),
            speakers=self._speakers(state), compact=self.compact,
            retries=self.limits.ledger_retries, options=self.options,
            token=ctx.cancellation_token,
        )  # fmt: skip
        progress = answer.value if isinstance(answer.value, ProgressLedger) else None
        ctx.add_event(
            MagenticLedgerEvent(
                state.correlation_id,
                book["round"],
                progress=progress,
                fallback_used=answer.fallback_used,
                attempts=answer.attempts,
            )
        )
        if progress is not None and progress.is_request_satisfied and self._plan_done(state):
            await self._finish(state, ctx)
            return
        stalled = progress is None or progress.is_in_loop or not progress.is_progress_being_made
        stalls = int(book.get("stalls", 0))
        book["stalls"] = stalls + 1 if stalled else max(0, stalls - 1)
        if book["stalls"] > self.limits.max_stalls:
            await self._replan(state, ctx)
            return
        self._delegate(state, progress, answer, ctx)

    def _speakers(self, state: ManagerState) -> list[str]:
        """Who may be named next: everyone, but the last speaker once it has spoken
        `max_repeats` turns in a row (the schema leaves it out, so the choice moves on)."""
        names = list(self.participants)
        last = state.last_speaker
        if self.max_repeats is not None and len(names) > 1 and state.streak >= self.max_repeats:
            names = [n for n in names if n != last]
        return names

    def _plan_done(self, state: ManagerState) -> bool:
        if not self.require_plan_done:
            return True
        spoken = set(self._book(state).get("spoken", []))
        return all(step.agent in spoken for step in self._ledger(state).plan)

    async def _replan(self, state: ManagerState, ctx: WorkflowContext[Any, Any]) -> None:
        book = self._book(state)
        book["resets"] = int(book.get("resets", 0)) + 1
        book["stalls"] = 0
        if book["resets"] > self.limits.max_resets:
            resets = self.limits.max_resets
            stop = StopMessage(f"no progress after {resets} re-plans; giving up", "max_stalls")
            self.stop(state, stop, ctx)
            return
        await self._plan(state, self._ledger(state), ctx)
        self._say(state, "New plan.\n" + self._ledger(state).as_text(), ctx)
        await self._round(state, ctx)

    def _delegate(
        self,
        state: ManagerState,
        progress: ProgressLedger | None,
        answer: LedgerAnswer,
        ctx: WorkflowContext[Any, Any],
    ) -> None:
        if progress is not None:
            speaker, instruction = progress.next_speaker, progress.instruction
            reason = progress.reasons.get("next_speaker", "the progress ledger chose")
        else:
            speaker, instruction = self._fallback(state)
            reason = "no valid progress ledger: the next participant takes the next step"
        self._say(state, f"{speaker}: {instruction}", ctx)
        self.speak(
            state,
            speaker,
            ctx,
            reason=reason,
            fallback_used=progress is None,
            attempts=answer.attempts,
        )

    def _fallback(self, state: ManagerState) -> tuple[str, str]:
        """Round robin after the last speaker; the instruction is that agent's plan step."""
        names = list(self.participants)
        last = state.last_speaker
        speaker = names[(names.index(last) + 1) % len(names)] if last in names else names[0]
        ledger = self._ledger(state)
        step = next((s.action for s in ledger.plan if s.agent == speaker), ledger.task)
        return speaker, step

    async def _finish(self, state: ManagerState, ctx: WorkflowContext[Any, Any]) -> None:
        final = await ask_final_answer(
            self.client, self._ledger(state), self._transcript(state, ctx),
            retries=self.limits.ledger_retries, options=self.options,
            token=ctx.cancellation_token,
        )  # fmt: skip
        self._say(state, str(final.value), ctx)
        self.stop(state, StopMessage("the request is satisfied", "satisfied"), ctx)


class Magentic(Team):
    """A planning manager and its specialists; see the module docstring.

    `manager` is the manager's model: a `ChatClient`, or a `ChatAgent` whose client is
    used. `manager_options` apply to every ledger request (e.g. ``max_tokens``).
    """

    def __init__(
        self,
        manager: ChatClient | ChatAgent,
        participants: Sequence[Agent],
        *,
        max_rounds: int = 20,
        max_stalls: int = 3,
        max_resets: int = 2,
        plan_review: bool = False,
        max_plan_reviews: int = 3,
        ledger_retries: int = 2,
        require_plan_done: bool = False,
        max_repeats: int | None = None,
        compact_ledgers: bool = False,
        manager_options: ChatOptions | None = None,
        manager_name: str = "orchestrator",
        termination: TerminationCondition | None = None,
        name: str = "magentic",
        description: str = "",
        guardrails: Iterable[Guardrail] = (),
    ) -> None:
        super().__init__(participants, name=name, description=description, guardrails=guardrails)
        client = manager.client if isinstance(manager, ChatAgent) else manager
        if not isinstance(client, ChatClient):
            raise ConfigurationError(
                f"magentic team {name!r}: manager must be a ChatClient or a ChatAgent, got "
                f"{manager!r}"
            )
        for label, value, low in (
            ("max_rounds", max_rounds, 1),
            ("max_stalls", max_stalls, 0),
            ("max_resets", max_resets, 0),
            ("max_plan_reviews", max_plan_reviews, 1),
            ("ledger_retries", ledger_retries, 0),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigurationError(
                    f"magentic team {name!r}: {label} must be an int >= {low}, got {value!r}"
                )
        if max_repeats is not None and (
            isinstance(max_repeats, bool) or not isinstance(max_repeats, int) or max_repeats < 1
        ):
            raise ConfigurationError(
                f"magentic team {name!r}: max_repeats must be None or an int >= 1, got "
                f"{max_repeats!r}"
            )
        if manager_name in self.participant_names:
            raise ConfigurationError(
                f"magentic team {name!r}: a participant is named {manager_name!r}, like the "
                "manager; pass another manager_name="
            )
        self.client = client
        self.limits = _Limits(max_rounds, max_stalls, max_resets, max_plan_reviews, ledger_retries)
        self.plan_review = plan_review
        self.require_plan_done = require_plan_done
        self.max_repeats = max_repeats
        self.compact_ledgers = compact_ledgers
        self.manager_options = manager_options or ChatOptions()
        self.manager_name = manager_name
        self.termination = termination
        _ = self.workflow  # build now: a bad definition fails here, not at the first run

    def _build_workflow(self) -> Workflow:
        manager = MagenticManager(
            self.participant_names,
            client=self.client,
            descriptions=[(a.name, a.description) for a in self.participants],
            limits=self.limits,
            plan_review=self.plan_review,
            require_plan_done=self.require_plan_done,
            options=self.manager_options,
            name=self.manager_name,
            termination=self.termination,
            max_repeats=self.max_repeats,
            compact=self.compact_ledgers,
        )
        steps = 2 * self.limits.max_rounds + 16
        return self._star_workflow(manager, max_supersteps=steps)
