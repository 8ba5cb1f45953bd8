"""Open on first use, close once, refuse use after close: shared by every backend."""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Self

from .errors import StoreClosedError


class StoreLifecycle:
    """Base of the backends: lazy `open()`, idempotent `close()`, `async with` support.

    Constructors stay synchronous (a store can be built in a config or a factory), and the
    connection and schema are set up by the first operation or an explicit `await open()`.
    Waits on `_open_lock` last no longer than a `_connect` or `_disconnect`, which each
    backend bounds with its own timeouts.
    """

    def __init__(self, label: str) -> None:
        self._label = label
        self._opened = False
        self._closed = False
        self._open_lock = asyncio.Lock()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open" if self._opened else "not yet opened"
        return f"<{self._label} ({state})>"

    @property
    def closed(self) -> bool:
        """True once `close()` was called."""
        return self._closed

    async def open(self) -> Self:
        """Connect and create the schema now instead of on first use; returns the store."""
        await self._ready()
        return self

    async def _ready(self) -> None:
        if self._opened:
            return
        async with self._open_lock:
            if self._closed:
                raise StoreClosedError(
                    f"{self._label} is closed; create a new store to keep working"
                )
            if not self._opened:
                await self._connect()
                self._opened = True

    async def close(self) -> None:
        """Release connections; later operations raise `StoreClosedError`. Idempotent.

        A close that is cancelled still finishes releasing them (within the backend's own
        bounds) before it raises `CancelledError`: it never leaves a connection open behind
        a store that says it is closed.
        """
        if self._closed:
            return
        self._closed = True
        closing = asyncio.ensure_future(self._close_once())
        cancelled = False
        while not closing.done():
            try:
                await asyncio.shield(closing)
            except asyncio.CancelledError:
                cancelled = True  # finish closing first: the disconnect is bounded
            except Exception:
                break  # raised below
        if cancelled:
            raise asyncio.CancelledError
        closing.result()

    async def _close_once(self) -> None:
        async with self._open_lock:
            if self._opened:
                self._opened = False
                await self._disconnect()

    async def __aenter__(self) -> Self:
        return await self.open()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def _connect(self) -> None:
        raise NotImplementedError

    async def _disconnect(self) -> None:
        raise NotImplementedError
