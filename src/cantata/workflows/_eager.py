"""Run several coroutines concurrently, starting the safe ones at once in the caller's task.

A synchronous handler (plain code) finishes without ever waiting; a task for it would cost
more than the handler. Coroutines marked eager run in the caller's task until they finish
(or, should one ever wait, continue in a task of their own). The others get a task at once:
an async handler may capture the current task before it first waits (``asyncio.timeout``
does), so it must start in its own. Semantics are those of ``asyncio.gather(...,
return_exceptions=True)``: results in order, exceptions returned as values.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Generator
from typing import Any

__all__ = ["gather_eager"]


class _Continue:
    """Hands a coroutine that already yielded (a future, or None) to an asyncio task."""

    __slots__ = ("_coro", "_first")

    def __init__(self, coro: Coroutine[Any, Any, Any], first: Any) -> None:
        self._coro = coro
        self._first = first

    def __await__(self) -> Generator[Any, Any, Any]:
        coro = self._coro
        pending = self._first
        while True:
            try:
                sent = yield pending
            except BaseException as exc:  # a cancellation thrown in by the task
                try:
                    pending = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    pending = coro.send(sent)
                except StopIteration as stop:
                    return stop.value


async def _finish(coro: Coroutine[Any, Any, Any], first: Any) -> Any:
    return await _Continue(coro, first)


async def gather_eager(coros: list[tuple[Coroutine[Any, Any, Any], bool]]) -> list[Any]:
    """Results (or raised exceptions) of ``(coroutine, eager)`` pairs, in order."""
    loop = asyncio.get_running_loop()
    results: list[Any] = [None] * len(coros)
    waiting: list[tuple[int, asyncio.Task[Any]]] = []
    for i, (coro, eager) in enumerate(coros):
        if not eager:
            waiting.append((i, loop.create_task(coro)))
            continue
        try:
            first = coro.send(None)
        except StopIteration as stop:
            results[i] = stop.value
            continue
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt | SystemExit):
                raise
            results[i] = exc
            continue
        waiting.append((i, loop.create_task(_finish(coro, first))))
    # Awaiting one task at a time costs less than gather(); they all run meanwhile anyway.
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


def _current_cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
