"""CancellationToken: callbacks, linked futures, idempotence."""

from __future__ import annotations

import asyncio

import pytest

from cantata.core import CancellationToken, CancelledError


async def test_cancel_runs_callbacks_once_and_cancels_futures() -> None:
    token = CancellationToken()
    seen: list[int] = []
    token.add_callback(lambda: seen.append(1))
    fut: asyncio.Future[int] = token.link_future(asyncio.get_running_loop().create_future())
    token.cancel()
    token.cancel()
    assert seen == [1]
    assert fut.cancelled()
    token.add_callback(lambda: seen.append(2))
    assert seen == [1, 2]
    with pytest.raises(CancelledError):
        token.raise_if_cancelled()


async def test_done_future_unlinks() -> None:
    token = CancellationToken()
    fut: asyncio.Future[int] = token.link_future(asyncio.get_running_loop().create_future())
    fut.set_result(1)
    await asyncio.sleep(0)
    token.cancel()
    assert fut.result() == 1


def test_cantata_timeout_is_a_builtin_timeout() -> None:
    from cantata.core import TimeoutError as CTimeout

    with pytest.raises(TimeoutError):
        raise CTimeout("late")
