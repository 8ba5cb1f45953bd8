"""Run a dataset against a target: every case, `repeats` times, at most `concurrency` at
once, each run judged by the dataset's evaluators, the call's, and the case's own.

A fixed pool of `concurrency` workers takes runs from one queue in dataset order, so the
bound holds whatever the dataset's size and no task waits on a semaphore with a thousand
others. A run that raises (or passes its `timeout`) is a failed result with its error, and
an evaluator that raises is a failed verdict with its error: one bad case or one bad
evaluator never stops the eval. Evaluators that cannot work (a judge without a model) are
refused before anything runs.
"""

from __future__ import annotations

import asyncio
import inspect
import math
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from .. import __version__
from ..core import ConfigurationError
from ..models import ChatClient
from .context import Case, EvalContext, EvalResult, Evaluator, RunOutcome
from .dataset import Dataset
from .judge import Judge
from .report import CaseResult, EvalReport
from .targets import Target, as_target, target_name

__all__ = ["evaluate", "evaluate_sync"]


async def evaluate(
    target: Target,
    dataset: Dataset | Iterable[Case],
    *,
    evaluators: Sequence[Evaluator] = (),
    concurrency: int = 4,
    repeats: int = 1,
    timeout: float | None = None,  # noqa: ASYNC109 (per run, not the whole eval)
    judge_client: ChatClient | None = None,
    on_result: Callable[[CaseResult], None] | None = None,
    name: str | None = None,
) -> EvalReport:
    """Run every case of `dataset` against `target` and judge each run.

    `target` is an agent, a team, a workflow or a function of the input. `evaluators` judge
    every case, after the dataset's own; `judge_client` is the model of `Judge` evaluators
    that were given none; `on_result` sees each run's result as it is judged (a progress
    line). Runs go `concurrency` at a time (a local model serves one request at a time, so
    1 suits it); `timeout` bounds each run, in seconds.
    """
    if not isinstance(dataset, Dataset):
        dataset = Dataset(dataset)
    _check_positive_int("concurrency", concurrency)
    _check_positive_int("repeats", repeats)
    if timeout is not None and not (isinstance(timeout, int | float) and timeout > 0
                                    and math.isfinite(timeout)):  # fmt: skip
        raise ConfigurationError(f"timeout must be a positive number of seconds, got {timeout!r}")
    shared = (*dataset.evaluators, *evaluators)
    for e in shared:
        if not isinstance(e, Evaluator):
            raise ConfigurationError(f"{e!r} is not an evaluator (it needs a name and evaluate)")
    _check_judges(dataset, shared, judge_client)
    run = as_target(target)
    jobs = [(case, r) for case in dataset.cases for r in range(repeats)]
    results: list[CaseResult | None] = [None] * len(jobs)
    queue = iter(enumerate(jobs))

    async def worker() -> None:
        for index, (case, repeat) in queue:
            outcome = await _run_one(run, case, timeout)
            ctx = EvalContext(case, outcome, repeat, judge_client)
            result = await _judge(ctx, (*shared, *case.evaluators))
            results[index] = result
            if on_result is not None:
                on_result(result)

    started = datetime.now(UTC).isoformat(timespec="seconds")
    t0 = time.perf_counter()
    async with asyncio.TaskGroup() as group:
        for _ in range(min(concurrency, len(jobs))):
            group.create_task(worker())
    return EvalReport(
        name=name or dataset.name,
        target=target_name(target),
        results=[r for r in results if r is not None],
        started=started,
        duration=time.perf_counter() - t0,
        concurrency=concurrency,
        repeats=repeats,
        cantata=__version__,
    )


def evaluate_sync(target: Target, dataset: Dataset | Iterable[Case], **kwargs: Any) -> EvalReport:
    """`evaluate` from synchronous code (a script, a test): runs its own event loop."""
    return asyncio.run(evaluate(target, dataset, **kwargs))


def _check_positive_int(name: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigurationError(f"{name} must be a positive int, got {value!r}")


def _check_judges(dataset: Dataset, shared: Sequence[Evaluator], client: ChatClient | None) -> None:
    if client is not None:
        return
    every = [*shared, *(e for c in dataset.cases for e in c.evaluators)]
    if any(isinstance(e, Judge) and e.client is None for e in every):
        raise ConfigurationError(
            "a judge evaluator has no model: pass judge_client= to evaluate() (cantata eval "
            "--judge-model), or give it one with Judge(rubric, client=...)"
        )


async def _run_one(
    run: Callable[[Any], Awaitable[RunOutcome]],
    case: Case,
    timeout: float | None,  # noqa: ASYNC109
) -> RunOutcome:
    t0 = time.perf_counter()
    try:
        if timeout is None:
            outcome = await run(case.input)
        else:
            outcome = await asyncio.wait_for(run(case.input), timeout)
    except TimeoutError:
        outcome = RunOutcome(error=f"timed out after {timeout} s")
    except Exception as exc:
        outcome = RunOutcome(error=f"{type(exc).__name__}: {exc}")
    outcome.latency = time.perf_counter() - t0
    return outcome


async def _judge(ctx: EvalContext, evaluators: Sequence[Evaluator]) -> CaseResult:
    outcome = ctx.outcome
    case = ctx.case
    scores: list[EvalResult] = []
    if outcome.error is None:
        for e in evaluators:
            try:
                verdict = e.evaluate(ctx)
                if inspect.isawaitable(verdict):
                    verdict = await verdict
            except Exception as exc:
                why = f"the evaluator raised {type(exc).__name__}: {exc}"
                verdict = EvalResult(e.name, False, 0.0, why)
            scores.append(verdict)
    return CaseResult(
        case=case.name,
        repeat=ctx.repeat,
        input=case.input,
        expected=case.expected,
        output=outcome.output,
        scores=scores,
        latency=outcome.latency,
        usage=outcome.usage,
        tool_calls=outcome.tool_calls,
        speakers=outcome.speakers,
        metadata=case.metadata,
        error=outcome.error,
    )
