"""await_cancellable: a token cancels the awaited work; outer task cancellation stays asyncio's."""

from __future__ import annotations

import asyncio

import pytest

from cantata.core import CancellationToken, CancelledError
from cantata.models._cancellable import await_cancellable


async def test_without_a_token_it_just_awaits() -> None:
    async def value() -> int:
        return 3

    assert await await_cancellable(value(), None) == 3


async def test_a_cancelled_token_stops_the_work() -> None:
    token = CancellationToken()
    started = asyncio.Event()
    never = asyncio.Event()

    async def wait() -> None:
        started.set()
        await never.wait()

    task = asyncio.ensure_future(await_cancellable(wait(), token))
    await started.wait()
    token.cancel()
    with pytest.raises(CancelledError):
        await task


async def test_an_already_cancelled_token_refuses_to_start() -> None:
    token = CancellationToken()
    token.cancel()
    ran = []

    async def work() -> None:
        ran.append(1)

    coro = work()
    with pytest.raises(CancelledError):
        await await_cancellable(coro, token)
    assert ran == []
    assert coro.cr_frame is None  # closed, so never reported as "never awaited"


async def test_outer_task_cancellation_is_not_turned_into_a_cantata_error() -> None:
    token = CancellationToken()
    started = asyncio.Event()
    never = asyncio.Event()

    async def wait() -> None:
        started.set()
        await never.wait()

    task = asyncio.ensure_future(await_cancellable(wait(), token))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
