"""Admission control: a bound on the model work a server runs and queues, the rest shed.

Each route declares what its requests ask of admission (`RouteWork`, on an `AdmittedRoute`);
the limits look the declaration up in the app's `RouteTable` before any route runs, so a
route module that adds model work says so where it defines the route. A request that runs
a model (a chat completion, a response, an A2A message, an MCP tool call, the dev UI's
chat) takes one of `max_running` slots for as long as it runs, its
stream included. When all are taken it waits in a FIFO queue of at most `max_queued`, for at
most `queue_timeout` seconds; beyond that it is answered at once with 429 and a
``Retry-After`` estimated from how long recent requests held their slot.

A request is queued only if its projected wait fits the queue timeout with room to spare:
its place in the queue, in batches of `max_running`, times the recent service time (the
moving average of how long requests held a slot, or longer if the requests running now have
already held theirs longer), times `SAFETY`. Before any request has finished, the service
time is unknown and only one batch may wait. So an accepted request gets its turn instead of
a 429 after the timeout, and a refusal is immediate however slow the model is. Everything
else (listing models, reading a stored response, cards, metrics) is never queued.

Streams that only follow (a dev UI run's events, an A2A ``SubscribeToTask``) run no model
but may stay open, mostly idle, up to the request timeout: at most `MAX_FOLLOWERS` are open
at once (`Admission.following`), and one more is a 429 at once. (``GET /mcp``, the other
stream a client could hold idle, is not served.)

The refusal speaks the protocol the route declares: OpenAI's ``error`` object on ``/v1`` and
the dev UI, a JSON-RPC error on ``/a2a`` and ``/mcp``, with HTTP 429 and ``Retry-After`` on
all, so a load balancer or an official client's retry logic understands it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import re
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from starlette.routing import BaseRoute, Route
from starlette.types import Scope, Send

from .errors import OverloadedError, ServerStoppingError, error_body, error_headers, status_for
from .metrics import ServeMetrics

__all__ = [
    "MAX_FOLLOWERS",
    "NO_WORK",
    "SAFETY",
    "Admission",
    "AdmittedRoute",
    "RouteTable",
    "RouteWork",
    "Work",
    "rpc_method",
    "send_refusal",
]

_log = logging.getLogger("cantata.serve")
_LOG_EVERY = 10.0  # seconds between two log lines about shed load
_MAX_RETRY_AFTER = 60
SAFETY = 1.5
"""How much longer than projected a queued request may have to wait (service times vary)."""
MAX_FOLLOWERS = 64
"""Streams that follow a run, without running a model, open at once (per process)."""


Work: TypeAlias = Literal["model", "follow", "none"]
"""What a request asks of admission: a slot (it runs a model), a follower's place (a stream
that follows a run), or nothing."""


def _openai_stream_error(exc: BaseException) -> bytes:
    return f"data: {json.dumps(error_body(exc))}\n\n".encode()


@dataclass(frozen=True, slots=True)
class RouteWork:
    """What a route declares to the limits: its `work` (or a function of the request's body
    that tells it, for a JSON-RPC endpoint whose method decides), the `protocol` its errors
    are shaped in, and `stream_error`, the bytes that end its event stream with an error
    (a request that runs out of time mid-stream)."""

    work: Work | Callable[[bytes], Work] = "none"
    protocol: Literal["openai", "jsonrpc"] = "openai"
    stream_error: Callable[[BaseException], bytes] = _openai_stream_error

    @property
    def known_before_body(self) -> bool:
        """Whether the work is told without reading the body (a refusal need not wait)."""
        return not callable(self.work)

    def of(self, body: bytes) -> Work:
        """The work of a request with this `body`."""
        return self.work(body) if callable(self.work) else self.work


NO_WORK = RouteWork()
"""What a route that declares nothing is: never queued, refused in OpenAI's shape."""


