"""Termination conditions: when a team run stops, and why.

A condition is a definition, shared by every run of a team: what it counts lives in a
small JSON state that the team's manager keeps in the run (and so in checkpoints). A new
run starts with a fresh state, so a condition that fired is reset automatically and
behaves the same however it is reused, by one session or by a hundred at once. The
manager shows each condition the messages produced since it last checked (the task
first, then each turn's messages) with the turn's token usage; a condition answers with a
`StopMessage` (its reason) or None.

Combine with ``|`` (stops when any part fires) and ``&`` (stops when every part has fired
at some check within the run, not necessarily the same one).

Semantic Kernel's strategies map onto these: a maximum number of iterations is
`MaxMessage` (or the team's ``max_turns``), a function-based decision is `Functional(fn)`,
an agent-based decision is `Functional` with an async function that asks an agent (or
`TextMention` of the agent's verdict word, when the deciding agent is a participant), and
an aggregate strategy is ``|`` (any) and ``&`` (all).
"""

from __future__ import annotations

import inspect
import threading
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from ..agents.usage import RunUsage, UsageLimits
from ..core import ConfigurationError, Message, TextContent, Usage
from .result import StopMessage

__all__ = [
    "AndTermination",
    "External",
    "FunctionCall",
    "Functional",
    "Handoff",
    "MaxMessage",
    "Observation",
    "OrTermination",
    "SourceMatch",
    "TerminationCondition",
    "TerminationState",
    "TextMention",
    "Timeout",
    "TokenUsage",
]

TerminationState: TypeAlias = dict[str, Any]
"""A condition's state in one run: JSON data (it is checkpointed with the run)."""

HANDOFF_KEY = "handoff_to"
"""Metadata key of a message that hands the conversation to another participant."""


@dataclass(slots=True)
class Observation:
    """What a condition sees at one check."""

    messages: Sequence[Message]
    """The messages produced since the previous check (the task, or one turn's messages)."""
    usage: Usage = field(default_factory=Usage)
    """Tokens used to produce them."""
    now: float = 0.0
    """Wall-clock time of the check (seconds since the epoch)."""


class TerminationCondition(ABC):
    """Decides when a team run stops. Subclass it, or wrap a function in `Functional`."""

    @property
    def name(self) -> str:
        """How stop messages name this condition."""
        return type(self).__name__

    def start(self, started_at: float) -> TerminationState:
        """A fresh state for a run that starts at `started_at` (time.time())."""
        return {}

    @abstractmethod
    async def check(self, state: TerminationState, seen: Observation) -> StopMessage | None:
        """Look at what was produced since the last check; return a stop message to stop.

        `state` is this run's state from `start` (change it in place; keep it JSON)."""

    def __or__(self, other: TerminationCondition) -> OrTermination:
        return OrTermination(*_parts(self, OrTermination), *_parts(other, OrTermination))

    def __and__(self, other: TerminationCondition) -> AndTermination:
        return AndTermination(*_parts(self, AndTermination), *_parts(other, AndTermination))

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def _parts(cond: TerminationCondition, kind: type) -> tuple[TerminationCondition, ...]:
    if not isinstance(cond, TerminationCondition):
        raise ConfigurationError(
            f"{cond!r} is not a TerminationCondition; combine conditions with | and & only"
        )
    if type(cond) is kind:
        return tuple(cond.conditions)  # type: ignore[attr-defined]
    return (cond,)


def _texts(messages: Sequence[Message]) -> list[str]:
    return [c.text for m in messages for c in m.contents if type(c) is TextContent]


# --- counting ---------------------------------------------------------------------------


class MaxMessage(TerminationCondition):
    """Stops once `max_messages` messages were produced in the run (the task counts)."""

    def __init__(self, max_messages: int) -> None:
        if isinstance(max_messages, bool) or not isinstance(max_messages, int) or max_messages < 1:
            raise ConfigurationError(
                f"MaxMessage needs a positive whole number of messages, got {max_messages!r}"
            )
        self.max_messages = max_messages

    def start(self, started_at: float) -> TerminationState:
        return {"count": 0}

    async def check(self, state: TerminationState, seen: Observation) -> StopMessage | None:
        state["count"] += len(seen.messages)
        if state["count"] >= self.max_messages:
            return StopMessage(
                f"maximum number of messages {self.max_messages} reached "
                f"({state['count']} messages)",
                self.name,
            )
        return None

    def __repr__(self) -> str:
        return f"MaxMessage({self.max_messages})"


