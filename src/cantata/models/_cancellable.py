"""Await something while honouring a `CancellationToken`."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable
from typing import TypeVar

from ..core import CancellationToken, CancelledError

T = TypeVar("T")


async def await_cancellable(awaitable: Awaitable[T], token: CancellationToken | None) -> T:
    """Await `awaitable`; a cancelled token cancels it and raises cantata's `CancelledError`."""
    if token is None:
        return await awaitable
    if token.is_cancelled:
        if inspect.iscoroutine(awaitable):
            awaitable.close()  # never started: close it so it is not reported as unawaited
        token.raise_if_cancelled()
    task = asyncio.ensure_future(awaitable)
    token.link_future(task)
    try:
        return await task
    except asyncio.CancelledError:
        if token.is_cancelled and not _current_task_cancelling():
            raise CancelledError(
                "the model request was cancelled through its CancellationToken"
            ) from None
        raise


def _current_task_cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
