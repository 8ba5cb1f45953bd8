"""Usage accounting and limits: what a run spent (per model, per agent) and how much it may.

One `UsageMeter` per run counts model calls, tokens (cache reads apart), tool calls, cost
(from the user's `ModelPrice` table) and wall-clock time; a `UsageLimits` is checked
*before* each model call (and before each tool call for ``tool_calls``), so a run that
reached a limit never makes the call that would pass it: it stops with
`UsageLimitExceeded`, which names the limit, what was used and what was allowed.
``per="thread"`` limits add the usage of the thread's earlier runs, kept in the thread's
context state (serialized and stored with it). A team's `TokenUsage` termination reads the
same `Usage` totals; served, a limit is HTTP 429 with the code ``usage_limit_exceeded:<limit>``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal, TypeAlias

from ..core import ConfigurationError, Usage, UsageLimitExceeded

__all__ = [
    "LimitName",
    "ModelPrice",
    "RunUsage",
    "UsageLimits",
    "UsageMeter",
]

LimitName: TypeAlias = Literal[
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "model_calls",
    "tool_calls",
    "seconds",
    "cost",
]
"""What a `UsageLimits` bounds; also `UsageLimitExceeded.limit`."""

THREAD_USAGE_KEY = "cantata.usage"
"""Where a thread's context state keeps the usage of its runs (for ``per="thread"``)."""


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """What a model costs, per million tokens, in the user's currency: input, cached input
    (a prompt-cache read, usually cheaper; the input price when not given) and output."""

    input: float
    output: float
    cached_input: float | None = None

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None and f.name == "cached_input":
                continue
            if (
                not isinstance(value, int | float)
                or isinstance(value, bool)
                or not math.isfinite(value)
                or value < 0
            ):
                raise ConfigurationError(
                    f"ModelPrice.{f.name} must be a price per million tokens, 0 or more; "
                    f"got {value!r}"
                )

    def cost(self, usage: Usage) -> float:
        """The cost of `usage` at this price."""
        cached = min(usage.cached_input_tokens, usage.input_tokens)
        cached_price = self.input if self.cached_input is None else self.cached_input
        return (
            (usage.input_tokens - cached) * self.input
            + cached * cached_price
            + usage.output_tokens * self.output
        ) / 1_000_000


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageLimits:
    """Bounds on what one run (``per="run"``) or one thread over all its runs
    (``per="thread"``) may spend. A `None` bound is no bound.

    ``cost`` needs ``prices``: the price of each model by name (the model the response
    names, else the client's); a model missing from the table is a `ConfigurationError`
    at the first call it answers, not a silent zero."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    model_calls: int | None = None
    tool_calls: int | None = None
    seconds: float | None = None
    cost: float | None = None
    prices: Mapping[str, ModelPrice] = field(default_factory=dict)
    per: Literal["run", "thread"] = "run"

    def __post_init__(self) -> None:
        for name in ("input_tokens", "output_tokens", "total_tokens", "model_calls", "tool_calls"):
            value = getattr(self, name)
            if value is not None and (type(value) is not int or value < 0):
                raise ConfigurationError(
                    f"UsageLimits.{name} must be a whole number, 0 or more, or None; got {value!r}"
                )
        for name in ("seconds", "cost"):
            value = getattr(self, name)
            if value is not None and (
                not isinstance(value, int | float)
                or isinstance(value, bool)
                or not math.isfinite(value)
                or value < 0
            ):
                raise ConfigurationError(
                    f"UsageLimits.{name} must be a number, 0 or more, or None; got {value!r}"
                )
        if self.per not in ("run", "thread"):
            raise ConfigurationError(f"UsageLimits.per must be 'run' or 'thread', not {self.per!r}")
        for model, price in self.prices.items():
            if not isinstance(price, ModelPrice):
                raise ConfigurationError(
                    f"UsageLimits.prices[{model!r}] must be a ModelPrice, got "
                    f"{type(price).__name__}"
                )
        if self.cost is not None and not self.prices:
            raise ConfigurationError(
                "UsageLimits.cost needs prices: a ModelPrice for each model the run calls"
            )

    def exceeded(
        self, used: RunUsage, *, tools: bool = False
    ) -> tuple[LimitName, float, float] | None:
        """The first limit `used` has reached, as (limit, used, allowed), or None.
        ``tools=True`` checks the tool-call limit only (before a tool call)."""
        if tools:
            if self.tool_calls is not None and used.tool_calls >= self.tool_calls:
                return ("tool_calls", used.tool_calls, self.tool_calls)
            return None
        u = used.usage
        checks: tuple[tuple[LimitName, float | None, float], ...] = (
            ("model_calls", self.model_calls, used.model_calls),
            ("input_tokens", self.input_tokens, u.input_tokens),
            ("output_tokens", self.output_tokens, u.output_tokens),
            ("total_tokens", self.total_tokens, u.total_tokens),
            ("cost", self.cost, used.cost),
            ("seconds", self.seconds, used.seconds),
        )
        for name, allowed, value in checks:
            if allowed is not None and value >= allowed:
                return (name, value, allowed)
        return None


@dataclass(slots=True)
class RunUsage:
    """What a run (or a thread's runs, or a team's turns) spent: tokens per model and per
    agent, model calls, tool calls, cost (when priced) and wall-clock seconds."""

    by_model: dict[str, Usage] = field(default_factory=dict)
    by_agent: dict[str, Usage] = field(default_factory=dict)
    model_calls: int = 0
    tool_calls: int = 0
    cost: float = 0.0
    seconds: float = 0.0

    @property
    def usage(self) -> Usage:
        """All tokens, summed over the models."""
        total = Usage()
        for u in self.by_model.values():
            total = total + u
        return total

    def add(self, other: RunUsage) -> None:
        """Add `other` into this one (a team adds its turns')."""
        for key, u in other.by_model.items():
            self.by_model[key] = self.by_model.get(key, Usage()) + u
        for key, u in other.by_agent.items():
            self.by_agent[key] = self.by_agent.get(key, Usage()) + u
        self.model_calls += other.model_calls
        self.tool_calls += other.tool_calls
        self.cost += other.cost
        self.seconds += other.seconds

    def to_json(self) -> dict[str, Any]:
        """A JSON object (a thread keeps its runs' usage as one)."""
        return {
            "by_model": {k: _usage_json(u) for k, u in self.by_model.items()},
            "by_agent": {k: _usage_json(u) for k, u in self.by_agent.items()},
            "model_calls": self.model_calls,
            "tool_calls": self.tool_calls,
            "cost": self.cost,
            "seconds": self.seconds,
        }

    @classmethod
    def from_json(cls, data: Any) -> RunUsage:
        """Read what `to_json` wrote; anything else counts as nothing spent (a thread's
        state is the user's data: a damaged count must not break the conversation)."""
        if not isinstance(data, dict):
            return cls()
        out = cls()
        for key, target in (("by_model", out.by_model), ("by_agent", out.by_agent)):
            found = data.get(key)
            if isinstance(found, dict):
                for name, u in found.items():
                    parsed = _usage_from(u)
                    if parsed is not None and isinstance(name, str):
                        target[name] = parsed
        for key in ("model_calls", "tool_calls"):
            value = data.get(key)
            if type(value) is int and value >= 0:
                setattr(out, key, value)
        for key in ("cost", "seconds"):
            value = data.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool):
                number = float(value)
                if math.isfinite(number) and number >= 0:
                    setattr(out, key, number)
        return out


