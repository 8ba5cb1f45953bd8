"""Run several coroutines concurrently, starting the safe ones at once in the caller's task.

A synchronous handler (plain code) finishes without ever waiting; a task for it would cost
more than the handler. Coroutines marked eager run in the caller's task until they finish
(or, should one ever wait, continue in a task of their own). The others get a task at once:
an async handler may capture the current task before it first waits (``asyncio.timeout``
does), so it must start in its own. Results come in order, exceptions returned as values,
as ``asyncio.gather(..., return_exceptions=True)`` gives them, with one difference: once one
coroutine fails, those still running are cancelled (their results are `CancelledError`),
since a failed superstep commits nothing and a sibling waiting forever would hang the run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Generator
from typing import Any

__all__ = ["gather_eager"]


_FIRST_SENT: Any = object()


class _Resumed(Coroutine[Any, Any, Any]):
    """A coroutine that already yielded (a future, or None), handed to an asyncio task.

    A coroutine object of its own rather than an ``async def`` wrapper: a task cancelled
    before its first step throws the cancellation into its coroutine without running it,
    and a wrapper would then never pass it on; this one does, so the handler sees it.
    """

    __slots__ = ("_coro", "_first")

    def __init__(self, coro: Coroutine[Any, Any, Any], first: Any) -> None:
        self._coro = coro
        self._first = first

    def send(self, value: Any) -> Any:
        """The task's first step gets what the coroutine yielded; later ones go through."""
        first = self._first
        if first is not _FIRST_SENT:
            self._first = _FIRST_SENT
            return first
        return self._coro.send(value)

    def throw(self, *args: Any) -> Any:
        """Pass a thrown exception (a cancellation) into the coroutine."""
        self._first = _FIRST_SENT
        return self._coro.throw(*args)

    def close(self) -> None:
        """Close the coroutine."""
        self._coro.close()

    def __await__(self) -> Generator[Any, Any, Any]:
        raise TypeError("_Resumed is run by a task, never awaited")


async def gather_eager(coros: list[tuple[Coroutine[Any, Any, Any], bool]]) -> list[Any]:
    """Results (or raised exceptions) of ``(coroutine, eager)`` pairs, in order."""
    loop = asyncio.get_running_loop()
    results: list[Any] = [None] * len(coros)
    waiting: list[tuple[int, asyncio.Task[Any]]] = []
    failed = False

    def on_done(task: asyncio.Task[Any]) -> None:
        nonlocal failed
        if not failed and not task.cancelled() and task.exception() is not None:
            failed = True
            _cancel(waiting)

    for i, (coro, eager) in enumerate(coros):
        if failed:
            coro.close()  # never started: its result is a cancellation
            results[i] = asyncio.CancelledError()
            continue
        if not eager:
            task = loop.create_task(coro)
        else:
            try:
                first = coro.send(None)
            except StopIteration as stop:
                results[i] = stop.value
                continue
            except BaseException as exc:
                if isinstance(exc, KeyboardInterrupt | SystemExit):
                    raise
                results[i] = exc
                failed = True
                _cancel(waiting)
                continue
            task = loop.create_task(_Resumed(coro, first))
        task.add_done_callback(on_done)
        waiting.append((i, task))
    # Awaiting one task at a time costs less than gather(); they all run meanwhile anyway.
    # No bound here: each is a handler, bounded by what it awaits (the runtime's timeout,
    # a model client's) and by cancellation, which the runner's caller controls.
    for n, (i, task) in enumerate(waiting):
        try:
            results[i] = await task
        except asyncio.CancelledError:
            if task.cancelled() and not _current_cancelling():
                results[i] = asyncio.CancelledError()
                continue
            rest = [t for _, t in waiting[n:]]
            for t in rest:
                t.cancel()
            await asyncio.gather(*rest, return_exceptions=True)  # leave no task running
            raise
        except BaseException as exc:
            results[i] = exc
    return results


def _cancel(waiting: list[tuple[int, asyncio.Task[Any]]]) -> None:
    for _, task in waiting:
        task.cancel()  # a no-op on those already done


def _current_cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
