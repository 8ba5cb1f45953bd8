"""Per-sender ordering: messages from one sender stream to one agent are admitted in the
order they were numbered, even when they arrive out of order.

A gap (a message numbered but not yet here) is waited for at most `wait` seconds; then
the waiting message goes ahead and the missing one, if it ever comes, is admitted late.
Streams are forgotten least-recently-used beyond `max_streams`, so memory stays bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import Awaitable

__all__: list[str] = []


class _Stream:
    __slots__ = ("next", "waiters")

    def __init__(self) -> None:
        self.next = 0  # every stream starts at 0 (a sender numbers afresh per actor)
        self.waiters: dict[int, asyncio.Future[None]] = {}


class ReorderBuffer:
    """Admits numbered messages per stream in order; see the module docstring."""

    def __init__(self, wait: float, *, max_streams: int = 4096, max_waiting: int = 1024) -> None:
        self._wait = wait
        self._max_streams = max_streams
        self._max_waiting = max_waiting
        self._streams: OrderedDict[str, _Stream] = OrderedDict()
        self.skipped = 0  # gaps given up on (for tests and logs)

    def admit(self, stream: str, seq: int) -> Awaitable[None] | None:
        """None when message `seq` of `stream` may be handled now (the usual case, so no
        coroutine is made for it), else what to await until it may."""
        state = self._streams.get(stream)
        if state is None:
            state = self._streams[stream] = _Stream()
            if len(self._streams) > self._max_streams:
                self._streams.popitem(last=False)
        else:
            self._streams.move_to_end(stream)
        if seq == state.next:
            self._advance(state, seq)
            return None
        if seq < state.next or len(state.waiters) >= self._max_waiting:
            return None  # late (its gap was given up on), or too much waiting: go now
        return self._wait_turn(state, seq)

    async def _wait_turn(self, state: _Stream, seq: int) -> None:
        turn = state.waiters[seq] = asyncio.get_running_loop().create_future()
        try:
            await asyncio.wait_for(asyncio.shield(turn), self._wait)
        except TimeoutError:
            self.skipped += 1  # give up on the gap
        finally:
            if state.waiters.get(seq) is turn:
                del state.waiters[seq]
            with contextlib.suppress(asyncio.InvalidStateError):
                turn.cancel()
        if seq >= state.next:
            self._advance(state, seq)

    def _advance(self, state: _Stream, seq: int) -> None:
        state.next = seq + 1
        waiter = state.waiters.pop(seq + 1, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(None)  # it advances the stream when it runs
