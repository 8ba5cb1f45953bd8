"""Error classes and retry policies: what is retried, the backoff's bounds, and executors
retried within their superstep (a journaled effect is not repeated by the retry)."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cantata.core import ConfigurationError, ModelHTTPError, WorkflowError
from cantata.core.retry import NeedsPerson, RetryPolicy, classify
from cantata.workflows import InMemoryCheckpointStore, WorkflowBuilder, WorkflowContext, executor


def http(code: int) -> ModelHTTPError:
    return ModelHTTPError(f"status {code}", status_code=code)


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (TimeoutError("slow"), "retryable"),
        (ConnectionResetError("reset"), "retryable"),
        (http(429), "retryable"),
        (http(503), "retryable"),
        (http(400), "fatal"),
        (ConfigurationError("bad"), "fatal"),
        (ValueError("bad"), "fatal"),
        (NeedsPerson("card refused"), "needs_person"),
        (RuntimeError("unknown"), "fatal"),
    ],
)
def test_errors_are_classified(exc: BaseException, expected: str) -> None:
    assert classify(exc) == expected


def test_a_wrapper_is_classified_by_its_cause() -> None:
    try:
        try:
            raise ConnectionResetError("reset")
        except ConnectionResetError as inner:
            raise WorkflowError("executor 'x' failed") from inner
    except WorkflowError as outer:
        assert classify(outer) == "retryable"


def test_the_backoff_grows_to_its_cap_less_its_jitter() -> None:
    policy = RetryPolicy(attempts=9, initial_delay=1.0, max_delay=5.0, jitter=0.5)
    rng = random.Random(3)
    for attempt, base in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 5.0), (8, 5.0)]:
        for _ in range(50):
            assert base * 0.5 <= policy.delay(attempt, rng) <= base


@given(
    attempts=st.one_of(st.integers(max_value=0), st.floats(), st.text(), st.none()),
)
def test_a_policy_with_bad_attempts_is_refused(attempts: Any) -> None:
    with pytest.raises(ConfigurationError, match="attempts"):
        RetryPolicy(attempts=attempts)


@pytest.mark.parametrize(
    "bad",
    [
        {"initial_delay": -1},
        {"jitter": 2},
        {"multiplier": float("nan")},
        {"retry_on": frozenset({"sometimes"})},
    ],
)
def test_bad_policy_fields_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError, match="RetryPolicy"):
        RetryPolicy(**bad)


def flaky_flow(failures: list[BaseException], attempts: list[int], paid: list[int]) -> Any:
    def pay(n: int) -> int:
        paid.append(n)
        return n

    @executor
    async def call(n: int, ctx: WorkflowContext[None, int]) -> None:
        attempts.append(n)
        receipt = await ctx.effect("pay", pay, n)
        if failures:
            raise failures.pop(0)
        ctx.yield_output(receipt)

    return WorkflowBuilder(call).with_retry(RetryPolicy(attempts=3, initial_delay=0)).build()


async def test_a_retryable_failure_retries_the_executor_and_not_its_effect() -> None:
    attempts: list[int] = []
    paid: list[int] = []
    wf = flaky_flow([ConnectionResetError("reset"), http(503)], attempts, paid)
    result = await wf.run(7, checkpoint_store=InMemoryCheckpointStore())
    assert result.outputs == [7] and attempts == [7, 7, 7] and paid == [7]


async def test_a_fatal_failure_is_not_retried() -> None:
    attempts: list[int] = []
    wf = flaky_flow([ValueError("bad amount")], attempts, [])
    with pytest.raises(WorkflowError, match="bad amount"):
        await wf.run(7)
    assert attempts == [7]


async def test_retries_end_after_the_policy_s_attempts() -> None:
    attempts: list[int] = []
    wf = flaky_flow([TimeoutError("slow")] * 5, attempts, [])
    with pytest.raises(WorkflowError, match="slow"):
        await wf.run(7)
    assert attempts == [7, 7, 7]


def test_with_retry_takes_a_policy() -> None:
    @executor
    def one(n: int) -> None:
        return None

    with pytest.raises(ConfigurationError, match="RetryPolicy"):
        WorkflowBuilder(one).with_retry(3)  # type: ignore[arg-type]
