"""run_stream: events arrive while the handler that emits them is still running."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest

from cantata.core import WorkflowError
from cantata.workflows import (
    ExecutorCompletedEvent,
    ExecutorInvokedEvent,
    OutputEvent,
    StatusEvent,
    SuperstepCompletedEvent,
    SuperstepStartedEvent,
    WorkflowBuilder,
    WorkflowContext,
    WorkflowEvent,
    WorkflowStartedEvent,
    executor,
)


@dataclass
class Ping(WorkflowEvent):
    n: int


async def test_events_are_live_not_at_the_end_of_the_superstep() -> None:
    consumer_saw_first = asyncio.Event()

    @executor
    async def talker(value: int, ctx: WorkflowContext[None, str]) -> None:
        await ctx.add_event(Ping(1))
        # Only a live stream lets the consumer see Ping(1) while this handler still runs.
        await asyncio.wait_for(consumer_saw_first.wait(), 10)
        await ctx.add_event(Ping(2))
        await ctx.yield_output("done")

    wf = WorkflowBuilder(talker).build()
    stream = wf.run_stream(1)
    pings = []
    async for event in stream:
        if isinstance(event, Ping):
            pings.append(event.n)
            consumer_saw_first.set()
    assert pings == [1, 2]
    assert stream.result.outputs == ["done"]


async def test_event_order_of_a_run() -> None:
    @executor
    async def one(value: int, ctx: WorkflowContext[None, int]) -> None:
        await ctx.yield_output(value)

    stream = WorkflowBuilder(one).build().run_stream(5)
    kinds = [type(e).__name__ for e in [e async for e in stream]]
    assert kinds == [
        WorkflowStartedEvent.__name__,
        StatusEvent.__name__,
        SuperstepStartedEvent.__name__,
        ExecutorInvokedEvent.__name__,
        OutputEvent.__name__,
        ExecutorCompletedEvent.__name__,
        SuperstepCompletedEvent.__name__,
        StatusEvent.__name__,
    ]
    assert stream.result.status == "idle"


async def test_result_before_the_end_is_an_error_and_get_result_drains() -> None:
    @executor
    async def one(value: int, ctx: WorkflowContext[None, int]) -> None:
        await ctx.yield_output(value)

    stream = WorkflowBuilder(one).build().run_stream(5)
    with pytest.raises(WorkflowError, match="not finished"):
        _ = stream.result
    assert (await stream.get_result()).outputs == [5]


async def test_closing_a_stream_early_cancels_the_run() -> None:
    entered = asyncio.Event()
    cancelled = asyncio.Event()

    @executor
    async def forever(value: int, ctx: WorkflowContext[None, int]) -> None:
        entered.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    stream = WorkflowBuilder(forever).build().run_stream(1)
    async for event in stream:
        if isinstance(event, ExecutorInvokedEvent):
            await entered.wait()
            break
    await stream.aclose()
    assert cancelled.is_set()


def _forever(entered: asyncio.Event, cancelled: asyncio.Event) -> Any:
    @executor
    async def forever(value: int, ctx: WorkflowContext[None, int]) -> None:
        await ctx.yield_output(value)
        entered.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    return forever


async def test_breaking_out_of_a_stream_cancels_the_run() -> None:
    entered, cancelled = asyncio.Event(), asyncio.Event()
    before = asyncio.all_tasks()
    stream = WorkflowBuilder(_forever(entered, cancelled)).build().run_stream(1)
    async for event in stream:
        if isinstance(event, OutputEvent):
            await entered.wait()
            break
    async with asyncio.timeout(30):  # a guard against a hang, not a measure
        await cancelled.wait()
        # the stream's closing task, and nothing else of the run, is left: it finishes
        await asyncio.gather(*(asyncio.all_tasks() - before - {asyncio.current_task()}))
    assert not asyncio.all_tasks() - before - {asyncio.current_task()}


async def test_a_stream_used_as_a_context_manager_cancels_the_run_on_exit() -> None:
    entered, cancelled = asyncio.Event(), asyncio.Event()
    async with WorkflowBuilder(_forever(entered, cancelled)).build().run_stream(1) as stream:
        async for event in stream:
            if isinstance(event, OutputEvent):
                await entered.wait()
                break
    assert cancelled.is_set()
    with pytest.raises(WorkflowError, match="closed before its run ended"):
        await stream.get_result()


async def test_a_consumer_cancelled_while_waiting_cancels_the_run() -> None:
    entered, cancelled = asyncio.Event(), asyncio.Event()
    stream = WorkflowBuilder(_forever(entered, cancelled)).build().run_stream(1)

    async def consume() -> None:
        async for _ in stream:
            pass

    task = asyncio.ensure_future(consume())
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cancelled.is_set()


async def test_closing_a_stream_waits_a_bounded_time_for_a_run_that_ignores_cancellation(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import cantata.workflows.stream as stream_module

    monkeypatch.setattr(stream_module, "CLOSE_GRACE", 0.05)
    entered, release, swallowed = asyncio.Event(), asyncio.Event(), asyncio.Event()

    @executor
    async def stubborn(value: int, ctx: WorkflowContext[None, int]) -> None:
        await ctx.yield_output(value)
        entered.set()
        while not release.is_set():
            try:
                await release.wait()
            except asyncio.CancelledError:
                swallowed.set()  # and goes on waiting: a handler that ignores cancellation

    stream = WorkflowBuilder(stubborn).build().run_stream(1)
    async with asyncio.timeout(20):  # before the fix: aclose waited for the run forever
        async for event in stream:
            if isinstance(event, OutputEvent):
                await entered.wait()
                break
        await stream.aclose()
        assert swallowed.is_set()
        assert any("did not stop within" in r.getMessage() for r in caplog.records)
        release.set()  # let it end, so the test leaves nothing running
        assert stream._task is not None
        await asyncio.wait([stream._task])
