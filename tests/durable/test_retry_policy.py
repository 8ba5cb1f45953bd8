"""RetryPolicy under any input: a policy is made or a ConfigurationError says why (never
another error); a made policy's pauses stay within their bounds whatever the attempt, honour
a server's Retry-After up to max_delay; `call` and `wait` stop at once when cancelled."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cantata.core import CancellationToken, CancelledError, ConfigurationError, ModelHTTPError
from cantata.core.retry import RetryPolicy, classify

anything = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**6), max_value=10**6),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.lists(st.integers(), max_size=3),
    st.frozensets(st.sampled_from(["retryable", "fatal", "needs_person", "sometimes"])),
)


@given(
    attempts=anything,
    initial_delay=anything,
    max_delay=anything,
    multiplier=anything,
    jitter=anything,
    retry_on=anything,
)
def test_any_arguments_make_a_policy_or_a_configuration_error(**fields: Any) -> None:
    try:
        policy = RetryPolicy(**fields)
    except ConfigurationError as exc:
        assert "RetryPolicy" in str(exc)
        return
    assert type(policy.attempts) is int and policy.attempts >= 1
    for name in ("initial_delay", "max_delay", "multiplier", "jitter"):
        value = getattr(policy, name)
        assert not isinstance(value, bool) and math.isfinite(value) and value >= 0
    assert policy.retry_on <= {"retryable", "fatal", "needs_person"}


@given(
    initial=st.floats(min_value=0, max_value=1e6),
    cap=st.floats(min_value=0, max_value=1e6),
    multiplier=st.floats(min_value=0, max_value=1e6),
    jitter=st.floats(min_value=0, max_value=1),
    attempt=st.integers(min_value=1, max_value=10**6),
)
def test_a_pause_never_passes_its_cap(
    initial: float, cap: float, multiplier: float, jitter: float, attempt: int
) -> None:
    policy = RetryPolicy(
        attempts=2, initial_delay=initial, max_delay=cap, multiplier=multiplier, jitter=jitter
    )
    assert 0 <= policy.delay(attempt) <= cap
    assert 0 <= policy.pause(attempt) <= cap


def test_a_retry_after_is_waited_for_up_to_the_cap() -> None:
    policy = RetryPolicy(initial_delay=0.01, max_delay=5, jitter=0)
    asked = ModelHTTPError("slow down", status_code=429, retry_after=3.0)
    assert policy.pause(1, asked) == 3.0
    greedy = ModelHTTPError("come back tomorrow", status_code=503, retry_after=86400.0)
    assert policy.pause(1, greedy) == 5
    assert policy.pause(1, ModelHTTPError("busy", status_code=503)) == 0.01


def test_a_list_of_classes_is_kept_as_a_frozenset() -> None:
    policy = RetryPolicy(retry_on=["retryable", "needs_person"])  # type: ignore[arg-type]
    assert policy.retry_on == frozenset({"retryable", "needs_person"})


async def test_call_retries_what_its_policy_retries_and_stops_at_its_attempts() -> None:
    calls: list[int] = []

    async def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionResetError("reset")
        return "ok"

    assert await RetryPolicy(initial_delay=0).call(flaky, what="flaky") == "ok"
    assert len(calls) == 3
    calls.clear()
    with pytest.raises(ConnectionResetError):
        await RetryPolicy(attempts=2, initial_delay=0).call(flaky, what="flaky")
    assert len(calls) == 2


async def test_retry_if_can_refuse_a_retry() -> None:
    calls: list[int] = []

    async def down() -> None:
        calls.append(1)
        raise TimeoutError("slow")

    with pytest.raises(TimeoutError):
        await RetryPolicy(initial_delay=0).call(down, what="down", retry_if=lambda exc: False)
    assert calls == [1]


async def test_wait_ends_at_once_when_its_token_is_cancelled() -> None:
    token = CancellationToken()
    waiting = asyncio.ensure_future(RetryPolicy().wait(600, token))
    await asyncio.sleep(0)
    token.cancel()
    with pytest.raises(CancelledError):
        await asyncio.wait_for(waiting, 10)
    with pytest.raises(CancelledError):  # already cancelled: no wait at all
        await RetryPolicy().wait(600, token)


async def test_a_cancelled_task_stays_cancelled_in_a_wait() -> None:
    waiting = asyncio.ensure_future(RetryPolicy().wait(600, CancellationToken()))
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting


def test_dropped_connections_of_the_http_stack_are_retryable() -> None:
    import httpx

    assert classify(httpx.RemoteProtocolError("peer closed")) == "retryable"
    assert classify(httpx.ConnectError("refused")) == "retryable"
    assert classify(httpx.HTTPStatusError.__new__(httpx.HTTPStatusError)) == "fatal"
