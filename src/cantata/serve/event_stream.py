"""`EventStream`: a ``text/event-stream`` response that closes its generator when it ends.

Starlette leaves a body generator that stopped early (the client went away, stopped
reading, the server is stopping) to the garbage collector, so the run the generator drives
would be closed at some later time. Closing it on the way out cancels the run at once.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator

import anyio
from starlette.responses import StreamingResponse
from starlette.types import Send

__all__ = ["EventStream"]

_CLOSE_TIMEOUT = 10.0


class EventStream(StreamingResponse):
    """Server-sent events from `events`, which is closed (bounded) whatever ends the stream."""

    def __init__(self, events: AsyncGenerator[bytes, None]) -> None:
        super().__init__(events, media_type="text/event-stream")
        self._events = events

    async def stream_response(self, send: Send) -> None:
        try:
            await super().stream_response(send)
        finally:
            with anyio.move_on_after(_CLOSE_TIMEOUT, shield=True):
                await self._events.aclose()
