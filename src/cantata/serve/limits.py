"""Request limits as ASGI middleware: body size, admission, a time bound per request, a
write timeout, and cancel on disconnect.

The body is read here, within the size limit, before any route sees it, and handed on as
one message. A request for model work then takes a slot of the app's `Admission` (or is
refused with 429 at once; 503 while the server stops). The route runs in the request's own
task; a watcher waits for the client's ``http.disconnect`` and cancels that task, so an
agent run whose client went away is cancelled (it sees `asyncio.CancelledError`) instead of
running to its end for nobody.

Backpressure: a stream is written no faster than the client reads it. Sending waits while
the connection's buffers are full (the socket's send buffer is small, see `server`), and
the route's generator, and the run it drives, waits with it. A send that waits longer than
`Limits.write_timeout` ends the exchange as a disconnect would: the run is cancelled and
the connection is aborted (reset, its unsent bytes dropped: a close would wait for ever to
flush them to a client that does not read).
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import math
import socket
import struct
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..core import ConfigurationError
from .admission import Admission, is_follower, is_model_work, model_work_by_path, send_refusal
from .drain import Drain
from .errors import RequestError, ServerStoppingError, error_body
from .metrics import ServeMetrics

__all__ = [
    "DEFAULT_ABANDON_AFTER",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_QUEUED",
    "DEFAULT_MAX_RUNNING",
    "DEFAULT_QUEUE_TIMEOUT",
    "DEFAULT_REQUEST_TIMEOUT",
    "DEFAULT_WRITE_TIMEOUT",
    "SERVER_SEND",
    "STREAM_FAILURE",
    "Limits",
    "LimitsMiddleware",
    "ended_on_purpose",
]

DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024
DEFAULT_REQUEST_TIMEOUT = 300.0
DEFAULT_MAX_RUNNING = 4
"""Runs at once: what the embedded model decodes in one batch (its default ``parallel``)."""
DEFAULT_MAX_QUEUED = DEFAULT_MAX_RUNNING
"""Requests waiting for a run slot, beyond which the server answers 429: one batch, so a
queued request waits for one run to finish, not for several in turn (a model that takes
40 s an answer, as the embedded one can on a busy machine, still fits the queue timeout)."""
DEFAULT_QUEUE_TIMEOUT = 60.0
DEFAULT_WRITE_TIMEOUT = 30.0
DEFAULT_ABANDON_AFTER = 3600.0
"""Seconds a run waiting for a person's answer is kept in the server's memory (its thread
and run objects) before it counts as abandoned and is released."""

SERVER_SEND = "cantata.server_send"
STREAM_FAILURE = "cantata.stream_failure"
"""Scope key of a callable (error -> bytes) that a route whose event stream has its own
failed ending (the Responses API's ``response.failed``) puts there, so a stream the
server's time limit cuts ends as that protocol's clients expect."""
"""The scope key under which the app's outermost layer keeps the server's own `send`."""

_log = logging.getLogger("cantata.serve")
_ended_on_purpose: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "cantata_serve_ended_on_purpose", default=False
)


def ended_on_purpose() -> bool:
    """Whether this request's task left its response unfinished on purpose (a client that
    stopped reading, a run stopped at shutdown): uvicorn's complaint about it is noise."""
    return _ended_on_purpose.get()