class AdmittedRoute(Route):
    """A Starlette `Route` that declares its `RouteWork` (a route that runs a model must be
    one, or admission never sees it)."""

    def __init__(
        self,
        path: str,
        endpoint: Callable[..., Any],
        *,
        methods: Sequence[str],
        work: RouteWork,
    ) -> None:
        super().__init__(path, endpoint, methods=list(methods))
        self.work = work


class RouteTable:
    """The declared work of an app's routes, looked up by a request's method and path before
    any route runs: a dict for literal paths, the routes' own patterns for the others."""

    def __init__(self, routes: Iterable[BaseRoute]) -> None:
        self._exact: dict[tuple[str, str], RouteWork] = {}
        self._patterns: list[tuple[frozenset[str], re.Pattern[str], RouteWork]] = []
        for route in routes:
            if not isinstance(route, AdmittedRoute):
                continue
            methods = frozenset(route.methods or ())
            if route.param_convertors:
                self._patterns.append((methods, route.path_regex, route.work))
            else:
                for method in methods:
                    self._exact.setdefault((method, route.path), route.work)

    def work(self, scope: Scope) -> RouteWork:
        """What the route that will answer `scope` declared (`NO_WORK` when none did)."""
        method: str = scope.get("method", "")
        path: str = scope.get("path", "")
        found = self._exact.get((method, path))
        if found is not None:
            return found
        for methods, pattern, work in self._patterns:
            if method in methods and pattern.match(path):
                return work
        return NO_WORK


