"""Run several coroutines concurrently, each starting at once, without a task per coroutine.

A superstep's handlers mostly finish without ever waiting; a task each would cost more than
the handlers (task, scheduled step, done callback, wake-up of the caller). So every
coroutine takes its first step at once, here, and gets a task of its own only if it really
suspends: the idea of Python 3.12's eager task factory, on 3.11 too.

Two kinds of coroutine:

- plain (``sync=True``: an executor whose handlers are all synchronous) runs in the
  caller's task and context, as a function call would;
- the others run as if in a task of their own from their first line, because an async
  handler may capture its task before it first waits (``asyncio.timeout`` does, and so do
  ``TaskGroup`` and ``asyncio.current_task()``), and sets context variables of its own.
  The first step runs inside a fresh copy of the caller's context, while the current task
  is a *carrier*: a real task created for the purpose and not started yet. A coroutine that
  finishes leaves the carrier free for the next one (so a fan-out whose handlers never wait
  makes one task, not one each); one that suspends keeps it, and the carrier's first step
  takes over where the eager step stopped. So whatever it captured is the task that runs
  it, its timeouts cancel it and nothing else, and its context is its own.

Results come in order, exceptions returned as values, as ``asyncio.gather(...,
return_exceptions=True)`` gives them, with one difference: once one coroutine fails, those
still running are cancelled (their results are `CancelledError`) and those not started are
not started, since a failed superstep commits nothing and a sibling waiting forever would
hang the run.
"""

from __future__ import annotations

import asyncio
import contextvars
from asyncio.tasks import _enter_task, _leave_task  # what 3.12's eager tasks use
from collections.abc import Coroutine, Generator
from typing import Any

__all__ = ["gather_eager"]


_UNBOUND: Any = object()
_STARTED: Any = object()


class _Carried(Coroutine[Any, Any, Any]):
    """The coroutine of a carrier task: empty until a coroutine that suspended in its
    eager step is bound to it; then the task's first step hands over what that coroutine
    yielded, and later steps go on inside the coroutine's own context.

    A coroutine object of its own rather than an ``async def`` wrapper: a task cancelled
    before its first step throws the cancellation into its coroutine without running it,
    and a wrapper would then never pass it on; this one does, so the handler sees it.
    """

    __slots__ = ("_context", "_coro", "_first")

    def __init__(self) -> None:
        self._coro: Coroutine[Any, Any, Any] | None = None
        self._context: contextvars.Context | None = None
        self._first: Any = _UNBOUND

    def bind(self, coro: Coroutine[Any, Any, Any], ctx: contextvars.Context, first: Any) -> None:
        """Carry `coro`, which yielded `first` in its eager step inside `ctx`."""
        self._coro, self._context, self._first = coro, ctx, first

    def send(self, value: Any) -> Any:
        """The first step hands over the eager step's yield; later ones go through."""
        first = self._first
        if first is not _STARTED:
            self._first = _STARTED
            if first is _UNBOUND:  # never carried anything: the task just ends
                raise StopIteration(None)
            return first
        assert self._coro is not None and self._context is not None  # bound before start
        return self._context.run(self._coro.send, value)

    def throw(self, *args: Any) -> Any:
        """Pass a thrown exception (a cancellation) into the carried coroutine."""
        self._first = _STARTED
        if self._coro is None or self._context is None:
            raise args[0] if len(args) == 1 else args[1]
        return self._context.run(self._coro.throw, *args)

    def close(self) -> None:
        """Close the carried coroutine."""
        if self._coro is not None:
            self._coro.close()

    def __await__(self) -> Generator[Any, Any, Any]:
        raise TypeError("_Carried is run by a task, never awaited")


class _Eager:
    """The eager steps of one `gather_eager` call, and the carrier they run under.

    The current task is switched to the carrier for a run of async steps and back to the
    caller only when needed (a plain step, the end), not around every step.
    """

    __slots__ = ("_caller", "_carried", "_carrier", "_current", "_loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._caller = asyncio.current_task(loop)
        self._current = self._caller
        self._carrier: asyncio.Task[Any] | None = None
        self._carried: _Carried | None = None

    def _switch(self, task: asyncio.Task[Any] | None) -> None:
        current = self._current
        if current is task:
            return
        if current is not None:
            _leave_task(self._loop, current)
        if task is not None:
            _enter_task(self._loop, task)
        self._current = task

    def back(self) -> None:
        """Make the caller the current task again (before it awaits, or returns)."""
        self._switch(self._caller)

    def step(self, coro: Coroutine[Any, Any, Any]) -> tuple[bool, Any, asyncio.Task[Any] | None]:
        """Take the first step of `coro` as its own task would: ``(done, result, task)``;
        `result` is its value or exception when done, else `task` carries it on."""
        carrier = self._carrier
        if carrier is None or carrier.cancelling():
            # a new carrier; one a finished coroutine asked to cancel is not reused
            self._carried = _Carried()
            carrier = self._carrier = self._loop.create_task(self._carried)
        carried = self._carried
        assert carried is not None  # made with the carrier
        self._switch(carrier)
        ctx = contextvars.copy_context()
        try:
            first = ctx.run(coro.send, None)
        except StopIteration as stop:
            if carrier.cancelling():  # cancelled itself: a task would end cancelled
                return True, asyncio.CancelledError(), None
            return True, stop.value, None
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:
            return True, exc, None
        carried.bind(coro, ctx, first)
        self._carrier = self._carried = None
        return False, None, carrier


async def gather_eager(coros: list[tuple[Coroutine[Any, Any, Any], bool]]) -> list[Any]:
    """Results (or raised exceptions) of ``(coroutine, sync)`` pairs, in order."""
    loop = asyncio.get_running_loop()
    results: list[Any] = [None] * len(coros)
    waiting: list[tuple[int, asyncio.Task[Any]]] = []
    eager = _Eager(loop)
    failed = False

    def on_done(task: asyncio.Task[Any]) -> None:
        nonlocal failed
        if not failed and not task.cancelled() and task.exception() is not None:
            failed = True
            _cancel(waiting)

    try:
        for i, (coro, sync) in enumerate(coros):
            if failed:
                coro.close()  # never started: its result is a cancellation
                results[i] = asyncio.CancelledError()
                continue
            if sync:
                eager.back()
                done, value, task = _plain_step(loop, coro)
            else:
                done, value, task = eager.step(coro)
            if done:
                results[i] = value
                if isinstance(value, BaseException) and not isinstance(
                    value, asyncio.CancelledError
                ):
                    failed = True
                    _cancel(waiting)
                continue
            assert task is not None  # not done: a task carries it on
            task.add_done_callback(on_done)
            waiting.append((i, task))
    finally:
        eager.back()
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


def _plain_step(
    loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any]
) -> tuple[bool, Any, asyncio.Task[Any] | None]:
    """Plain code in the caller's task; should it ever wait, it goes on in a task."""
    try:
        first = coro.send(None)
    except StopIteration as stop:
        return True, stop.value, None
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:
        return True, exc, None
    carried = _Carried()
    carried.bind(coro, contextvars.copy_context(), first)
    return False, None, loop.create_task(carried)


def _cancel(waiting: list[tuple[int, asyncio.Task[Any]]]) -> None:
    for _, task in waiting:
        task.cancel()  # a no-op on those already done


def _current_cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
