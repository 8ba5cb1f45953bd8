"""Graceful drain: how the app stops when its server is told to (SIGTERM, Ctrl-C).

The server stops accepting connections and calls `Drain.begin(grace)`. From then on a new
request for model work is answered 503 with ``Retry-After`` (a proxy sends it elsewhere),
and runs under way go on. Shortly before the grace period ends (`CUT_MARGIN` seconds) every
run still going is stopped from inside: each route's `stoppable` block raises
`ServerStoppingError`, and the route ends its answer the way its protocol ends a failure
(chat completions: an error chunk then ``[DONE]``; Responses: ``response.failed``; A2A: a
failed task; a plain request: a 503). So no client sees a cut connection, and the server's
log has one line per stopped request, not a traceback.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterable, AsyncIterator
from contextlib import asynccontextmanager
from typing import TypeVar

__all__ = ["CUT_MARGIN", "DEFAULT_GRACE", "Drain", "process_drain"]

DEFAULT_GRACE = 10.0
"""Seconds open requests get to finish when the server is told to stop."""

CUT_MARGIN = 1.0
"""Seconds before the end of the grace period at which unfinished runs are stopped, left
for their terminal events to reach the clients."""

_log = logging.getLogger("cantata.serve")
_T = TypeVar("_T")


class Drain:
    """The stopping state of one app."""

    def __init__(self) -> None:
        self._draining = False
        self._cut = False
        self._blocks: set[asyncio.Timeout] = set()
        self._timer: asyncio.TimerHandle | None = None

    @property
    def draining(self) -> bool:
        """The server is stopping: new model work is refused."""
        return self._draining

    @property
    def cut(self) -> bool:
        """The grace period is (nearly) over: runs still going are being stopped."""
        return self._cut

    def begin(self, grace: float) -> None:
        """Stop taking work; stop what still runs `CUT_MARGIN` s before `grace` s are up."""
        if self._draining:
            return
        self._draining = True
        delay = max(0.0, grace - min(CUT_MARGIN, grace / 4))
        _log.info(
            "stopping: %d run(s) under way get %.1f s to finish; new work is refused",
            len(self._blocks),
            delay,
        )
        self._timer = asyncio.get_running_loop().call_later(delay, self.stop_runs)

    def stop_runs(self) -> None:
        """Stop every run under way now (each raises `ServerStoppingError` in its route)."""
        self._cut = True
        if self._timer is not None:
            self._timer.cancel()
        now = asyncio.get_running_loop().time()
        for block in list(self._blocks):
            block.reschedule(now)

    @asynccontextmanager
    async def stoppable(self) -> AsyncIterator[None]:
        """A block that ends with `ServerStoppingError` when the grace period runs out."""
        from .errors import ServerStoppingError

        if self._cut:
            raise ServerStoppingError("the server is shutting down; send the request again")
        block = asyncio.timeout(None)
        self._blocks.add(block)
        try:
            async with block:
                yield
        except TimeoutError:
            if not self._cut or not block.expired():
                raise
            _log.warning("stopped a run at shutdown: the grace period ran out")
            raise ServerStoppingError(
                "the server shut down before the answer was finished; send the request again"
            ) from None
        finally:
            self._blocks.discard(block)

    async def guard(self, items: AsyncIterable[_T]) -> AsyncIterator[_T]:
        """`items`, each wait for the next one stoppable: a stream stops between two of
        its events (never while one is being written), with `ServerStoppingError`."""
        iterator = aiter(items)
        while True:
            async with self.stoppable():
                try:
                    item = await anext(iterator)
                except StopAsyncIteration:
                    return
            yield item


_process_drain: Drain | None = None


def process_drain() -> Drain:
    """This process's drain, for an app built by a factory in a worker process: the factory
    passes it to `build_app` and the worker's server begins it on shutdown, so the two meet
    without either holding the other."""
    global _process_drain
    if _process_drain is None:
        _process_drain = Drain()
    return _process_drain
