"""What the remote agents (`ResponsesAgent`, `A2AAgent`) share: awaiting the server under
the run's `CancellationToken`."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from ..core import CancellationToken, CancelledError

T = TypeVar("T")


async def bounded(work: Callable[[], Awaitable[T]], token: CancellationToken | None) -> T:
    """`work()`, cancelled when `token` is (a cantata CancelledError then). `work` is only
    called once the token is known not to be cancelled, so no coroutine is left unawaited."""
    if token is None:
        return await work()
    token.raise_if_cancelled()
    task = asyncio.ensure_future(work())
    token.link_future(task)
    try:
        return await task
    except asyncio.CancelledError:
        if token.is_cancelled:
            raise CancelledError("the run was cancelled through its CancellationToken") from None
        raise