def rpc_method(body: bytes) -> str | None:
    """The ``method`` of a JSON-RPC request body, or None (not JSON, not a request)."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return None
    method = data.get("method") if type(data) is dict else None
    return method if type(method) is str else None


class Admission:
    """The slots and the queue of one app (see the module docstring)."""

    def __init__(
        self,
        *,
        max_running: int,
        max_queued: int,
        queue_timeout: float,
        metrics: ServeMetrics,
        max_followers: int | None = None,
    ) -> None:
        self.max_running = max_running
        self.max_followers = MAX_FOLLOWERS if max_followers is None else max_followers
        self._following = 0
        self.max_queued = max_queued
        self.queue_timeout = queue_timeout
        self._metrics = metrics
        self._running = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._held = 0.0  # moving average of the seconds a request holds its slot
        self._starts: dict[object, float] = {}  # when each running request got its slot
        self._shed = 0
        self._last_log = -math.inf
        metrics.running.set_function(lambda: self._running)
        metrics.queued.set_function(lambda: len(self._waiters))

    @property
    def running(self) -> int:
        """Requests holding a slot now."""
        return self._running

    @property
    def queued(self) -> int:
        """Requests waiting for a slot now."""
        return len(self._waiters)

    @property
    def following(self) -> int:
        """Streams that follow a run open now (routes that declare ``"follow"``)."""
        return self._following

    @contextmanager
    def follower(self) -> Iterator[None]:
        """Count a following stream for the block, or `OverloadedError` at once when
        `max_followers` are open."""
        if self._following >= self.max_followers:
            raise self._refuse(
                "followers_full",
                f"the server has {self._following} streams following runs open, its limit; "
                "close one, or retry after the Retry-After seconds",
            )
        self._following += 1
        try:
            yield
        finally:
            self._following -= 1

    def service_time(self) -> float:
        """Seconds a request holds its slot at the recent pace: the moving average of those
        that finished, or, when every running request has held its slot longer than that
        (the model slowed down, or none has finished yet), the shortest of their times."""
        if self._starts and self._running >= self.max_running:
            newest = time.monotonic() - max(self._starts.values())
            return max(self._held, newest)
        return self._held

    def _fits(self, position: int) -> bool:
        """Whether the request at `position` (1: next) in the queue would get its turn well
        within the queue timeout."""
        batches = math.ceil(position / self.max_running)
        if self._held == 0.0 and batches > 1:  # nothing finished yet: one batch may wait
            return False
        return SAFETY * self.service_time() * batches <= self.queue_timeout

    def retry_after(self) -> int:
        """Whole seconds after which a refused request may find room: the time the work
        ahead of it takes at the recent pace, from 1 to 60."""
        ahead = self._running + len(self._waiters)
        estimate = self.service_time() * ahead / max(self.max_running, 1)
        return min(_MAX_RETRY_AFTER, max(1, math.ceil(estimate)))

    def check(self) -> None:
        """Raise `OverloadedError` (counted and logged) if a request arriving now would be
        refused; does nothing else, and never waits. Lets the server refuse before it reads
        the request's body."""
        if self._running < self.max_running and not self._waiters:
            return
        position = len(self._waiters) + 1
        if position > self.max_queued or not self._fits(position):
            raise self._refuse(
                "queue_full",
                f"the server is at capacity ({self._running} requests running, "
                f"{len(self._waiters)} waiting, its limits); retry after the Retry-After "
                "seconds, or send to another server",
            )

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold a slot for the block: at once, after a bounded wait, or `OverloadedError`."""
        await self._enter()
        token = object()
        start = self._starts[token] = time.monotonic()
        try:
            yield
        finally:
            del self._starts[token]
            self._leave(time.monotonic() - start)

    async def _enter(self) -> None:
        if self._running < self.max_running and not self._waiters:
            self._running += 1
            self._metrics.admitted.inc()
            return
        self.check()
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        start = time.monotonic()
        try:
            async with asyncio.timeout(self.queue_timeout):
                await waiter
        except BaseException as exc:
            if waiter.done() and not waiter.cancelled():
                self._leave(None)  # the slot came as the wait ended: pass it on
            else:
                waiter.cancel()
                self._remove(waiter)
            if isinstance(exc, TimeoutError):
                raise self._refuse(
                    "queue_timeout",
                    f"the request waited {self.queue_timeout:g} s for the server without "
                    "getting a turn; retry after the Retry-After seconds",
                ) from None
            raise
        self._metrics.queue_wait.observe(time.monotonic() - start)
        self._metrics.admitted.inc()

    def _remove(self, waiter: asyncio.Future[None]) -> None:
        with suppress(ValueError):
            self._waiters.remove(waiter)

    def _leave(self, held: float | None) -> None:
        if held is not None:
            self._held = held if self._held == 0.0 else 0.8 * self._held + 0.2 * held
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the slot passes to it: running stays the same
                return
        self._running -= 1

    def _refuse(self, reason: str, message: str) -> OverloadedError:
        self._metrics.rejected.labels(reason).inc()
        self._shed += 1
        now = time.monotonic()
        if now - self._last_log >= _LOG_EVERY:
            _log.warning(
                "shedding load: %d request(s) refused with 429 (%s) since the last report; "
                "%d running, %d queued (limits %d running, %d queued)",
                self._shed,
                reason,
                self._running,
                len(self._waiters),
                self.max_running,
                self.max_queued,
            )
            self._shed, self._last_log = 0, now
        return OverloadedError(message, retry_after=self.retry_after())


async def send_refusal(send: Send, work: RouteWork, body: bytes, exc: BaseException) -> None:
    """Answer `exc` (429, 503 or a request error) in the shape of the route's protocol
    (`RouteWork.protocol`): a JSON-RPC error, or OpenAI's error object."""
    status = status_for(exc)
    payload: dict[str, Any]
    if work.protocol == "jsonrpc":
        payload = {
            "jsonrpc": "2.0",
            "id": _rpc_id(body),
            "error": {"code": -32000, "message": str(exc), "data": {"httpStatus": status}},
        }
    else:
        payload = error_body(exc)
    data = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    headers += [(k.lower().encode(), v.encode()) for k, v in error_headers(exc).items()]
    if isinstance(exc, ServerStoppingError):
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data, "more_body": False})


def _rpc_id(body: bytes) -> str | int | None:
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return None
    rpc_id = data.get("id") if type(data) is dict else None
    return rpc_id if type(rpc_id) in (str, int) else None
