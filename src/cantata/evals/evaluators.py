"""The deterministic evaluators, and plain functions as evaluators.

Each built-in is a small frozen pydantic model: its fields are what a dataset file writes
(``- contains: Paris`` or ``- contains: {text: [Paris, France], ignore_case: true}``), so a
bad argument in a file is a typed error at load time, never at run time. `kind` is the name
a file uses; `primary` is the field a scalar argument fills (``regex: "^\\d+$"`` sets
``pattern``). Every verdict has a score in [0, 1], so partial matches (two of three
expected tool calls) show in the report's scores even when the case fails.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, is_dataclass
from typing import Any, ClassVar, Literal, overload

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    PrivateAttr,
    field_validator,
    model_validator,
)

from ..core import ConfigurationError, short_repr
from ..teams.routing_eval import LIMIT_SOURCES, first_real_choice
from .context import EvalContext, EvalResult, ToolCall

__all__ = [
    "BuiltinEvaluator",
    "Contains",
    "Exact",
    "ExpectedCall",
    "FunctionEvaluator",
    "JsonSchema",
    "MaxLatency",
    "MaxUsage",
    "Regex",
    "Routing",
    "Trajectory",
    "evaluator",
]

Order = Literal["in_order", "any_order", "exact"]


class BuiltinEvaluator(BaseModel):
    """Base of the built-in evaluators: frozen, and strict about unknown fields."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: ClassVar[str] = ""
    """The name a dataset file uses for this evaluator."""
    primary: ClassVar[str | None] = None
    """The field a scalar argument fills in a file (``contains: Paris``)."""
    takes_mapping: ClassVar[bool] = False
    """A mapping argument is the primary field's value, not the fields (a JSON Schema)."""

    @property
    def name(self) -> str:
        """The report's name for this evaluator: its kind."""
        return self.kind

    def evaluate(self, ctx: EvalContext) -> EvalResult | Awaitable[EvalResult]:
        """The verdict on one run."""
        raise NotImplementedError

    def _verdict(self, passed: bool, reason: str = "", score: float | None = None) -> EvalResult:
        return EvalResult(self.name, passed, (1.0 if passed else 0.0) if score is None else score,
                          reason)  # fmt: skip


def _structured(ctx: EvalContext) -> Any:
    """The run's answer as data: its structured value when it has one, else its text read
    as JSON (text that is no JSON stays text)."""
    value = ctx.outcome.value
    if value is None:
        try:
            return json.loads(ctx.output)
        except ValueError:
            return ctx.output
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    return value


class Exact(BuiltinEvaluator):
    """The answer equals `value` (default: the case's `expected`). Text is compared after
    stripping (`strip`) and, with `ignore_case`, in lower case; an expected value that is
    not text is compared with the answer as data (its structured value, or its text read
    as JSON)."""

    kind = "exact"
    primary = "value"
    value: JsonValue = None
    ignore_case: bool = False
    strip: bool = True

    def evaluate(self, ctx: EvalContext) -> EvalResult:
        want = self.value if self.value is not None else ctx.expected
        if want is None:
            return self._verdict(False, "no expected output: give the case `expected`")
        if isinstance(want, str):
            got = ctx.output
            if self.strip:
                got, want = got.strip(), want.strip()
            if self.ignore_case:
                got, want = got.casefold(), want.casefold()
            if got == want:
                return self._verdict(True)
            return self._verdict(False, f"expected {short_repr(want)}, got {short_repr(got)}")
        data = _structured(ctx)
        if data == want:
            return self._verdict(True)
        return self._verdict(False, f"expected {short_repr(want)}, got {short_repr(data)}")


