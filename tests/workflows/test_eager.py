"""gather_eager: results in order, exceptions as values, a failure cancels what still runs."""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

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


async def test_handlers_that_never_wait_share_one_task_instead_of_one_each() -> None:
    loop = asyncio.get_running_loop()
    made: list[object] = []
    factory = loop.get_task_factory()

    def counting(loop: asyncio.AbstractEventLoop, coro: Any, **kw: Any) -> asyncio.Task[Any]:
        made.append(coro)
        return asyncio.Task(coro, loop=loop, **kw)

    async def instant(n: int) -> int:
        return n * 2

    loop.set_task_factory(counting)
    try:
        results = await gather_eager([(instant(n), False) for n in range(100)])
    finally:
        loop.set_task_factory(factory)
    assert results == [n * 2 for n in range(100)]
    assert len(made) <= 1  # one carrier, left unused; before: a task per handler


async def test_a_handler_runs_in_one_task_from_its_first_line_to_its_last() -> None:
    caller = asyncio.current_task()
    seen: dict[str, tuple[object, object]] = {}

    async def hops(name: str) -> str:
        before = asyncio.current_task()
        await asyncio.sleep(0)
        seen[name] = (before, asyncio.current_task())
        return name

    async def instant() -> object:
        return asyncio.current_task()

    results = await gather_eager([(hops("a"), False), (instant(), False), (hops("b"), False)])
    assert results[0] == "a" and results[2] == "b"
    for before, after in seen.values():
        assert before is after and before is not caller and before is not None
    assert seen["a"][0] is not seen["b"][0]  # each suspended handler has its own task
    assert results[1] is not caller


async def test_a_timeout_inside_a_handler_cancels_that_handler_only() -> None:
    release = asyncio.Event()

    async def times_out() -> str:
        try:
            async with asyncio.timeout(0.01):
                await asyncio.Event().wait()
        except TimeoutError:
            release.set()
            return "timed out"
        return "never"

    async def sibling() -> str:
        await release.wait()
        return "released"

    async def plain() -> str:
        return "plain"

    results = await gather_eager([(times_out(), False), (sibling(), False), (plain(), True)])
    assert results == ["timed out", "released", "plain"]
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


async def test_context_variables_set_by_a_handler_are_its_own() -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="caller")

    async def sets(value: str) -> tuple[str, str]:
        before = var.get()
        var.set(value)
        await asyncio.sleep(0)
        return before, var.get()

    async def reads() -> str:
        await asyncio.sleep(0)
        return var.get()

    results = await gather_eager(
        [(sets("one"), False), (reads(), False), (sets("two"), False), (reads(), False)]
    )
    assert results == [("caller", "one"), "caller", ("caller", "two"), "caller"]
    assert var.get() == "caller"


async def test_a_handler_that_cancels_its_own_task_ends_cancelled_and_not_the_next() -> None:
    async def cancels_itself() -> str:
        task = asyncio.current_task()
        assert task is not None
        task.cancel()  # a request for later: this handler finishes first
        return "done"

    async def next_one() -> str:
        await asyncio.sleep(0)
        return "next"

    results = await gather_eager([(cancels_itself(), False), (next_one(), False)])
    assert isinstance(results[0], asyncio.CancelledError)  # as its own task would end
    assert results[1] == "next"


async def test_cancelling_the_caller_reaches_a_handler_that_suspended_eagerly() -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def waits() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def instant() -> int:
        return 1

    task = asyncio.ensure_future(gather_eager([(instant(), False), (waits(), False)]))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cancelled.is_set()


async def test_a_fan_out_of_async_class_handlers_with_timeouts_and_context() -> None:
    from cantata.workflows import Executor, WorkflowBuilder, WorkflowContext, handler

    var: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="")

    class Worker(Executor):
        @handler
        async def work(self, n: int, ctx: WorkflowContext[str]) -> None:
            var.set(self.id)
            async with asyncio.timeout(30):
                if n % 2:
                    await asyncio.sleep(0)  # some suspend, some do not
            await ctx.send_message(var.get())

    class Start(Executor):
        @handler
        async def go(self, n: int, ctx: WorkflowContext[int]) -> None:
            await ctx.send_message(n)

    class Join(Executor):
        @handler
        async def join(self, names: list[str], ctx: WorkflowContext[None, list[str]]) -> None:
            await ctx.yield_output(sorted(names))

    start, join = Start("start"), Join("join")
    workers = [Worker(f"w{i}") for i in range(20)]
    wf = (
        WorkflowBuilder(start)
        .add_fan_out_edges(start, workers)
        .add_fan_in_edges(workers, join)
        .build()
    )
    for n in (1, 2):
        assert (await wf.run(n)).outputs == [sorted(w.id for w in workers)]
