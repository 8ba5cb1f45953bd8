"""gather_eager: results in order, exceptions as values, waiting coroutines still finish."""

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

    async def boom() -> str:
        raise ValueError("boom")

    async def opener() -> None:
        await asyncio.sleep(0)
        gate.set()

    results = await gather_eager(
        [
            (instant("a"), True),
            (waits("b"), True),  # eager, but it waits: it must continue in a task
            (boom(), True),
            (waits("c"), False),
            (opener(), False),
        ]
    )
    assert results[:2] == ["a", "b"] and results[3] == "c"
    assert isinstance(results[2], ValueError)
    assert order[:2] == ["a", "b starts"]  # eager ones ran at once, in the caller's task


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
