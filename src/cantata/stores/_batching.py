"""Group commit: concurrent appends to one log in one process share one transaction.

A shared thread written by many tasks would otherwise pay one commit (and, on PostgreSQL,
one turn of the log's row lock) per append. Here the first append to a log starts a drain;
appends that arrive while a write is in flight queue up and go out together in the next
write. Each call's entries stay contiguous and in call order, and each caller learns the
log's length right after its own entries.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable


class AppendBatcher:
    """Coalesces concurrent appends per log; `write(log, texts)` returns the new length."""

    def __init__(self, write: Callable[[str, list[str]], Awaitable[int]]) -> None:
        self._write = write
        self._pending: dict[str, list[tuple[list[str], asyncio.Future[int]]]] = {}
        self._drains: dict[str, asyncio.Task[None]] = {}

    async def append(self, log: str, texts: list[str]) -> int:
        """Queue `texts` for `log` and wait until they are committed."""
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._pending.setdefault(log, []).append((texts, future))
        if log not in self._drains:
            # A task of its own, so that cancelling one caller never strands the others.
            self._drains[log] = asyncio.create_task(self._drain(log))
        # Bounded by the write itself, which the backend bounds (busy_timeout,
        # statement_timeout); a failed or cancelled drain fails or cancels this future.
        return await future

    async def _drain(self, log: str) -> None:
        try:
            while batch := self._pending.pop(log, None):
                texts = [text for part, _ in batch for text in part]
                try:
                    length = await self._write(log, texts)
                except asyncio.CancelledError:
                    for _, future in batch:
                        future.cancel()
                    raise
                except BaseException as exc:
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(exc)
                    continue
                end = length - len(texts)
                for part, future in batch:
                    end += len(part)
                    if not future.done():
                        future.set_result(end)
        finally:
            del self._drains[log]
            for _, future in self._pending.pop(log, []):
                future.cancel()
