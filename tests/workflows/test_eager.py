"""gather_eager: results in order, exceptions as values, a failure cancels what still runs."""

from __future__ import annotations

import asyncio

import pytest

from cantata.workflows._eager import gather_eager


async def test_eager_and_task_coroutines_finish_in_order() -> None:
    gate = asyncio.Event()
    order: list[str] = []

    async def instant(name: str) -> str:
        order.append(name)
        return name

    async def waits(name: str) -> str:
        order.append(f"{name} starts")
        await gate.wait()
        return name

    async def opener() -> None:
        gate.set()

    results = await gather_eager(
        [
            (instant("a"), True),
            (waits("b"), True),  # eager, but it waits: it must continue in a task
            (waits("c"), False),
            (opener(), False),
        ]
    )
    assert results == ["a", "b", "c", None]
    assert order[:2] == ["a", "b starts"]  # eager ones ran at once, in the caller's task


@pytest.mark.parametrize("eager_failure", [True, False])
async def test_a_failure_cancels_what_still_runs_and_starts_nothing_more(
    eager_failure: bool,
) -> None:
    cancelled: list[str] = []
    started: list[str] = []

    async def forever(name: str) -> str:
        started.append(name)
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(name)
            raise
        return name

    async def boom() -> str:
        raise ValueError("boom")

    async def instant() -> str:
        return "instant"

    results = await gather_eager(
        [
            (forever("eager"), True),
            (forever("task"), False),
            (boom(), eager_failure),
            (instant(), True),
        ]
    )
    assert isinstance(results[2], ValueError)
    assert isinstance(results[0], asyncio.CancelledError) and "eager" in cancelled
    assert isinstance(results[1], asyncio.CancelledError)
    assert set(started) - set(cancelled) == set()  # whatever started was cancelled
    assert results[3] == "instant" or isinstance(results[3], asyncio.CancelledError)


async def test_cancelling_the_caller_cancels_what_still_runs() -> None:
    started: list[int] = []
    both_started = asyncio.Event()
    cancelled: list[int] = []

    async def forever(n: int) -> None:
        started.append(n)
        if len(started) == 2:
            both_started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(n)
            raise

    task = asyncio.ensure_future(gather_eager([(forever(1), False), (forever(2), True)]))
    await both_started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sorted(cancelled) == [1, 2]