def _positive(name: str, value: object, *, whole: bool = False) -> None:
    if whole:
        if type(value) is not int or value < 1:
            raise ConfigurationError(f"{name} must be a positive whole number, got {value!r}")
        return
    if (
        not isinstance(value, int | float)
        or isinstance(value, bool)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ConfigurationError(
            f"{name} must be a positive finite number of seconds, got {value!r}"
        )


@dataclass(frozen=True, slots=True)
class Limits:
    """`max_body_bytes` per request body; `request_timeout` seconds per request (a streamed
    answer included: a run longer than that is cancelled); `max_running` requests running
    model work at once, `max_queued` more waiting at most `queue_timeout` seconds for a turn
    (the rest are answered 429); `write_timeout` seconds a stream waits for a client that
    does not read before it is ended; `abandon_after` seconds a run waiting for a person
    is held in memory unanswered before it is released (logged, and counted in /metrics
    as ``cantata_serve_abandoned_runs``; one checkpointed in the store is still answered
    from there)."""

    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT
    max_running: int = DEFAULT_MAX_RUNNING
    max_queued: int = DEFAULT_MAX_QUEUED
    queue_timeout: float = DEFAULT_QUEUE_TIMEOUT
    write_timeout: float = DEFAULT_WRITE_TIMEOUT
    abandon_after: float = DEFAULT_ABANDON_AFTER

    def __post_init__(self) -> None:
        size = self.max_body_bytes
        if type(size) is not int or size < 1:
            raise ConfigurationError(
                f"max_body_bytes must be a positive whole number of bytes, got {size!r}"
            )
        _positive("request_timeout", self.request_timeout)
        _positive("max_running", self.max_running, whole=True)
        if type(self.max_queued) is not int or self.max_queued < 0:
            raise ConfigurationError(
                f"max_queued must be a whole number, 0 or more, got {self.max_queued!r}"
            )
        _positive("queue_timeout", self.queue_timeout)
        _positive("write_timeout", self.write_timeout)
        _positive("abandon_after", self.abandon_after)


async def send_error(send: Send, exc: BaseException) -> None:
    """Answer with `exc` in OpenAI's error shape (the response must not have started)."""
    from .errors import error_headers, status_for

    body = json.dumps(error_body(exc)).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.lower().encode(), v.encode()) for k, v in error_headers(exc).items()]
    await send({"type": "http.response.start", "status": status_for(exc), "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


class _Stalled(Exception):
    """The client did not take a write within the write timeout."""


class LimitsMiddleware:
    """Applies `Limits` to every HTTP request of `app`, with the app's `Admission` and
    `Drain` (made here unless given)."""

    def __init__(
        self,
        app: ASGIApp,
        limits: Limits,
        *,
        metrics: ServeMetrics | None = None,
        drain: Drain | None = None,
    ) -> None:
        self.app = app
        self.limits = limits
        self.metrics = metrics or ServeMetrics()
        self.drain = drain or Drain()
        self.admission = Admission(
            max_running=limits.max_running,
            max_queued=limits.max_queued,
            queue_timeout=limits.queue_timeout,
            metrics=self.metrics,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limits.max_body_bytes
        try:
            _check_declared_size(scope, limit)
        except RequestError as exc:
            await send_error(send, exc)
            return
        # refuse before reading the body where the path tells (nothing on the refusal's way
        # waits: it is answered before the event loop runs anything else)
        if model_work_by_path(scope) and not await self._may_enter(send, scope, b""):
            return
        try:
            body = await _read_body(receive, limit)
        except RequestError as exc:
            await send_error(send, exc)
            return
        exchange = _Exchange(self.app, scope, body, receive, send, self)
        if not is_model_work(scope, body):
            if not is_follower(scope, body):
                await exchange.run()
                return
            try:
                with self.admission.follower():
                    await exchange.run()
            except RequestError as exc:  # refused before the exchange began
                await send_refusal(send, scope, body, exc)
            return
        if model_work_by_path(scope) is None and not await self._may_enter(send, scope, body):
            return
        try:
            async with self.admission.slot():
                await exchange.run()
        except RequestError as exc:  # refused by admission before the exchange began
            await send_refusal(send, scope, body, exc)

    async def _may_enter(self, send: Send, scope: Scope, body: bytes) -> bool:
        """Whether a request for model work may go on to its slot; if not, its refusal (503
        while the server stops, 429 when full) is sent, without waiting for anything."""
        refusal: Exception
        if self.drain.draining:
            self.metrics.rejected.labels("stopping").inc()
            refusal = ServerStoppingError(
                "the server is shutting down and takes no new work; send the request again "
                "(to another server, or to this one once restarted)"
            )
        else:
            try:
                self.admission.check()
                return True
            except RequestError as exc:
                refusal = exc
        # uvicorn's send writes to the transport and returns without suspending (unless
        # this client's connection is paused): the refusal never waits behind other tasks
        await send_refusal(send, scope, body, refusal)
        return False


class _Exchange:
    """One request past its body: runs the app, watching for a disconnect and the clock."""

    def __init__(
        self,
        app: ASGIApp,
        scope: Scope,
        body: bytes,
        receive: Receive,
        send: Send,
        owner: LimitsMiddleware,
    ):
        self._owner = owner
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
        try:
            async with asyncio.timeout(self._owner.limits.write_timeout):
                await self._send(message)
        except TimeoutError:
            raise _Stalled from None

    async def _watch(self, task: asyncio.Task[Any]) -> None:
        while (await self._receive())["type"] != "http.disconnect":
            pass
        self._gone.set()
        if not self._complete:
            task.cancel("client disconnected")

    async def run(self) -> None:
        timeout = self._owner.limits.request_timeout
        task = asyncio.current_task()
        assert task is not None  # an ASGI server always calls us from a task
        watcher = asyncio.create_task(self._watch(task))
        try:
            async with asyncio.timeout(timeout):
                await self._app(self._scope, self._replay, self._tracked_send)
        except TimeoutError:
            try:
                async with asyncio.timeout(self._owner.limits.write_timeout):
                    await self._timed_out(timeout)
            except TimeoutError:
                self._stalled()
        except _Stalled:
            self._stalled()
        except BaseExceptionGroup as group:  # from a task group inside the route
            rest = group.split(_Stalled)[1]
            if rest is not None:
                raise
            self._stalled()
        except asyncio.CancelledError:
            if self._gone.is_set():
                task.uncancel()
            elif self._owner.drain.draining:  # the server's grace period is over
                task.uncancel()
                _ended_on_purpose.set(True)
                _log.warning("%s ended unfinished: the server stopped", self._where())
            else:
                raise
        finally:
            watcher.cancel()

    def _where(self) -> str:
        client = self._scope.get("client") or ("?", 0)
        return f"{self._scope.get('method')} {self._scope.get('path')} from {client[0]}:{client[1]}"

    def _stalled(self) -> None:
        """The client stopped reading: the run is cancelled (the route's generator was closed
        on the way out) and the connection is aborted."""
        self._owner.metrics.stalled.inc()
        _abort(self._scope.get(SERVER_SEND, self._send))
        _ended_on_purpose.set(True)
        _log.warning(
            "%s ended: the client read nothing for %g s (write timeout)",
            self._where(),
            self._owner.limits.write_timeout,
        )

    async def _timed_out(self, seconds: float) -> None:
        """Say so: an error response, or the event that ends an event stream failed (the
        route's own, under `STREAM_FAILURE`, else an ``error`` event, which OpenAI clients
        raise; a chat stream's ``[DONE]`` follows). Any other started response is cut off."""
        error = _timeout_error(seconds)
        if not self._started:
            await send_error(self._send, error)
        elif self._event_stream and not self._complete:
            ending = self._scope.get(STREAM_FAILURE)
            if callable(ending):
                event = ending(error)
            else:
                event = f"data: {json.dumps(error_body(error))}\n\n".encode()
            if self._scope.get("path") == "/v1/chat/completions":
                event += b"data: [DONE]\n\n"  # as OpenAI ends a chat stream, failed or not
            await self._send({"type": "http.response.body", "body": event, "more_body": True})
            await self._send({"type": "http.response.body", "body": b"", "more_body": False})


def _abort(send: Send) -> None:
    """Reset the connection behind `send` at once, dropping what it still buffers (in the
    event loop and in the kernel). ASGI has no message for it: the transport is uvicorn's
    (its `send` is a method of the request's cycle, which holds it; middleware outside this
    one wraps it, so the app's outermost layer keeps it in the scope under `SERVER_SEND`);
    under another server the connection is left to that server's close."""
    transport = getattr(getattr(send, "__self__", None), "transport", None)
    if not isinstance(transport, asyncio.WriteTransport):
        return
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        # linger 0: close sends a reset and frees the kernel's send buffer too
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


def _timeout_error(timeout: float) -> BaseException:
    from ..core import TimeoutError as CantataTimeout

    return CantataTimeout(
        f"the request took longer than the server's limit of {timeout:g} s and was cancelled; "
        "ask for less, or start the server with a longer --timeout"
    )


def _check_declared_size(scope: Scope, limit: int) -> None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                declared = int(value)
            except ValueError:
                raise RequestError("the Content-Length header is not a number") from None
            if declared > limit:
                raise _too_large(limit)


async def _read_body(receive: Receive, limit: int) -> bytes:
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
