"""A router's bounded waits, without a cluster: shared deadlines fire once, late by at
most a tick, never for a wait that ended; a reply wait times out, is cancelled by its
token, and names its request only when it fails."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import pytest

from cantata.core import CancellationToken, CancelledError, TimeoutError
from cantata.runtime.ray import WIRE_VERSION
from cantata.runtime.ray.waits import Deadlines, Described, await_reply

_TICK = 0.02


async def test_a_deadline_discarded_in_time_never_fires() -> None:
    loop = asyncio.get_running_loop()
    deadlines = Deadlines()
    fired: list[float] = []
    start = loop.time()

    def late() -> None:
        fired.append(loop.time() - start)

    due = deadlines.add(loop, start + 0.05, late)
    kept = deadlines.add(loop, start + 0.05, lambda: fired.append(-1.0))
    assert due is kept  # one tick, one loop timer
    due.discard(late)
    await asyncio.sleep(0.2)
    assert fired == [-1.0]


async def test_each_deadline_fires_once_not_early_and_late_by_at_most_a_tick() -> None:
    loop = asyncio.get_running_loop()
    deadlines = Deadlines()
    at: dict[float, list[float]] = {0.05: [], 0.1: [], 0.11: []}
    start = loop.time()
    for after, times in at.items():
        deadlines.add(loop, start + after, _stamp(loop, times))
    await asyncio.sleep(0.3)
    for after, times in at.items():
        assert len(times) == 1
        assert start + after <= times[0] <= start + after + _TICK + 0.1  # a busy machine


def test_deadlines_used_from_another_loop_fire_there_only() -> None:
    deadlines = Deadlines()
    seen: dict[str, list[int]] = {"one": [], "two": []}

    def run(name: str) -> None:
        async def main() -> None:
            loop = asyncio.get_running_loop()
            ident = threading.get_ident()
            deadlines.add(loop, loop.time() + 0.03, lambda: seen[name].append(ident))
            await asyncio.sleep(0.15)
            assert seen[name] == [ident]

        asyncio.run(main())

    run("one")
    run("two")  # a new loop: its own ticks, the first loop's are gone with it
    assert len(seen["one"]) == len(seen["two"]) == 1


async def test_a_reply_wait_times_out_and_cancels_the_handler_once() -> None:
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[object] = loop.create_future()
    cancelled: list[bool] = []
    env = {"v": WIRE_VERSION, "id": "m1", "timeout": 0.05}
    start = time.monotonic()
    with pytest.raises(TimeoutError, match=r"no reply to Ping m1 to a/b within 0.05s"):
        await await_reply(
            waiter,
            lambda: cancelled.append(True),
            env,
            Described(Ping(), "m1", "a/b"),
            start + 0.05,
            None,
            None,
            Deadlines(),
        )
    assert cancelled == [True]
    assert time.monotonic() - start >= 0.05


async def test_a_reply_wait_ends_with_its_reply_and_its_timer_never_fires() -> None:
    loop = asyncio.get_running_loop()
    deadlines = Deadlines()
    waiter: asyncio.Future[object] = loop.create_future()
    reply = {"v": WIRE_VERSION, "ok": "1"}
    loop.call_later(0.01, waiter.set_result, reply)
    cancelled: list[bool] = []
    got = await await_reply(
        waiter,
        lambda: cancelled.append(True),
        {"v": WIRE_VERSION, "id": "m2", "timeout": 0.05},
        Described(Ping(), "m2", "a/b"),
        time.monotonic() + 0.05,
        None,
        None,
        deadlines,
    )
    assert got is reply
    await asyncio.sleep(0.15)  # past the deadline: nothing fires for a wait that ended
    assert cancelled == []


async def test_a_reply_wait_is_cancelled_by_its_token() -> None:
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[object] = loop.create_future()
    token = CancellationToken()
    loop.call_later(0.02, token.cancel)
    cancelled: list[bool] = []
    with pytest.raises(CancelledError, match="Ping m3 to a/b was cancelled"):
        await await_reply(
            waiter,
            lambda: cancelled.append(True),
            {"v": WIRE_VERSION, "id": "m3", "timeout": None},
            Described(Ping(), "m3", "a/b"),
            None,
            token,
            None,
            Deadlines(),
        )
    assert cancelled == [True]


class Ping:
    pass


def _stamp(loop: asyncio.AbstractEventLoop, times: list[float]) -> Callable[[], None]:
    return lambda: times.append(loop.time())
