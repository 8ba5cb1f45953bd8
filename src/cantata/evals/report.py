"""The report of an eval: every run's verdicts, and the figures over them, as JSON.

One `CaseResult` per run of a case (a case run three times has three), in dataset order.
The figures a reader wants first are computed from them, never stored twice: the pass rate
(runs that passed every evaluator), each evaluator's pass rate and mean score, each case's
pass rate over its repeats, usage, latency percentiles and the failures.

Reports are JSON with a ``schema_version``, so `cantata eval --compare` can read one
written by an older run. Version notes:

- 1: ``{"schema_version": 1, "name", "target", "started", "duration", "concurrency",
  "repeats", "cantata", "results": [...]}``; each result has ``case``, ``repeat``,
  ``input``, ``expected``, ``output``, ``metadata``, ``scores`` (``evaluator``, ``passed``,
  ``score``, ``reason``), ``latency``, ``usage`` (``input_tokens``, ``output_tokens``),
  ``tool_calls`` (``name``, ``arguments``), ``speakers``, ``error``.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core import Usage
from .context import EvalResult, ToolCall
from .errors import ReportError

__all__ = [
    "REPORT_SCHEMA_VERSION",
    "CaseResult",
    "CaseSummary",
    "EvalReport",
    "EvaluatorSummary",
]

REPORT_SCHEMA_VERSION = 1


@dataclass(slots=True)
class CaseResult:
    """One run of one case: what it answered, each evaluator's verdict, what it cost.

    A run that raised has its `error` and no verdicts; it counts as failed.
    """

    case: str
    repeat: int
    input: Any
    expected: Any
    output: str
    scores: list[EvalResult] = field(default_factory=list)
    latency: float = 0.0
    usage: Usage = field(default_factory=Usage)
    tool_calls: list[ToolCall] = field(default_factory=list)
    speakers: list[str] = field(default_factory=list)
    metadata: Mapping[str, Any] = field(default_factory=dict)
    error: str | None = None

    @property
    def passed(self) -> bool:
        """The run did not fail and every evaluator passed it."""
        return self.error is None and all(s.passed for s in self.scores)

    @property
    def score(self) -> float:
        """The mean of the evaluators' scores (0 for a failed run, 1 with no evaluator)."""
        if self.error is not None:
            return 0.0
        if not self.scores:
            return 1.0
        return sum(s.score for s in self.scores) / len(self.scores)

    @property
    def failures(self) -> list[str]:
        """Why the run failed, one line per reason (empty when it passed)."""
        if self.error is not None:
            return [f"error: {self.error}"]
        return [f"{s.evaluator}: {s.reason or 'failed'}" for s in self.scores if not s.passed]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data."""
        return {
            "case": self.case,
            "repeat": self.repeat,
            "input": self.input,
            "expected": self.expected,
            "output": self.output,
            "metadata": dict(self.metadata),
            "scores": [
                {"evaluator": s.evaluator, "passed": s.passed, "score": s.score, "reason": s.reason}
                for s in self.scores
            ],
            "latency": self.latency,
            "usage": {
                "input_tokens": self.usage.input_tokens,
                "output_tokens": self.usage.output_tokens,
            },
            "tool_calls": [
                {"name": c.name, "arguments": dict(c.arguments)} for c in self.tool_calls
            ],
            "speakers": list(self.speakers),
            "error": self.error,
        }

    @classmethod
    def from_dict(cls, data: Any, n: int = 0) -> CaseResult:
        """Read `to_dict` output; malformed data raises `ReportError`."""
        if not isinstance(data, dict):
            raise ReportError(f"result {n} of the report is not an object")
        try:
            scores = [
                EvalResult(str(s["evaluator"]), bool(s["passed"]), float(s["score"]),
                           str(s.get("reason") or ""))
                for s in data.get("scores") or []
            ]  # fmt: skip
            usage = data.get("usage") or {}
            calls = [
                ToolCall(str(c["name"]), dict(c.get("arguments") or {}))
                for c in data.get("tool_calls") or []
            ]
            error = data.get("error")
            return cls(
                case=str(data["case"]),
                repeat=int(data.get("repeat", 0)),
                input=data.get("input"),
                expected=data.get("expected"),
                output=str(data.get("output") or ""),
                scores=scores,
                latency=float(data.get("latency", 0.0)),
                usage=Usage(int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0))),
                tool_calls=calls,
                speakers=[str(s) for s in data.get("speakers") or []],
                metadata=dict(data.get("metadata") or {}),
                error=None if error is None else str(error),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ReportError(f"result {n} of the report is malformed ({exc!r})") from None


@dataclass(frozen=True, slots=True)
class CaseSummary:
    """One case over its repeats."""

    case: str
    runs: int
    passed: int
    score: float
    latency: float
    failures: tuple[str, ...]

    @property
    def pass_rate(self) -> float:
        """Share of the case's runs that passed."""
        return self.passed / self.runs if self.runs else 0.0


@dataclass(frozen=True, slots=True)
class EvaluatorSummary:
    """One evaluator over every run it judged."""

    evaluator: str
    runs: int
    passed: int
    score: float

    @property
    def pass_rate(self) -> float:
        """Share of the runs it passed."""
        return self.passed / self.runs if self.runs else 0.0


