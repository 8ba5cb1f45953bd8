"""The two ledgers of a magentic manager, as structured output of its model.

The task ledger holds what is known (facts) and what to do (plan: steps, each for one
participant). The progress ledger is asked for at every round: is the request satisfied,
are we looping, is progress being made, who speaks next and with what instruction. Its
schema names the participants as an enum, so a grammar-constrained model (the local one)
can only name a real participant; any other model's answer is validated, asked for again
a bounded number of times, and then replaced by a fallback the manager chooses.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, WithJsonSchema, create_model

from ..core import (
    CancellationToken,
    ConfigurationError,
    Message,
    ModelError,
    Usage,
    register,
)
from ..models import ChatClient, ChatOptions

__all__ = [
    "LedgerAnswer",
    "PlanStep",
    "ProgressLedger",
    "TaskLedger",
    "ask_facts",
    "ask_final_answer",
    "ask_plan",
    "ask_progress",
]


@register(name="cantata.teams.PlanStep")
@dataclass(slots=True)
class PlanStep:
    """One step of a plan: which participant does what."""

    agent: str
    action: str


@register(name="cantata.teams.TaskLedger")
@dataclass(slots=True)
class TaskLedger:
    """What the manager knows (facts) and intends (plan); rewritten when it re-plans."""

    task: str
    facts: list[str] = field(default_factory=list)
    plan: list[PlanStep] = field(default_factory=list)

    def as_text(self) -> str:
        """The ledger as the manager shows it to participants and to people."""
        facts = "\n".join(f"- {f}" for f in self.facts) or "- (none yet)"
        steps = "\n".join(f"{i}. {s.agent}: {s.action}" for i, s in enumerate(self.plan, 1))
        return f"Task: {self.task}\nFacts:\n{facts}\nPlan:\n{steps or '(no plan)'}"


@register(name="cantata.teams.ProgressLedger")
@dataclass(slots=True)
class ProgressLedger:
    """One round's judgement of the manager, with a reason for each answer."""

    is_request_satisfied: bool
    is_in_loop: bool
    is_progress_being_made: bool
    next_speaker: str
    instruction: str
    reasons: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class LedgerAnswer:
    """A ledger the model produced, the usage it cost, and the invalid answers before it."""

    value: Any
    usage: Usage
    attempts: list[str]
    fallback_used: bool = False


# Strings whose schema has a maxLength (a grammar-constrained model stops there) that
# validation does not enforce (other models are not refused for a long answer).
_Brief = Annotated[str, WithJsonSchema({"type": "string", "maxLength": 80})]
_Short = Annotated[str, WithJsonSchema({"type": "string", "maxLength": 120})]
_Long = Annotated[str, WithJsonSchema({"type": "string", "maxLength": 400})]


class _Facts(BaseModel):
    model_config = ConfigDict(extra="forbid")
    facts: list[_Short] = Field(max_length=6)


class _FewFacts(_Facts):
    facts: list[_Brief] = Field(max_length=3)


class _Final(BaseModel):
    model_config = ConfigDict(extra="forbid")
    answer: _Long


def _plan_model(names: Sequence[str]) -> type[BaseModel]:
    agent_type: Any = Literal[tuple(names)]
    step = create_model(
        "PlanStepOut",
        __config__=ConfigDict(extra="forbid"),
        agent=(agent_type, ...),
        action=(_Short, ...),
    )
    return create_model(
        "PlanOut",
        __config__=ConfigDict(extra="forbid"),
        steps=(list[step], Field(min_length=1, max_length=8)),
    )


