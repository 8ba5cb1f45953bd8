"""The bounded waits of a router: a reply within a deadline and a caller's cancellation,
and a Ray object ref awaited from any asyncio loop.

A request's wait is on every hot path and its timer almost never fires, so the waits of
one loop share `Deadlines`: one loop timer per tick of deadlines, not one per wait (a
timer handle made, pushed on the loop's heap and cancelled for every request)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from ...core import CancellationToken, CancelledError, TimeoutError
from ..context import MessageContext
from . import wire

__all__ = ["Deadlines", "Described", "await_ref", "await_reply", "remaining"]

_TICK = 0.02  # seconds: how late at most a shared deadline fires


def remaining(deadline: float | None) -> float | None:
    return None if deadline is None else max(deadline - time.monotonic(), 0.0)


class Described:
    """What a request is (its message's type, id and recipient), for the errors that
    name it: formatted only when one is raised, not for every request."""

    __slots__ = ("_message", "_mid", "_recipient")

    def __init__(self, message: Any, mid: str, recipient: object) -> None:
        self._message = message
        self._mid = mid
        self._recipient = recipient

    def __str__(self) -> str:
        return f"{type(self._message).__name__} {self._mid} to {self._recipient}"


class Deadlines:
    """The deadlines of one router's waits, by tick: `add` puts a callback in its
    deadline's tick (one loop timer per tick, made by its first callback) and gives the
    tick back, from which the caller discards the callback when its wait ends in time.
    Used from another loop, it starts a new set of ticks there (each loop's timers fire
    only their own)."""

    __slots__ = ("_loop", "_ticks")

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ticks: dict[int, set[Callable[[], object]]] = {}

    def add(
        self, loop: asyncio.AbstractEventLoop, at: float, callback: Callable[[], object]
    ) -> set[Callable[[], object]]:
        """Call `callback` at `loop`'s time `at` (up to one tick later)."""
        if loop is not self._loop:
            self._loop, self._ticks = loop, {}
        ticks = self._ticks
        tick = int(at / _TICK) + 1
        due = ticks.get(tick)
        if due is None:
            due = ticks[tick] = set()
            loop.call_at(tick * _TICK, _fire, ticks, tick)
        due.add(callback)
        return due


def _fire(ticks: dict[int, set[Callable[[], object]]], tick: int) -> None:
    for callback in ticks.pop(tick, ()):
        callback()


async def await_reply(
    waiter: asyncio.Future[Any],
    cancel: Callable[[], object],
    env: wire.Envelope,
    what: object,
    deadline: float | None,
    token: CancellationToken | None,
    parent: MessageContext | None,
    deadlines: Deadlines,
) -> wire.Envelope:
    """Wait for a reply until `deadline` (`time.monotonic`, the loop's clock);
    cancellation by `token` (or the parent's) and the timeout both reach the handler
    through `cancel`. No wrapper future and no timer of its own (this is every request's
    wait, so `asyncio.wait_for`'s are worth saving): its deadline goes in `deadlines`."""
    loop = asyncio.get_running_loop()
    why = ""  # what cancelled the waiter, when it was us

    def on_cancel() -> None:
        nonlocal why
        why = why or "token"
        loop.call_soon_threadsafe(waiter.cancel)

    def expire() -> None:
        nonlocal why
        why = why or "timeout"
        waiter.cancel()

    tokens: list[CancellationToken] = []
    if token is not None:
        tokens.append(token)
    if parent is not None:
        tokens.append(parent.cancellation_token)
    for t in tokens:
        t.add_callback(on_cancel)
    due = None if deadline is None else deadlines.add(loop, deadline, expire)
    try:
        reply: Any = await waiter
        return wire.check(reply, what, "the reply to ")
    except asyncio.CancelledError:
        cancel()  # the handler sees its token cancelled
        if why == "timeout":
            raise TimeoutError(
                f"no reply to {what} within {env['timeout']}s (the actor did not answer "
                "even with its cancellation); raise the timeout, or make the handler faster"
            ) from None
        if why == "token":
            raise CancelledError(f"{what} was cancelled by its CancellationToken") from None
        raise
    finally:
        if due is not None:
            due.discard(expire)
        for t in tokens:
            t.remove_callback(on_cancel)


async def await_ref(ref: Any) -> Any:
    """Await a Ray object ref from any asyncio loop."""
    return await asyncio.wrap_future(ref.future())
