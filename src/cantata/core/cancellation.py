"""Cooperative cancellation that reaches every handler and model call of a run."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from .errors import CancelledError

__all__ = ["CancellationToken"]

F = TypeVar("F", bound="asyncio.Future[Any]")


class CancellationToken:
    """A one-shot signal: `cancel()` runs the callbacks and cancels every linked future.

    Thread-safe, so a model running in a worker thread can poll `is_cancelled`.
    """

    __slots__ = ("_callbacks", "_cancelled", "_lock")

    def __init__(self) -> None:
        self._cancelled = False
        self._callbacks: list[Callable[[], object]] = []
        self._lock = threading.Lock()

    @property
    def is_cancelled(self) -> bool:
        return self._cancelled

    def cancel(self) -> None:
        """Cancel once; later calls do nothing."""
        with self._lock:
            if self._cancelled:
                return
            self._cancelled = True
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def add_callback(self, callback: Callable[[], object]) -> None:
        """Run `callback` on cancellation (at once if already cancelled)."""
        with self._lock:
            if not self._cancelled:
                self._callbacks.append(callback)
                return
        callback()

    def remove_callback(self, callback: Callable[[], object]) -> None:
        with self._lock, contextlib.suppress(ValueError):
            self._callbacks.remove(callback)

    def link_future(self, future: F) -> F:
        """Cancel `future` when this token is cancelled; returns the future."""

        def cancel_future() -> None:
            loop = future.get_loop()
            if loop.is_closed():
                return
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if running is loop:
                future.cancel()
            else:
                loop.call_soon_threadsafe(future.cancel)

        self.add_callback(cancel_future)
        future.add_done_callback(lambda _: self.remove_callback(cancel_future))
        return future

    def raise_if_cancelled(self) -> None:
        """Raise `cantata.core.CancelledError` when cancelled."""
        if self._cancelled:
            raise CancelledError("the operation was cancelled through its CancellationToken")