def _progress_model(names: Sequence[str], *, compact: bool = False) -> type[BaseModel]:
    speaker_type: Any = Literal[tuple(names)]
    if compact:  # answers only: a third of the tokens, for small local models
        return create_model(
            "ProgressLedgerOut",
            __config__=ConfigDict(extra="forbid"),
            is_request_satisfied=(bool, ...),
            is_in_loop=(bool, ...),
            is_progress_being_made=(bool, ...),
            next_speaker=(speaker_type, ...),
            instruction_or_question=(_Brief, ...),
        )

    def judged(title: str, answer: Any) -> Any:
        return create_model(
            title, __config__=ConfigDict(extra="forbid"), reason=(_Short, ...), answer=(answer, ...)
        )

    return create_model(
        "ProgressLedgerOut",
        __config__=ConfigDict(extra="forbid"),
        is_request_satisfied=(judged("Satisfied", bool), ...),
        is_in_loop=(judged("Looping", bool), ...),
        is_progress_being_made=(judged("Progressing", bool), ...),
        next_speaker=(judged("NextSpeaker", speaker_type), ...),
        instruction_or_question=(judged("Instruction", _Short), ...),
    )


def _roster(participants: Sequence[tuple[str, str]]) -> str:
    return "\n".join(
        f"- {name}: {description or 'no description'}" for name, description in participants
    )


async def _structured(
    client: ChatClient,
    messages: list[Message],
    fmt: type[BaseModel],
    *,
    retries: int,
    options: ChatOptions,
    token: CancellationToken | None,
) -> tuple[BaseModel | None, Usage, list[str]]:
    """Ask for one structured answer; an invalid one is shown to the model with the error
    and asked for again, at most `retries` times. None when every attempt failed."""
    usage = Usage()
    attempts: list[str] = []
    request = list(messages)
    opts = options.merge(ChatOptions(response_format=fmt))
    for _ in range(retries + 1):
        try:
            response = await client.get_response(request, options=opts, cancellation_token=token)
        except ModelError as exc:  # includes answers that do not fit the format
            attempts.append(str(exc)[:300])
            request = [*messages, Message("user", f"That answer was invalid: {exc}. Answer again.")]
            continue
        if response.usage is not None:
            usage = usage + response.usage
        value = response.value
        if isinstance(value, fmt):
            return value, usage, attempts
        text = response.text
        try:
            return fmt.model_validate_json(text), usage, attempts
        except ValidationError as exc:
            attempts.append(text[:300])
            request = [
                *messages,
                Message("assistant", text),
                Message("user", f"That answer does not fit the schema: {exc}. Answer again."),
            ]
    return None, usage, attempts


async def ask_facts(
    client: ChatClient,
    task: str,
    participants: Sequence[tuple[str, str]],
    *,
    history: Sequence[Message] = (),
    compact: bool = False,
    retries: int = 2,
    options: ChatOptions | None = None,
    token: CancellationToken | None = None,
) -> LedgerAnswer:
    """The facts known or to look up for `task` (updated from `history` when re-planning);
    `compact` asks for at most three short ones."""
    prompt = (
        f"Task: {task}\nTeam:\n{_roster(participants)}\n"
        "List the facts given in the task, and the facts still to look up or compute. "
        "Answer as JSON with a list 'facts' of short sentences."
    )
    value, usage, attempts = await _structured(
        client,
        [*history, Message("user", prompt)],
        _FewFacts if compact else _Facts,
        retries=retries,
        options=options or ChatOptions(),
        token=token,
    )
    facts = list(value.facts) if isinstance(value, _Facts) else []
    return LedgerAnswer(facts, usage, attempts, fallback_used=value is None)


async def ask_plan(
    client: ChatClient,
    ledger: TaskLedger,
    participants: Sequence[tuple[str, str]],
    *,
    history: Sequence[Message] = (),
    comments: str = "",
    retries: int = 2,
    options: ChatOptions | None = None,
    token: CancellationToken | None = None,
) -> LedgerAnswer:
    """A plan of steps for the team; `comments` are a reviewer's remarks on the last one."""
    names = [name for name, _ in participants]
    facts = "\n".join(f"- {f}" for f in ledger.facts)
    prompt = (
        f"Task: {ledger.task}\nFacts:\n{facts}\nTeam:\n{_roster(participants)}\n"
        "Make a short plan: a list 'steps', each naming the team member ('agent') who "
        "does it and the 'action'."
    )
    if comments:
        prompt += f"\nA reviewer commented on the previous plan: {comments}"
    value, usage, attempts = await _structured(
        client,
        [*history, Message("user", prompt)],
        _plan_model(names),
        retries=retries,
        options=options or ChatOptions(),
        token=token,
    )
    if value is None:  # no valid plan: every participant, in order, on the task
        plan = [PlanStep(name, ledger.task) for name in names]
        return LedgerAnswer(plan, usage, attempts, fallback_used=True)
    steps = [PlanStep(s.agent, s.action) for s in value.steps]  # type: ignore[attr-defined]
    return LedgerAnswer(steps, usage, attempts)


