"""A served run that waits for a person nobody answers is released after `abandon_after`
seconds (or as the oldest past the number kept): logged, counted in ``/metrics``, and no
longer reachable from the server."""

from __future__ import annotations

import asyncio
import gc
import logging
import time
import weakref

import pytest
from prometheus_client import generate_latest

from cantata.agents import LocalThread
from cantata.core import ConfigurationError
from cantata.serve import DEFAULT_ABANDON_AFTER, Limits, ServeMetrics
from cantata.serve.human_input import WaitingThreads


def _abandoned(metrics: ServeMetrics, reason: str) -> float:
    value = metrics.registry.get_sample_value(
        "cantata_serve_abandoned_runs_total", {"reason": reason}
    )
    return 0.0 if value is None else value


def test_a_run_left_waiting_past_abandon_after_is_released_logged_and_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    metrics = ServeMetrics()
    waiting = WaitingThreads(abandon_after=0.05, abandoned=metrics.abandoned)
    left, answered = LocalThread(), LocalThread()
    ref = weakref.ref(left)
    waiting.hold("left", left)
    del left
    time.sleep(0.1)
    waiting.hold("answered", answered)  # a run starting to wait looks at the others
    assert "left" not in waiting
    assert waiting.take("answered") is answered
    gc.collect()
    assert ref() is None
    assert _abandoned(metrics, "timeout") == 1
    assert "released the waiting run of left" in caplog.text
    assert b'cantata_serve_abandoned_runs_total{reason="timeout"} 1.0' in generate_latest(
        metrics.registry
    )


def test_a_run_answered_in_time_is_not_abandoned_and_the_oldest_past_the_limit_is() -> None:
    metrics = ServeMetrics()
    waiting = WaitingThreads(2, abandon_after=60, abandoned=metrics.abandoned)
    threads = [LocalThread() for _ in range(3)]
    for i, thread in enumerate(threads):
        waiting.hold(str(i), thread)
    assert "0" not in waiting and waiting.take("2") is threads[2]
    assert _abandoned(metrics, "limit") == 1 and _abandoned(metrics, "timeout") == 0


def test_the_bound_is_the_users_with_an_hour_by_default() -> None:
    assert DEFAULT_ABANDON_AFTER == 3600.0 == Limits().abandon_after
    assert Limits(abandon_after=5).abandon_after == 5
    with pytest.raises(ConfigurationError, match="abandon_after"):
        Limits(abandon_after=0)


def test_the_log_names_the_bound(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "cantata.serve")
    waiting = WaitingThreads(abandon_after=0.01)
    waiting.hold("x", LocalThread())
    time.sleep(0.03)
    assert waiting.take("x") is None
    assert "not answered within 0.01s" in caplog.text


async def test_an_idle_server_releases_a_run_nobody_answers_when_its_time_is_up() -> None:
    """No other request comes: the timer on the loop releases the run all the same."""
    metrics = ServeMetrics()
    waiting = WaitingThreads(abandon_after=0.05, abandoned=metrics.abandoned)
    left = LocalThread()
    ref = weakref.ref(left)
    waiting.hold("left", left)
    del left
    for _ in range(100):  # bounded: 2 s at most
        if "left" not in waiting:
            break
        await asyncio.sleep(0.02)
    assert "left" not in waiting
    gc.collect()
    assert ref() is None
    assert _abandoned(metrics, "timeout") == 1
    assert waiting._timer is None  # nothing held, nothing armed


async def test_a_run_answered_before_its_time_leaves_no_timer_behind() -> None:
    waiting = WaitingThreads(abandon_after=60)
    thread = LocalThread()
    waiting.hold("x", thread)
    assert waiting._timer is not None
    assert waiting.take("x") is thread
    assert waiting._timer is None
