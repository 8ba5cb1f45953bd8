"""Admission control: a bound on the model work a server runs and queues, the rest shed.

A request that runs a model (a chat completion, a response, an A2A message, an MCP tool
call, the dev UI's chat) takes one of `max_running` slots for as long as it runs, its
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

The refusal speaks each protocol's error shape: OpenAI's ``error`` object on ``/v1`` and
the dev UI, a JSON-RPC error on ``/a2a`` and ``/mcp``, with HTTP 429 and ``Retry-After`` on
all, so a load balancer or an official client's retry logic understands it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from collections import deque
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from typing import Any

from starlette.types import Scope, Send

from .errors import OverloadedError, ServerStoppingError, error_body, error_headers, status_for
from .metrics import ServeMetrics

__all__ = [
    "MAX_FOLLOWERS",
    "SAFETY",
    "Admission",
    "is_follower",
    "is_model_work",
    "model_work_by_path",
    "send_refusal",
]

_log = logging.getLogger("cantata.serve")
_RUN_METHODS = frozenset({"SendMessage", "SendStreamingMessage", "message/send", "message/stream"})
_FOLLOW_METHODS = frozenset({"SubscribeToTask", "tasks/resubscribe"})
_LOG_EVERY = 10.0  # seconds between two log lines about shed load
_MAX_RETRY_AFTER = 60
SAFETY = 1.5
"""How much longer than projected a queued request may have to wait (service times vary)."""
MAX_FOLLOWERS = 64
"""Streams that follow a run, without running a model, open at once (per process)."""


def model_work_by_path(scope: Scope) -> bool | None:
    """Whether a request runs a model, as far as its method and path tell: `None` for the
    JSON-RPC endpoints, where the method in the body decides (`is_model_work`). The OpenAI
    routes and the dev UI's chat are told apart before their body is read, so a refusal
    does not wait for it."""
    if scope.get("method") != "POST":
        return False
    path: str = scope.get("path", "")
    if path in ("/v1/chat/completions", "/v1/responses") or path.startswith("/devui/api/chat/"):
        return True
    if path.startswith("/a2a/") or path == "/mcp":
        return None
    return False


def is_model_work(scope: Scope, body: bytes) -> bool:
    """Whether a request runs a model (and so takes a slot): decided from its path and, for
    JSON-RPC endpoints, its method (a body that is not JSON is left to the route to refuse)."""
    by_path = model_work_by_path(scope)
    if by_path is not None:
        return by_path
    if scope.get("path", "").startswith("/a2a/"):
        return _rpc_method(body) in _RUN_METHODS
    return _rpc_method(body) == "tools/call"


def is_follower(scope: Scope, body: bytes) -> bool:
    """Whether a request is a stream that follows a run without running a model (a dev UI
    run's events, an A2A ``SubscribeToTask``): counted against `MAX_FOLLOWERS`."""
    path: str = scope.get("path", "")
    method = scope.get("method")
    if method == "GET":
        return path.startswith("/devui/api/run/") and path.endswith("/events")
    return method == "POST" and path.startswith("/a2a/") and _rpc_method(body) in _FOLLOW_METHODS


def _rpc_method(body: bytes) -> str | None:
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
        """Streams that follow a run open now (see `is_follower`)."""
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


async def send_refusal(send: Send, scope: Scope, body: bytes, exc: BaseException) -> None:
    """Answer `exc` (429, 503 or a request error) in the shape of the endpoint's protocol:
    JSON-RPC for ``/a2a`` and ``/mcp``, OpenAI's error object elsewhere."""
    status = status_for(exc)
    path: str = scope.get("path", "")
    payload: dict[str, Any]
    if path.startswith("/a2a/") or path == "/mcp":
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