class TokenUsage(TerminationCondition):
    """Stops once the run's token usage reaches a budget (total, input or output): the
    same limits as an agent's `UsageLimits`, over every turn of the team run."""

    def __init__(
        self,
        max_total_tokens: int | None = None,
        *,
        max_input_tokens: int | None = None,
        max_output_tokens: int | None = None,
    ) -> None:
        limits = (max_total_tokens, max_input_tokens, max_output_tokens)
        if all(v is None for v in limits):
            raise ConfigurationError(
                "TokenUsage needs at least one budget: max_total_tokens, max_input_tokens or "
                "max_output_tokens"
            )
        for v in limits:
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise ConfigurationError(f"TokenUsage budgets are positive integers, got {v!r}")
        self.max_total_tokens = max_total_tokens
        self.max_input_tokens = max_input_tokens
        self.max_output_tokens = max_output_tokens
        self.limits = UsageLimits(
            total_tokens=max_total_tokens,
            input_tokens=max_input_tokens,
            output_tokens=max_output_tokens,
        )
        """The same budget as the agents' `UsageLimits` (one accounting, not two)."""

    def start(self, started_at: float) -> TerminationState:
        return {"input": 0, "output": 0}

    async def check(self, state: TerminationState, seen: Observation) -> StopMessage | None:
        state["input"] += seen.usage.input_tokens
        state["output"] += seen.usage.output_tokens
        # the agents' accounting: the same totals and the same limits as `UsageLimits`
        used = RunUsage(by_model={"team": Usage(state["input"], state["output"])})
        found = self.limits.exceeded(used)
        if found is None:
            return None
        limit, value, allowed = found
        what = limit.removesuffix("_tokens")
        return StopMessage(f"{what} token budget {allowed:g} reached ({value:g} used)", self.name)


class Timeout(TerminationCondition):
    """Stops at the first check after `seconds` have passed since the run started (not
    since the condition was made)."""

    def __init__(self, seconds: float) -> None:
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds <= 0:
            raise ConfigurationError(f"Timeout needs a positive number of seconds, got {seconds!r}")
        self.seconds = float(seconds)

    def start(self, started_at: float) -> TerminationState:
        return {"deadline": started_at + self.seconds}

    async def check(self, state: TerminationState, seen: Observation) -> StopMessage | None:
        if seen.now >= state["deadline"]:
            return StopMessage(f"timeout of {self.seconds:g}s reached", self.name)
        return None

    def __repr__(self) -> str:
        return f"Timeout({self.seconds:g})"


# --- what was said, and by whom ----------------------------------------------------------


class TextMention(TerminationCondition):
    """Stops when a message contains `text` (from one of `sources`, when given)."""

    def __init__(self, text: str, *, sources: Sequence[str] | None = None) -> None:
        if not isinstance(text, str) or not text:
            raise ConfigurationError(f"TextMention needs a non-empty text, got {text!r}")
        self.text = text
        self.sources = None if sources is None else frozenset(sources)

    async def check(self, state: TerminationState, seen: Observation) -> StopMessage | None:
        for m in seen.messages:
            if self.sources is not None and m.author_name not in self.sources:
                continue
            if any(self.text in t for t in _texts([m])):
                who = m.author_name or m.role
                return StopMessage(f"text {self.text!r} mentioned by {who}", self.name)
        return None

    def __repr__(self) -> str:
        return f"TextMention({self.text!r})"


class SourceMatch(TerminationCondition):
    """Stops as soon as one of `sources` (participant names) has written a message."""

    def __init__(self, sources: str | Sequence[str]) -> None:
        names = [sources] if isinstance(sources, str) else list(sources)
        if not names or not all(isinstance(n, str) and n for n in names):
            raise ConfigurationError(f"SourceMatch needs participant names, got {sources!r}")
        self.sources = frozenset(names)

    async def check(self, state: TerminationState, seen: Observation) -> StopMessage | None:
        for m in seen.messages:
            if m.author_name in self.sources:
                return StopMessage(f"{m.author_name} answered", self.name)
        return None


class Handoff(TerminationCondition):
    """Stops when a participant hands the conversation to `target` (usually ``"user"``):
    a message whose metadata says ``handoff_to=target``, or a call of
    ``transfer_to_<target>``."""

    def __init__(self, target: str) -> None:
        if not isinstance(target, str) or not target:
            raise ConfigurationError(f"Handoff needs a target name, got {target!r}")
        self.target = target

    async def check(self, state: TerminationState, seen: Observation) -> StopMessage | None:
        tool = f"transfer_to_{self.target}"
        for m in seen.messages:
            if m.metadata.get(HANDOFF_KEY) == self.target or any(
                c.name == tool for c in m.function_calls
            ):
                who = m.author_name or m.role
                return StopMessage(f"{who} handed off to {self.target}", self.name)
        return None

    def __repr__(self) -> str:
        return f"Handoff({self.target!r})"


