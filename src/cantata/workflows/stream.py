"""`WorkflowEventStream`: a run's events as they happen, then its result."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..core import WorkflowError
from .events import WorkflowEvent

if TYPE_CHECKING:
    from .workflow import WorkflowRunResult

__all__ = ["WorkflowEventStream"]

Producer = Callable[[Callable[[WorkflowEvent], None]], Awaitable["WorkflowRunResult"]]
_END: Any = object()


class WorkflowEventStream:
    """Async iterator of a run's events, yielded live (one agent chunk, one event).

    The run starts on the first iteration. After the iteration ends, `result` holds the
    `WorkflowRunResult`; `await get_result()` drains what is left and returns it. A failed
    run yields its failure events, then the iteration raises the `WorkflowError`.
    """

    def __init__(self, produce: Producer) -> None:
        self._produce = produce
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._result: WorkflowRunResult | None = None
        self._error: BaseException | None = None
        self._done = False

    async def _run(self) -> None:
        try:
            self._result = await self._produce(self._queue.put_nowait)
        except BaseException as exc:
            self._error = exc
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self._queue.put_nowait(_END)

    def __aiter__(self) -> WorkflowEventStream:
        return self

    async def __anext__(self) -> WorkflowEvent:
        if self._done:
            raise StopAsyncIteration
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())
        item = await self._queue.get()
        if item is _END:
            self._done = True
            await self._task
            if self._error is not None:
                raise self._error
            raise StopAsyncIteration
        event: WorkflowEvent = item
        return event

    @property
    def result(self) -> WorkflowRunResult:
        """The run's result, once the iteration has ended."""
        if self._result is None:
            raise WorkflowError(
                "the stream has not finished yet: iterate it to the end or await get_result()"
            )
        return self._result

    async def get_result(self) -> WorkflowRunResult:
        """Drain the remaining events and return the run's result."""
        async for _ in self:
            pass
        return self.result

    async def aclose(self) -> None:
        """Stop the run early (it ends cancelled)."""
        self._done = True
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