class Contains(BuiltinEvaluator):
    """The answer contains `text` (one string, or every string of a list; with
    ``any: true`` one of them is enough). Without `text`, the case's `expected` text."""

    kind = "contains"
    primary = "text"
    text: str | list[str] | None = None
    ignore_case: bool = False
    any_of: bool = Field(default=False, alias="any")

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    def evaluate(self, ctx: EvalContext) -> EvalResult:
        wanted = self.text if self.text is not None else ctx.expected
        if wanted is None:
            return self._verdict(False, "nothing to look for: give `text` or the case `expected`")
        needles = [wanted] if isinstance(wanted, str) else [str(w) for w in wanted]
        hay = ctx.output
        if self.ignore_case:
            hay = hay.casefold()
            needles_cmp = [n.casefold() for n in needles]
        else:
            needles_cmp = needles
        missing = [n for n, c in zip(needles, needles_cmp, strict=True) if c not in hay]
        found = len(needles) - len(missing)
        score = found / len(needles) if needles else 1.0
        passed = found > 0 if self.any_of else not missing
        return self._verdict(
            passed, "" if passed else f"missing {', '.join(map(short_repr, missing))}", score
        )


class Regex(BuiltinEvaluator):
    """The answer matches `pattern` (anywhere; with `full_match`, the whole answer)."""

    kind = "regex"
    primary = "pattern"
    pattern: str
    ignore_case: bool = False
    full_match: bool = False
    _compiled: re.Pattern[str] = PrivateAttr()

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a valid regular expression: {exc}") from None
        return value

    def model_post_init(self, context: Any) -> None:
        self._compiled = re.compile(self.pattern, re.IGNORECASE if self.ignore_case else 0)

    def evaluate(self, ctx: EvalContext) -> EvalResult:
        match = self._compiled.fullmatch if self.full_match else self._compiled.search
        if match(ctx.output) is not None:
            return self._verdict(True)
        return self._verdict(False, f"{short_repr(ctx.output)} does not match {self.pattern!r}")


class JsonSchema(BuiltinEvaluator):
    """The answer, as data (its structured value, or its text read as JSON), is valid
    against a JSON Schema. The schema itself is checked when the evaluator is made."""

    kind = "json_schema"
    primary = "schema_"
    takes_mapping = True
    schema_: dict[str, JsonValue] = Field(alias="schema")
    _validator: Any = PrivateAttr()

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @field_validator("schema_")
    @classmethod
    def _valid_schema(cls, value: dict[str, JsonValue]) -> dict[str, JsonValue]:
        jsonschema = _jsonschema()
        try:
            jsonschema.validators.validator_for(value).check_schema(value)
        except jsonschema.SchemaError as exc:
            raise ValueError(f"not a valid JSON Schema: {exc.message}") from None
        return value

    def model_post_init(self, context: Any) -> None:
        jsonschema = _jsonschema()
        self._validator = jsonschema.validators.validator_for(self.schema_)(self.schema_)

    def evaluate(self, ctx: EvalContext) -> EvalResult:
        data = _structured(ctx)
        error = next(iter(self._validator.iter_errors(data)), None)
        if error is None:
            return self._verdict(True)
        where = "/".join(str(p) for p in error.absolute_path) or "the answer"
        return self._verdict(False, f"{where}: {error.message}")


def _jsonschema() -> Any:
    try:
        import jsonschema
    except ImportError:
        raise ConfigurationError(
            "the json_schema evaluator needs the jsonschema package: "
            "pip install 'cantata[evals]' (or jsonschema)"
        ) from None
    return jsonschema


