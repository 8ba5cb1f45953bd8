"""The types every part of an eval shares: a case, what its run produced, what an
evaluator is given and what it gives back.

A leaf module: the dataset makes `Case`s, the runner fills a `RunOutcome` from whatever ran
(an agent's response, a team's result and routing, a workflow's outputs and events), and
the evaluators, the judge and the report read them, so arrows inside the package point one
way and no evaluator needs to know which kind of target ran.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..core import Message, Usage

if TYPE_CHECKING:
    from ..models import ChatClient
    from ..teams import RoutingEvent

__all__ = ["Case", "EvalContext", "EvalResult", "Evaluator", "RunOutcome", "ToolCall"]


@dataclass(frozen=True, slots=True)
class EvalResult:
    """One evaluator's verdict on one run: passed or not, a score in [0, 1], and why."""

    evaluator: str
    passed: bool
    score: float
    reason: str = ""


@runtime_checkable
class Evaluator(Protocol):
    """Anything with a `name` and an `evaluate(ctx)` that returns an `EvalResult` (or an
    awaitable of one). The built-in evaluators are of this shape; so is
    `FunctionEvaluator`, which wraps a plain function."""

    @property
    def name(self) -> str:
        """The name the report shows for this evaluator's column."""
        ...

    def evaluate(self, ctx: EvalContext) -> EvalResult | Awaitable[EvalResult]:
        """The verdict on one run."""
        ...


@dataclass(frozen=True, slots=True)
class Case:
    """One case of a dataset: the input, what is expected (an output, or properties that
    its own evaluators check), metadata kept in the report, and its own evaluators (run
    after the dataset's)."""

    name: str
    input: Any
    expected: Any = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    evaluators: tuple[Evaluator, ...] = ()


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call the run made: the tool's name and its arguments."""

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class RunOutcome:
    """The run of one case: its answer, what it did on the way, what it cost.

    `output` is the answer's text; `value` the structured output (an agent's
    `response.value`, a workflow's last output) when there is one. `error` is the failure's
    text when the run raised (the other fields then hold what was known before it).
    """

    output: str = ""
    value: Any = None
    messages: list[Message] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    routing: list[RoutingEvent] = field(default_factory=list)
    stop_source: str | None = None
    usage: Usage = field(default_factory=Usage)
    latency: float = 0.0
    error: str | None = None

    @property
    def speakers(self) -> list[str]:
        """Who was given each turn, in order (a team's routing decisions)."""
        return [d.choice for d in self.routing]


@dataclass(slots=True)
class EvalContext:
    """What an evaluator is given: the case, the outcome of its run, which repeat it was,
    and the model a judge asks (`judge_client`, None unless the eval was given one)."""

    case: Case
    outcome: RunOutcome
    repeat: int = 0
    judge_client: ChatClient | None = None

    @property
    def output(self) -> str:
        """The answer's text."""
        return self.outcome.output

    @property
    def expected(self) -> Any:
        """The case's expected output (None when it has none)."""
        return self.case.expected
