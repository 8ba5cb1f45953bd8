"""Request limits as ASGI middleware: body size, admission, a time bound per request, a
write timeout, and cancel on disconnect, one layer each (`LimitsMiddleware` stacks them).

The body is read here, within the size limit, before any route sees it, and handed on as
one message. A request for the model work its route declares (`admission.RouteWork`) then
takes a slot of the app's `Admission` (or is refused with 429 at once; 503 while the server
stops). The route runs in the request's own
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
from contextlib import AsyncExitStack
from dataclasses import dataclass

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..core import ConfigurationError
from .admission import Admission, RouteTable, send_refusal
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


class LimitsMiddleware:
    """Applies `Limits` to every HTTP request of `app`, with the app's `Admission` and
    `Drain` (made here unless given) and what its routes declare (`routes`).

    One layer per job, outermost first: `_RefuseEarly` (model work refused before its body
    is read), `_BodyLimit` (the body read within its size, handed on as one message),
    `_Admit` (a slot or a follower's place for the request's work), `_WriteDeadline` (a
    client that stops reading ends the exchange), `_CancelOnDisconnect` (a client that
    leaves cancels its run), `_RequestDeadline` (the time bound of the whole request)."""

    def __init__(
        self,
        app: ASGIApp,
        limits: Limits,
        *,
        routes: RouteTable | None = None,
        metrics: ServeMetrics | None = None,
        drain: Drain | None = None,
    ) -> None:
        self.app = app
        self.limits = limits
        self.routes = routes or RouteTable(())
        self.metrics = metrics or ServeMetrics()
        self.drain = drain or Drain()
        self.admission = Admission(
            max_running=limits.max_running,
            max_queued=limits.max_queued,
            queue_timeout=limits.queue_timeout,
            metrics=self.metrics,
        )
        gate = _Gate(self.admission, self.drain, self.metrics)
        chain: ASGIApp = _RequestDeadline(app, limits.request_timeout, self.routes)
        chain = _CancelOnDisconnect(chain, self.drain)
        chain = _WriteDeadline(chain, limits.write_timeout, self.metrics)
        chain = _Admit(chain, self.admission, gate, self.routes)
        chain = _BodyLimit(chain, limits.max_body_bytes)
        self._chain = _RefuseEarly(chain, gate, self.routes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self._chain(scope, receive, send)


class _Gate:
    """Whether model work may go on to its slot now: not while the server stops (503), nor
    when admission would refuse it (429). Never waits."""

    def __init__(self, admission: Admission, drain: Drain, metrics: ServeMetrics) -> None:
        self._admission, self._drain, self._metrics = admission, drain, metrics

    def refusal(self) -> RequestError | ServerStoppingError | None:
        """The error to answer with, or None to go on."""
        if self._drain.draining:
            self._metrics.rejected.labels("stopping").inc()
            return ServerStoppingError(
                "the server is shutting down and takes no new work; send the request again "
                "(to another server, or to this one once restarted)"
            )
        try:
            self._admission.check()
        except RequestError as exc:
            return exc
        return None


def _replaying(message: Message, receive: Receive) -> Receive:
    """`receive` with `message` put back in front of it (a layer that read it hands it on)."""
    pending: Message | None = message

    async def replay() -> Message:
        nonlocal pending
        if pending is not None:
            first, pending = pending, None
            return first
        return await receive()

    return replay


class _RefuseEarly:
    """Refuses model work its route declares by path (not by body) before its body is read:
    nothing on the refusal's way waits, so it is answered before the event loop runs
    anything else (uvicorn's send writes to the transport and returns without suspending,
    unless this client's connection is paused)."""

    def __init__(self, app: ASGIApp, gate: _Gate, routes: RouteTable) -> None:
        self._app, self._gate, self._routes = app, gate, routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        work = self._routes.work(scope)
        if work.known_before_body and work.of(b"") == "model":
            refusal = self._gate.refusal()
            if refusal is not None:
                await send_refusal(send, work, b"", refusal)
                return
        await self._app(scope, receive, send)


class _BodyLimit:
    """Reads the body within `limit` bytes (413 beyond, before reading when the declared
    length says so) and hands it on as one message."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self._app, self._limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            _check_declared_size(scope, self._limit)
            body = await _read_body(receive, self._limit)
        except RequestError as exc:
            await send_error(send, exc)
            return
        message: Message = {"type": "http.request", "body": body, "more_body": False}
        await self._app(scope, _replaying(message, receive), send)


class _Admit:
    """Holds what the request's work takes for the rest of the exchange: a slot of
    `Admission` for model work (queued, or refused with 429 before the exchange begins), a
    follower's place for a stream that follows a run, nothing for the rest."""

    def __init__(self, app: ASGIApp, admission: Admission, gate: _Gate, routes: RouteTable):
        self._app, self._admission, self._gate, self._routes = app, admission, gate, routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        message = await receive()  # the whole body (`_BodyLimit` is outside)
        body: bytes = message.get("body", b"")
        receive = _replaying(message, receive)
        declared = self._routes.work(scope)
        work = declared.of(body)
        if work == "none":
            await self._app(scope, receive, send)
            return
        async with AsyncExitStack() as held:
            refusal = None
            if work == "model" and not declared.known_before_body:
                refusal = self._gate.refusal()  # `_RefuseEarly` could not tell this one
            try:
                if work == "follow":
                    held.enter_context(self._admission.follower())
                elif refusal is None:
                    await held.enter_async_context(self._admission.slot())
            except RequestError as exc:  # refused before the exchange began
                refusal = exc
            if refusal is not None:
                await send_refusal(send, declared, body, refusal)
                return
            await self._app(scope, receive, send)


class _Stalled(Exception):
    """The client did not take a write within the write timeout."""


class _WriteDeadline:
    """Bounds every send by `timeout` seconds: a client that reads nothing that long ends
    the exchange as a disconnect would (the run is cancelled as the route's generator is
    closed on the way out) and its connection is reset (`_reset_connection`)."""

    def __init__(self, app: ASGIApp, timeout: float, metrics: ServeMetrics) -> None:
        self._app, self._timeout, self._metrics = app, timeout, metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        timeout = self._timeout

        async def bounded(message: Message) -> None:
            try:
                async with asyncio.timeout(timeout):
                    await send(message)
            except TimeoutError:
                raise _Stalled from None

        try:
            await self._app(scope, receive, bounded)
        except _Stalled:
            self._stalled(scope, send)
        except BaseExceptionGroup as group:  # from a task group inside the route
            if group.split(_Stalled)[1] is not None:
                raise
            self._stalled(scope, send)

    def _stalled(self, scope: Scope, send: Send) -> None:
        self._metrics.stalled.inc()
        _reset_connection(scope.get(SERVER_SEND, send))
        _ended_on_purpose.set(True)
        _log.warning(
            "%s ended: the client read nothing for %g s (write timeout)",
            _where(scope),
            self._timeout,
        )


class _CancelOnDisconnect:
    """Cancels the request's task when its client disconnects before the answer is complete,
    so an agent run for a client that went away sees `asyncio.CancelledError` instead of
    running to its end for nobody; that cancellation, and the drain's at the end of the
    grace period, end the exchange quietly (on purpose, not a failure)."""

    def __init__(self, app: ASGIApp, drain: Drain) -> None:
        self._app, self._drain = app, drain

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body: Message | None = await receive()  # the whole body (`_BodyLimit` is outside)
        gone = asyncio.Event()
        complete = False

        async def replay() -> Message:
            nonlocal body
            if body is not None:
                first, body = body, None
                return first
            await gone.wait()
            return {"type": "http.disconnect"}

        async def tracked(message: Message) -> None:
            nonlocal complete
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                complete = True
            await send(message)

        task = asyncio.current_task()
        assert task is not None  # an ASGI server always calls us from a task

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            gone.set()
            if not complete:
                task.cancel("client disconnected")

        watcher = asyncio.create_task(watch())
        try:
            await self._app(scope, replay, tracked)
        except asyncio.CancelledError:
            if gone.is_set():
                task.uncancel()
            elif self._drain.draining:  # the server's grace period is over
                task.uncancel()
                _ended_on_purpose.set(True)
                _log.warning("%s ended unfinished: the server stopped", _where(scope))
            else:
                raise
        finally:
            watcher.cancel()


class _RequestDeadline:
    """Bounds the whole exchange by `timeout` seconds and says so when it runs out: an error
    response, or the error event the route declares (`RouteWork.stream_error`) ending its
    event stream. Any other started response is cut off."""

    def __init__(self, app: ASGIApp, timeout: float, routes: RouteTable) -> None:
        self._app, self._timeout, self._routes = app, timeout, routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = complete = event_stream = False

        async def tracked(message: Message) -> None:
            nonlocal started, complete, event_stream
            if message["type"] == "http.response.start":
                started = True
                event_stream = any(
                    k.lower() == b"content-type" and v.startswith(b"text/event-stream")
                    for k, v in message.get("headers", ())
                )
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                complete = True
            await send(message)

        try:
            async with asyncio.timeout(self._timeout):
                await self._app(scope, receive, tracked)
        except TimeoutError:
            error = _timeout_error(self._timeout)
            if not started:
                await send_error(send, error)
            elif event_stream and not complete:
                ending = scope.get(STREAM_FAILURE)  # a route's own for this request, if any
                if callable(ending):
                    event = ending(error)
                else:
                    event = self._routes.work(scope).stream_error(error)
                await send({"type": "http.response.body", "body": event, "more_body": True})
                await send({"type": "http.response.body", "body": b"", "more_body": False})


def _where(scope: Scope) -> str:
    client = scope.get("client") or ("?", 0)
    return f"{scope.get('method')} {scope.get('path')} from {client[0]}:{client[1]}"


def _reset_connection(send: Send) -> None:
    """Reset the connection behind `send` at once, dropping what it still buffers (in the
    event loop and in the kernel): a close would wait for ever to flush them to a client
    that does not read. Under a server other than uvicorn the connection is left to that
    server's close."""
    transport = _uvicorn_transport(send)
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        # linger 0: close sends a reset and frees the kernel's send buffer too
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


def _uvicorn_transport(send: Send) -> asyncio.WriteTransport | None:
    """The transport of the connection behind uvicorn's own `send`, or None.

    The one place the limits reach into the server, because nothing cleaner exists: ASGI
    has no message that aborts a connection (a response can only end cleanly), and uvicorn
    puts its transport in no scope key or extension; its `send` is a bound method of the
    request's cycle, which holds the transport. Middleware outside the limits wraps `send`,
    so the app's outermost layer keeps the server's own under `SERVER_SEND`."""
    transport = getattr(getattr(send, "__self__", None), "transport", None)
    return transport if isinstance(transport, asyncio.WriteTransport) else None


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