class ExpectedCall(BaseModel):
    """A tool call a trajectory expects: its name, and (when given) its arguments."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    arguments: dict[str, JsonValue] | None = None


class Trajectory(BuiltinEvaluator):
    """The run made the expected tool calls: in order (`in_order`, other calls may come
    between), in any order (`any_order`), or exactly these and no others (`exact`).

    A call with `arguments` matches a call with at least those arguments, equal
    (``arguments: equal`` wants the same arguments and no more); without, any arguments.
    The score is the share of expected calls that were made.
    """

    kind = "trajectory"
    primary = "calls"
    calls: list[ExpectedCall]
    order: Order = "in_order"
    arguments: Literal["subset", "equal"] = "subset"

    @field_validator("calls", mode="before")
    @classmethod
    def _names_alone(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [{"name": v} if isinstance(v, str) else v for v in value]
        return value

    def _matches(self, want: ExpectedCall, got: ToolCall) -> bool:
        if want.name != got.name:
            return False
        if want.arguments is None:
            return True
        if self.arguments == "equal":
            return dict(got.arguments) == want.arguments
        return all(k in got.arguments and got.arguments[k] == v for k, v in want.arguments.items())

    def evaluate(self, ctx: EvalContext) -> EvalResult:
        made = ctx.outcome.tool_calls
        want = self.calls
        if self.order == "exact":
            matched = sum(1 for w, g in zip(want, made, strict=False) if self._matches(w, g))
            passed = matched == len(want) == len(made)
        elif self.order == "in_order":
            matched = _in_order(want, made, self._matches)
            passed = matched == len(want)
        else:
            matched = _assignment(want, made, self._matches)
            passed = matched == len(want)
        score = matched / len(want) if want else (1.0 if passed else 0.0)
        if passed:
            return self._verdict(True, score=score)
        names = [c.name for c in made]
        return self._verdict(
            False,
            f"{matched} of {len(want)} expected calls made ({self.order}); calls made: {names}",
            score,
        )


def _in_order(
    want: Sequence[ExpectedCall],
    made: Sequence[ToolCall],
    matches: Callable[[ExpectedCall, ToolCall], bool],
) -> int:
    """How many of `want` appear, in order, as a subsequence of `made` (greedy, which is
    optimal for a subsequence)."""
    n = 0
    for call in made:
        if n < len(want) and matches(want[n], call):
            n += 1
    return n


def _assignment(
    want: Sequence[ExpectedCall],
    made: Sequence[ToolCall],
    matches: Callable[[ExpectedCall, ToolCall], bool],
) -> int:
    """The most expected calls each matched to a different call made (bipartite matching
    by augmenting paths: a greedy pick could give a specific expected call's only match to
    a looser one)."""
    owner: dict[int, int] = {}

    def place(w: int, seen: set[int]) -> bool:
        for g, call in enumerate(made):
            if g in seen or not matches(want[w], call):
                continue
            seen.add(g)
            if g not in owner or place(owner[g], seen):
                owner[g] = w
                return True
        return False

    return sum(1 for w in range(len(want)) if place(w, set()))


class Routing(BuiltinEvaluator):
    """A team sent the task where it should: `first` is the participant its first real
    choice routed to (the first decision among more than one candidate, as
    `evaluate_routing` counts it), `speakers` the participants given turns (in order, others
    may come between; ``order: exact`` wants exactly these). A run that a limit stopped
    (``max_turns``, ``max_rounds``, ``max_stalls``) fails unless `allow_limit_stop`."""

    kind = "routing"
    primary = "speakers"
    speakers: list[str] | None = None
    first: str | None = None
    order: Literal["in_order", "exact"] = "in_order"
    allow_limit_stop: bool = False

    @model_validator(mode="after")
    def _something_expected(self) -> Routing:
        if self.speakers is None and self.first is None:
            raise ValueError("routing expects `speakers` or `first` (or both)")
        return self

    def evaluate(self, ctx: EvalContext) -> EvalResult:
        outcome = ctx.outcome
        problems: list[str] = []
        checks = 0
        if self.first is not None:
            checks += 1
            choice = first_real_choice(outcome.routing)
            routed = choice.choice if choice is not None else None
            if routed != self.first:
                problems.append(f"routed first to {routed!r}, expected {self.first!r}")
        if self.speakers is not None:
            checks += 1
            said = outcome.speakers
            if self.order == "exact":
                ok = said == self.speakers
            else:
                it = iter(said)
                ok = all(any(s == w for s in it) for w in self.speakers)
            if not ok:
                problems.append(f"speakers {said}, expected {self.speakers} ({self.order})")
        if not self.allow_limit_stop:
            checks += 1
            if outcome.stop_source in LIMIT_SOURCES:
                problems.append(f"stopped by its limit ({outcome.stop_source})")
        score = (checks - len(problems)) / checks
        return self._verdict(not problems, "; ".join(problems), score)


class MaxLatency(BuiltinEvaluator):
    """The run took at most `seconds` (wall-clock, from the call to its answer)."""

    kind = "max_latency"
    primary = "seconds"
    seconds: float = Field(gt=0, allow_inf_nan=False)

    def evaluate(self, ctx: EvalContext) -> EvalResult:
        took = ctx.outcome.latency
        if took <= self.seconds:
            return self._verdict(True)
        return self._verdict(False, f"took {took:.3f} s, more than {self.seconds} s")


class MaxUsage(BuiltinEvaluator):
    """The run spent at most these tokens (input, output, total) and tool calls."""

    kind = "max_usage"
    input_tokens: int | None = Field(default=None, ge=0)
    output_tokens: int | None = Field(default=None, ge=0)
    total_tokens: int | None = Field(default=None, ge=0)
    tool_calls: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _some_bound(self) -> MaxUsage:
        if all(
            v is None
            for v in (self.input_tokens, self.output_tokens, self.total_tokens, self.tool_calls)
        ):
            raise ValueError(
                "max_usage needs a bound: input_tokens, output_tokens, total_tokens or tool_calls"
            )
        return self

    def evaluate(self, ctx: EvalContext) -> EvalResult:
        usage = ctx.outcome.usage
        spent = {
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "total_tokens": usage.total_tokens,
            "tool_calls": len(ctx.outcome.tool_calls),
        }
        over = [
            f"{key} {spent[key]} > {bound}"
            for key in spent
            if (bound := getattr(self, key)) is not None and spent[key] > bound
        ]
        return self._verdict(not over, "; ".join(over))


FunctionResult = bool | float | EvalResult
EvalFunction = Callable[[EvalContext], "FunctionResult | Awaitable[FunctionResult]"]


class FunctionEvaluator:
    """A plain function (sync or async) of the `EvalContext` as an evaluator.

    It returns a bool (passed), a float score in [0, 1] (passed when at least
    `threshold`), or a whole `EvalResult`.
    """

    __slots__ = ("_fn", "_name", "threshold")

    def __init__(self, fn: EvalFunction, *, name: str | None = None, threshold: float = 0.5):
        if not callable(fn):
            raise ConfigurationError(f"an evaluator function must be callable, got {fn!r}")
        self._fn = fn
        self._name: str = name or str(getattr(fn, "__name__", "function"))
        self.threshold = threshold

    @property
    def name(self) -> str:
        """The function's name (or the one given)."""
        return self._name

    def __repr__(self) -> str:
        return f"FunctionEvaluator({self._name!r})"

    def evaluate(self, ctx: EvalContext) -> EvalResult | Awaitable[EvalResult]:
        """Call the function and read its answer as a verdict."""
        answer = self._fn(ctx)
        if inspect.isawaitable(answer):
            return self._later(answer)
        return self._read(answer)

    async def _later(self, answer: Awaitable[FunctionResult]) -> EvalResult:
        return self._read(await answer)

    def _read(self, answer: Any) -> EvalResult:
        if isinstance(answer, EvalResult):
            return answer
        if isinstance(answer, bool):
            return EvalResult(self._name, answer, 1.0 if answer else 0.0)
        if isinstance(answer, int | float):
            score = min(1.0, max(0.0, float(answer)))
            return EvalResult(self._name, score >= self.threshold, score)
        return EvalResult(
            self._name,
            False,
            0.0,
            f"the function returned {short_repr(answer)}; return a bool, a score or an EvalResult",
        )


@overload
def evaluator(fn: EvalFunction, /) -> FunctionEvaluator: ...
@overload
def evaluator(
    *, name: str | None = None, threshold: float = 0.5
) -> Callable[[EvalFunction], FunctionEvaluator]: ...
def evaluator(
    fn: EvalFunction | None = None, /, *, name: str | None = None, threshold: float = 0.5
) -> FunctionEvaluator | Callable[[EvalFunction], FunctionEvaluator]:
    """Make a plain function an evaluator: ``@evaluator`` or ``@evaluator(name=...)``."""
    if fn is not None:
        return FunctionEvaluator(fn, name=name, threshold=threshold)

    def wrap(f: EvalFunction) -> FunctionEvaluator:
        return FunctionEvaluator(f, name=name, threshold=threshold)

    return wrap


BUILTIN_KINDS: Mapping[str, type[BuiltinEvaluator]] = {
    cls.kind: cls for cls in (Exact, Contains, Regex, JsonSchema, Trajectory, Routing,
                              MaxLatency, MaxUsage)
}  # fmt: skip
"""The deterministic evaluators by the name a dataset file uses."""
