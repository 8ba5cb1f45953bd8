"""`WorkflowEventStream`: a run's events as they happen, then its result.

Deliberate repetition: ``__aenter__``/``__aexit__`` closing the stream is the async context
manager protocol, written as every closable object of the project writes it (the model
clients, the agents, MCP tools)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any

from ..core import WorkflowError
from .events import WorkflowEvent

if TYPE_CHECKING:
    from .result import WorkflowRunResult

__all__ = ["WorkflowEventStream"]

_log = logging.getLogger("cantata.workflows")

CLOSE_GRACE = 10.0
"""Seconds `aclose` waits for a cancelled run to stop before it gives up waiting."""

Producer = Callable[[Callable[[WorkflowEvent], None]], Awaitable["WorkflowRunResult"]]
_END: Any = object()


class WorkflowEventStream:
    """Async iterator of a run's events, yielded live (one agent chunk, one event).

    The run starts on the first iteration. After the iteration ends, `result` holds the
    `WorkflowRunResult`; `await get_result()` drains what is left and returns it. A failed
    run yields its failure events, then the iteration raises the `WorkflowError`.

    A consumer that stops early (``break``, an exception, its task cancelled) cancels the
    run: nothing keeps running unseen. ``async with`` (or `aclose()`) does it at once; a
    plain ``break`` does it when the loop's iterator is dropped, right after.
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

    def __aiter__(self) -> AsyncIterator[WorkflowEvent]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[WorkflowEvent]:
        # An async generator, so that asyncio closes it when an `async for` is left early:
        # its `finally` then cancels the run.
        try:
            while True:
                try:
                    event = await self.__anext__()
                except StopAsyncIteration:
                    return
                yield event
        finally:
            if not self._done:
                await self.aclose()

    async def __aenter__(self) -> WorkflowEventStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def __anext__(self) -> WorkflowEvent:
        if self._done:
            raise StopAsyncIteration
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())
        # Cannot hang on its own: `_run` puts `_END` when the run ends however it ends
        # (finally), and the run is bounded by max_supersteps, its cancellation token and
        # the timeouts of what its handlers await (model clients, the runtime).
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
            error = self._error
            if error is not None and not isinstance(error, asyncio.CancelledError):
                raise WorkflowError(f"the run failed, so it has no result: {error}") from error
            if self._done:
                raise WorkflowError(
                    "the stream was closed before its run ended, so the run was cancelled and "
                    "has no result; iterate the stream to the end to get one"
                )
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
        """Stop the run early (it ends cancelled) and wait until it has stopped."""
        self._done = True
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            # wait() does not raise the task's cancellation, yet lets the caller's through.
            # Bounded: a handler that swallows its cancellation must not keep the consumer.
            await asyncio.wait([task], timeout=CLOSE_GRACE)
            if not task.done():
                _log.warning(
                    "a workflow run did not stop within %ss of its stream being closed (a "
                    "handler ignores cancellation?); it is left to finish on its own",
                    CLOSE_GRACE,
                )