@dataclass(slots=True)
class EvalReport:
    """What an eval found: one `CaseResult` per run, and the figures over them."""

    name: str
    target: str
    results: list[CaseResult]
    started: str = ""
    duration: float = 0.0
    concurrency: int = 1
    repeats: int = 1
    cantata: str = ""

    @property
    def runs(self) -> int:
        """Runs made (cases times repeats)."""
        return len(self.results)

    @property
    def passed(self) -> int:
        """Runs that passed."""
        return sum(1 for r in self.results if r.passed)

    @property
    def pass_rate(self) -> float:
        """Share of runs that passed every evaluator."""
        return self.passed / self.runs if self.runs else 0.0

    @property
    def score(self) -> float:
        """Mean score over the runs."""
        return sum(r.score for r in self.results) / self.runs if self.runs else 0.0

    @property
    def errors(self) -> int:
        """Runs that raised."""
        return sum(1 for r in self.results if r.error is not None)

    @property
    def usage(self) -> Usage:
        """Tokens over every run."""
        total = Usage()
        for r in self.results:
            total = total + r.usage
        return total

    def latency(self, quantile: float) -> float:
        """A latency percentile over the runs (``0.5`` the median, ``1.0`` the worst)."""
        times = sorted(r.latency for r in self.results)
        if not times:
            return 0.0
        return times[min(len(times) - 1, max(0, math.ceil(quantile * len(times)) - 1))]

    def cases(self) -> dict[str, CaseSummary]:
        """Each case over its repeats, in dataset order."""
        groups: dict[str, list[CaseResult]] = {}
        for r in self.results:
            groups.setdefault(r.case, []).append(r)
        return {name: _summary(name, runs) for name, runs in groups.items()}

    def evaluators(self) -> dict[str, EvaluatorSummary]:
        """Each evaluator over the runs it judged, in the order they first appear."""
        seen: dict[str, list[EvalResult]] = {}
        for r in self.results:
            for s in r.scores:
                seen.setdefault(s.evaluator, []).append(s)
        return {
            name: EvaluatorSummary(name, len(v), sum(1 for s in v if s.passed),
                                   sum(s.score for s in v) / len(v))
            for name, v in seen.items()
        }  # fmt: skip

    def failures(self) -> list[CaseResult]:
        """The runs that failed."""
        return [r for r in self.results if not r.passed]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data (what `save` writes)."""
        return {
            "schema_version": REPORT_SCHEMA_VERSION,
            "name": self.name,
            "target": self.target,
            "started": self.started,
            "duration": self.duration,
            "concurrency": self.concurrency,
            "repeats": self.repeats,
            "cantata": self.cantata,
            "summary": {
                "runs": self.runs,
                "passed": self.passed,
                "pass_rate": self.pass_rate,
                "score": self.score,
            },
            "results": [r.to_dict() for r in self.results],
        }

    def dumps(self) -> str:
        """The report as JSON text."""
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=1, default=_plain)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the report as JSON, atomically."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_text(self.dumps(), encoding="utf-8")
        os.replace(tmp, target)

    @classmethod
    def from_dict(cls, data: Any) -> EvalReport:
        """Read `to_dict` output; refuses an unknown schema version or malformed data."""
        if not isinstance(data, dict):
            raise ReportError("an eval report must be a JSON object")
        version = data.get("schema_version")
        if version != REPORT_SCHEMA_VERSION:
            raise ReportError(
                f"eval report schema_version {version!r} is not supported (this cantata "
                f"reads {REPORT_SCHEMA_VERSION}); run the eval again"
            )
        raw = data.get("results")
        if not isinstance(raw, list):
            raise ReportError("field 'results' of an eval report must be a list")
        try:
            return cls(
                name=str(data.get("name") or "dataset"),
                target=str(data.get("target") or ""),
                results=[CaseResult.from_dict(r, n) for n, r in enumerate(raw)],
                started=str(data.get("started") or ""),
                duration=float(data.get("duration") or 0.0),
                concurrency=int(data.get("concurrency") or 1),
                repeats=int(data.get("repeats") or 1),
                cantata=str(data.get("cantata") or ""),
            )
        except (TypeError, ValueError) as exc:
            raise ReportError(f"the eval report is malformed ({exc!r})") from None

    @classmethod
    def loads(cls, text: str | bytes) -> EvalReport:
        """Read a report from JSON text."""
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise ReportError(f"the eval report is not JSON: {str(exc)[:200]}") from None
        return cls.from_dict(data)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> EvalReport:
        """Read a report file."""
        try:
            text = Path(path).read_bytes()
        except OSError as exc:
            raise ReportError(f"eval report {str(path)!r} cannot be read: {exc.strerror}") from None
        return cls.loads(text)


def _summary(name: str, runs: Iterable[CaseResult]) -> CaseSummary:
    runs = list(runs)
    failures: list[str] = []
    for r in runs:
        for line in r.failures:
            if line not in failures:
                failures.append(line)
    return CaseSummary(
        name,
        len(runs),
        sum(1 for r in runs if r.passed),
        sum(r.score for r in runs) / len(runs),
        sum(r.latency for r in runs) / len(runs),
        tuple(failures),
    )


def _plain(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    return str(value)
