"""`StoreLifecycle.close` when the backend's disconnect fails."""

from __future__ import annotations

import asyncio

import pytest

from cantata.stores._lifecycle import StoreLifecycle


class _FailingDisconnect(StoreLifecycle):
    """A backend whose disconnect takes a few loop turns and then fails."""

    def __init__(self) -> None:
        super().__init__("failing")
        self.disconnects = 0

    async def _connect(self) -> None:
        pass

    async def _disconnect(self) -> None:
        self.disconnects += 1
        for _ in range(3):
            await asyncio.sleep(0)
        raise OSError("the server hung up")


async def test_a_failed_disconnect_is_raised_from_close() -> None:
    store = _FailingDisconnect()
    await store.open()
    with pytest.raises(OSError, match="hung up"):
        await store.close()
    await store.close()  # idempotent: nothing more to release
    assert (store.closed, store.disconnects) == (True, 1)