async def ask_progress(
    client: ChatClient,
    ledger: TaskLedger,
    participants: Sequence[tuple[str, str]],
    history: Sequence[Message],
    *,
    speakers: Sequence[str] | None = None,
    compact: bool = False,
    retries: int = 2,
    options: ChatOptions | None = None,
    token: CancellationToken | None = None,
) -> LedgerAnswer:
    """This round's progress ledger; `value` is None when no valid one came (the caller
    falls back). `speakers` narrows who may be named next (default: every participant);
    `compact` leaves out the reasons."""
    names = list(speakers) if speakers is not None else [name for name, _ in participants]
    if not names:
        raise ConfigurationError("a progress ledger needs at least one participant")
    prompt = (
        f"{ledger.as_text()}\nTeam:\n{_roster(participants)}\n"
        "Judge the conversation so far. Answer as JSON: is_request_satisfied (is the task "
        "fully done?), is_in_loop (are we repeating ourselves?), is_progress_being_made, "
        f"next_speaker (one of {', '.join(names)}), and instruction_or_question (what "
        "that member should do now). Each has a 'reason' and an 'answer'."
    )
    value, usage, attempts = await _structured(
        client,
        [*history, Message("user", prompt)],
        _progress_model(names, compact=compact),
        retries=retries,
        options=options or ChatOptions(),
        token=token,
    )
    if value is None:
        return LedgerAnswer(None, usage, attempts, fallback_used=True)
    data: dict[str, Any] = value.model_dump()
    if compact:
        data = {key: {"reason": "", "answer": answer} for key, answer in data.items()}
    ledger_out = ProgressLedger(
        is_request_satisfied=bool(data["is_request_satisfied"]["answer"]),
        is_in_loop=bool(data["is_in_loop"]["answer"]),
        is_progress_being_made=bool(data["is_progress_being_made"]["answer"]),
        next_speaker=str(data["next_speaker"]["answer"]),
        instruction=str(data["instruction_or_question"]["answer"]),
        reasons={key: str(part["reason"]) for key, part in data.items() if part["reason"]},
    )
    return LedgerAnswer(ledger_out, usage, attempts)


async def ask_final_answer(
    client: ChatClient,
    ledger: TaskLedger,
    history: Sequence[Message],
    *,
    retries: int = 2,
    options: ChatOptions | None = None,
    token: CancellationToken | None = None,
) -> LedgerAnswer:
    """The team's answer to the task, from the conversation (or a summary of it when the
    model gives none)."""
    prompt = (
        f"The task was: {ledger.task}\nFrom the conversation above, give the final answer "
        "to the task as JSON with one field 'answer'."
    )
    value, usage, attempts = await _structured(
        client,
        [*history, Message("user", prompt)],
        _Final,
        retries=retries,
        options=options or ChatOptions(),
        token=token,
    )
    if isinstance(value, _Final):
        return LedgerAnswer(value.answer, usage, attempts)
    said = [m.text for m in history if m.role == "assistant" and m.text]
    return LedgerAnswer(said[-1] if said else "", usage, attempts, fallback_used=True)


def ledger_json(ledger: TaskLedger) -> str:
    """The task ledger as JSON text, for logs and reviews."""
    return json.dumps(
        {
            "task": ledger.task,
            "facts": ledger.facts,
            "plan": [[s.agent, s.action] for s in ledger.plan],
        }
    )