def _usage_json(u: Usage) -> dict[str, int]:
    return {
        "input_tokens": u.input_tokens,
        "output_tokens": u.output_tokens,
        "cached_input_tokens": u.cached_input_tokens,
    }


def _usage_from(data: Any) -> Usage | None:
    if not isinstance(data, dict):
        return None
    values = [data.get(k, 0) for k in ("input_tokens", "output_tokens", "cached_input_tokens")]
    if not all(type(v) is int and v >= 0 for v in values):
        return None
    return Usage(*values)


class UsageMeter:
    """Counts one run and checks its limits; the agent makes one per run."""

    __slots__ = ("_before", "_limits", "_start", "agent", "run")

    def __init__(
        self,
        agent: str,
        limits: tuple[UsageLimits, ...],
        *,
        before: RunUsage | None = None,
    ) -> None:
        self.agent = agent
        self.run = RunUsage()
        self._limits = limits
        self._before = before  # the thread's earlier runs, for per="thread" limits
        self._start = time.monotonic()

    def _used(self, limits: UsageLimits) -> RunUsage:
        self.run.seconds = time.monotonic() - self._start
        if limits.per == "thread" and self._before is not None:
            total = RunUsage()
            total.add(self._before)
            total.add(self.run)
            return total
        return self.run

    def check_model_call(self) -> None:
        """Raise `UsageLimitExceeded` when a limit is reached: the next model call would
        pass it."""
        for limits in self._limits:
            found = limits.exceeded(self._used(limits))
            if found is not None:
                self._raise(limits, *found, "model call")

    def check_tool_call(self) -> None:
        """Raise `UsageLimitExceeded` when the tool-call limit is reached; else count it."""
        for limits in self._limits:
            found = limits.exceeded(self._used(limits), tools=True)
            if found is not None:
                self._raise(limits, *found, "tool call")
        self.run.tool_calls += 1

    def _raise(
        self, limits: UsageLimits, limit: LimitName, used: float, allowed: float, what: str
    ) -> None:
        scope = "this thread's runs" if limits.per == "thread" else "this run"
        shown = f"{used:.3f}" if isinstance(used, float) else str(used)
        raise UsageLimitExceeded(
            f"agent `{self.agent}`: {scope} reached its {limit} limit ({shown} used, "
            f"{allowed:g} allowed), so the next {what} was not made; raise the limit in "
            "UsageLimits or start a new " + ("thread" if limits.per == "thread" else "run"),
            limit=limit,
            used=used,
            allowed=allowed,
            scope=limits.per,
        )

    def count(self, model: str, usage: Usage | None) -> None:
        """Count one model call that answered, and its tokens (and cost, when priced)."""
        run = self.run
        run.model_calls += 1
        if usage is None:
            usage = Usage()
        run.by_model[model] = run.by_model.get(model, Usage()) + usage
        run.by_agent[self.agent] = run.by_agent.get(self.agent, Usage()) + usage
        for limits in self._limits:
            if limits.prices:
                price = limits.prices.get(model)
                if price is None:
                    raise ConfigurationError(
                        f"agent `{self.agent}`: model {model!r} has no price in "
                        f"UsageLimits.prices (priced: {sorted(limits.prices)}); add a "
                        "ModelPrice for it"
                    )
                run.cost += price.cost(usage)
                break

    def finish(self) -> RunUsage:
        """The run's usage, with its wall-clock time."""
        self.run.seconds = time.monotonic() - self._start
        return self.run
