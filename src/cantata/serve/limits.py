"""Request limits as ASGI middleware: body size, a time bound per request, and cancel on
disconnect.

The body is read here, within the size limit, before any route sees it, and handed on as
one message. The route then runs in the request's own task; a watcher waits for the
client's ``http.disconnect`` and cancels that task, so an agent run whose client went away
is cancelled (it sees `asyncio.CancelledError`) instead of running to its end for nobody.
"""

from __future__ import annotations

import asyncio
import json
import math
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..core import ConfigurationError
from .errors import RequestError, error_body

__all__ = ["DEFAULT_MAX_BODY_BYTES", "DEFAULT_REQUEST_TIMEOUT", "Limits", "LimitsMiddleware"]

DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024
DEFAULT_REQUEST_TIMEOUT = 300.0


@dataclass(frozen=True, slots=True)
class Limits:
    """`max_body_bytes` per request body; `request_timeout` seconds per request (a streamed
    answer included: a run longer than that is cancelled)."""

    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT

    def __post_init__(self) -> None:
        size = self.max_body_bytes
        if type(size) is not int or size < 1:
            raise ConfigurationError(
                f"max_body_bytes must be a positive whole number of bytes, got {size!r}"
            )
        timeout = self.request_timeout
        if (
            not isinstance(timeout, int | float)
            or isinstance(timeout, bool)
            or not math.isfinite(timeout)
            or timeout <= 0
        ):
            raise ConfigurationError(
                f"request_timeout must be a positive finite number of seconds, got {timeout!r}"
            )


async def send_error(send: Send, exc: BaseException) -> None:
    """Answer with `exc` in OpenAI's error shape (the response must not have started)."""
    from .errors import status_for

    body = json.dumps(error_body(exc)).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status_for(exc) == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status_for(exc), "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


class LimitsMiddleware:
    """Applies `Limits` to every HTTP request of `app`."""

    def __init__(self, app: ASGIApp, limits: Limits) -> None:
        self.app = app
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            body = await _read_body(scope, receive, self.limits.max_body_bytes)
        except RequestError as exc:
            await send_error(send, exc)
            return
        await _Exchange(self.app, scope, body, receive, send).run(self.limits)


class _Exchange:
    """One request past its body: runs the app, watching for a disconnect and the clock."""

    def __init__(self, app: ASGIApp, scope: Scope, body: bytes, receive: Receive, send: Send):
        self._app = app
        self._scope = scope
        self._body: bytes | None = body
        self._receive = receive
        self._send = send
        self._gone = asyncio.Event()
        self._started = False
        self._complete = False
        self._event_stream = False

    async def _replay(self) -> Message:
        if self._body is not None:
            body, self._body = self._body, None
            return {"type": "http.request", "body": body, "more_body": False}
        await self._gone.wait()
        return {"type": "http.disconnect"}

    async def _tracked_send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self._started = True
            self._event_stream = any(
                k.lower() == b"content-type" and v.startswith(b"text/event-stream")
                for k, v in message.get("headers", ())
            )
        elif message["type"] == "http.response.body" and not message.get("more_body", False):
            self._complete = True
        await self._send(message)

    async def _watch(self, task: asyncio.Task[Any]) -> None:
        while (await self._receive())["type"] != "http.disconnect":
            pass
        self._gone.set()
        if not self._complete:
            task.cancel("client disconnected")

    async def run(self, limits: Limits) -> None:
        timeout = limits.request_timeout
        task = asyncio.current_task()
        assert task is not None  # an ASGI server always calls us from a task
        watcher = asyncio.create_task(self._watch(task))
        try:
            async with asyncio.timeout(timeout):
                await self._app(self._scope, self._replay, self._tracked_send)
        except TimeoutError:
            await self._timed_out(timeout)
        except asyncio.CancelledError:
            if not self._gone.is_set():
                raise  # the server is stopping, not the client leaving
            task.uncancel()
        finally:
            watcher.cancel()

    async def _timed_out(self, seconds: float) -> None:
        """Say so: an error response, or an ``error`` event that ends an event stream
        (OpenAI clients raise it). Any other started response is cut off."""
        error = _timeout_error(seconds)
        if not self._started:
            await send_error(self._send, error)
        elif self._event_stream and not self._complete:
            event = f"data: {json.dumps(error_body(error))}\n\n".encode()
            await self._send({"type": "http.response.body", "body": event, "more_body": True})
            await self._send({"type": "http.response.body", "body": b"", "more_body": False})


def _timeout_error(timeout: float) -> BaseException:
    from ..core import TimeoutError as CantataTimeout

    return CantataTimeout(
        f"the request took longer than the server's limit of {timeout:g} s and was cancelled; "
        "ask for less, or start the server with a longer --timeout"
    )


async def _read_body(scope: Scope, receive: Receive, limit: int) -> bytes:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                declared = int(value)
            except ValueError:
                raise RequestError("the Content-Length header is not a number") from None
            if declared > limit:
                raise _too_large(limit)
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _too_large(limit: int) -> RequestError:
    return RequestError(
        f"the request body is larger than the server's limit of {limit} bytes; send less, "
        "or start the server with a larger --max-body",
        status=413,
        code="request_too_large",
    )
