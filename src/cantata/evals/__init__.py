"""Evals: run an agent, a team or a workflow over a dataset of cases and measure it.

A dataset (YAML or JSONL, `load_dataset`) holds cases: an input, what is expected, metadata.
`evaluate` runs each case against the target (`repeats` times, `concurrency` at once) and
judges every run with evaluators: exact, contains, regex, JSON Schema, tool-call
trajectory, team routing, latency and usage bounds, an LLM judge with a rubric, or plain
functions. The `EvalReport` prints as a table, saves as JSON, renders as one HTML page, and
`compare_reports` says which cases regressed since an older one. Run the target on a
`ReplayChatClient` and an eval makes no model call, so it belongs in CI; recorded traffic
of a served app becomes a dataset with `dataset_from_cassette`. `cantata eval` does all of
this from the command line.

Evals sit above agents, workflows and teams: they run them, and none of them knows evals.
"""

from .compare import CaseChange, Comparison, compare_reports
from .context import Case, EvalContext, EvalResult, Evaluator, RunOutcome, ToolCall
from .dataset import EVALUATOR_KINDS, MAX_DATASET_BYTES, Dataset, load_dataset, parse_evaluator
from .errors import DatasetError, ReportError
from .evaluators import (
    BuiltinEvaluator,
    Contains,
    Exact,
    ExpectedCall,
    FunctionEvaluator,
    JsonSchema,
    MaxLatency,
    MaxUsage,
    Regex,
    Routing,
    Trajectory,
    evaluator,
)
from .judge import Judge, JudgeVerdict
from .render import comparison_table, headline, print_report, report_html, report_table
from .report import REPORT_SCHEMA_VERSION, CaseResult, CaseSummary, EvalReport, EvaluatorSummary
from .runner import evaluate, evaluate_sync
from .targets import Target, as_target, target_name
from .traffic import dataset_from_cassette

__all__ = [
    "EVALUATOR_KINDS",
    "MAX_DATASET_BYTES",
    "REPORT_SCHEMA_VERSION",
    "BuiltinEvaluator",
    "Case",
    "CaseChange",
    "CaseResult",
    "CaseSummary",
    "Comparison",
    "Contains",
    "Dataset",
    "DatasetError",
    "EvalContext",
    "EvalReport",
    "EvalResult",
    "Evaluator",
    "EvaluatorSummary",
    "Exact",
    "ExpectedCall",
    "FunctionEvaluator",
    "JsonSchema",
    "Judge",
    "JudgeVerdict",
    "MaxLatency",
    "MaxUsage",
    "Regex",
    "ReportError",
    "Routing",
    "RunOutcome",
    "Target",
    "ToolCall",
    "Trajectory",
    "as_target",
    "compare_reports",
    "comparison_table",
    "dataset_from_cassette",
    "evaluate",
    "evaluate_sync",
    "evaluator",
    "headline",
    "load_dataset",
    "parse_evaluator",
    "print_report",
    "report_html",
    "report_table",
    "target_name",
]