class FunctionCall(TerminationCondition):
    """Stops when a call of the tool `function_name` has got its result in the run."""

    def __init__(self, function_name: str) -> None:
        if not isinstance(function_name, str) or not function_name:
            raise ConfigurationError(f"FunctionCall needs a tool name, got {function_name!r}")
        self.function_name = function_name

    def start(self, started_at: float) -> TerminationState:
        return {"calls": []}

    async def check(self, state: TerminationState, seen: Observation) -> StopMessage | None:
        calls: list[str] = state["calls"]
        for m in seen.messages:
            calls.extend(c.call_id for c in m.function_calls if c.name == self.function_name)
            for r in m.function_results:
                if r.call_id in calls:
                    return StopMessage(f"tool {self.function_name!r} was executed", self.name)
        return None


# --- from outside, and from code ----------------------------------------------------------


class External(TerminationCondition):
    """Stops a running team from outside, gracefully: call `set()`; the turn under way
    finishes, then the run stops. A `set()` counts for the runs under way at that moment,
    not for runs that start later."""

    def __init__(self) -> None:
        self._generation = 0
        self._lock = threading.Lock()

    def set(self) -> None:
        """Ask every run under way to stop after its current turn."""
        with self._lock:
            self._generation += 1

    def start(self, started_at: float) -> TerminationState:
        return {"generation": self._generation}

    async def check(self, state: TerminationState, seen: Observation) -> StopMessage | None:
        if self._generation > state["generation"]:
            return StopMessage("stopped from outside", self.name)
        return None


FunctionVerdict: TypeAlias = bool | str | StopMessage | None
"""What a `Functional` function answers: stop or not, or the reason to stop with."""


class Functional(TerminationCondition):
    """Stops when ``fn(messages)`` says so: True, a reason (str) or a `StopMessage`.

    `fn` may be async (to ask an agent, say: Semantic Kernel's agent-based strategy). It
    sees the messages since the previous check; keep anything it must remember in the
    messages, not in the function, so that concurrent runs do not share it."""

    def __init__(
        self,
        fn: Callable[[Sequence[Message]], FunctionVerdict | Awaitable[FunctionVerdict]],
        *,
        name: str | None = None,
    ) -> None:
        if not callable(fn):
            raise ConfigurationError(f"Functional needs a function of the messages, got {fn!r}")
        self.fn = fn
        self._name: str = name or str(getattr(fn, "__name__", "Functional"))

    @property
    def name(self) -> str:
        return self._name

    async def check(self, state: TerminationState, seen: Observation) -> StopMessage | None:
        verdict = self.fn(seen.messages)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        if verdict is None or verdict is False:
            return None
        if isinstance(verdict, StopMessage):
            return verdict
        if verdict is True:
            return StopMessage(f"{self._name} decided to stop", self._name)
        if isinstance(verdict, str):
            return StopMessage(verdict, self._name)
        raise ConfigurationError(
            f"termination function {self._name!r} returned {verdict!r}; return True/False, "
            "a reason (str), a StopMessage or None"
        )


# --- combinations -------------------------------------------------------------------------


class _Combined(TerminationCondition):
    def __init__(self, *conditions: TerminationCondition) -> None:
        if len(conditions) < 2:
            raise ConfigurationError(f"{type(self).__name__} needs at least two conditions")
        for c in conditions:
            _parts(c, type(self))
        self.conditions = tuple(conditions)

    def start(self, started_at: float) -> TerminationState:
        return {
            "parts": [c.start(started_at) for c in self.conditions],
            "fired": [None] * len(self.conditions),
        }

    async def _check_parts(self, state: TerminationState, seen: Observation) -> list[Any]:
        fired: list[Any] = state["fired"]
        for i, cond in enumerate(self.conditions):
            if fired[i] is None:
                stop = await cond.check(state["parts"][i], seen)
                if stop is not None:
                    fired[i] = [stop.content, stop.source]
        return fired

    def __repr__(self) -> str:
        sep = " | " if isinstance(self, OrTermination) else " & "
        return "(" + sep.join(repr(c) for c in self.conditions) + ")"


class OrTermination(_Combined):
    """Stops when any of its conditions fires (``a | b``)."""

    async def check(self, state: TerminationState, seen: Observation) -> StopMessage | None:
        fired = await self._check_parts(state, seen)
        hits = [f for f in fired if f is not None]
        if not hits:
            return None
        return StopMessage("; ".join(h[0] for h in hits), ", ".join(h[1] for h in hits))


class AndTermination(_Combined):
    """Stops once every one of its conditions has fired within the run (``a & b``)."""

    async def check(self, state: TerminationState, seen: Observation) -> StopMessage | None:
        fired = await self._check_parts(state, seen)
        if any(f is None for f in fired):
            return None
        return StopMessage("; ".join(h[0] for h in fired), ", ".join(h[1] for h in fired))
