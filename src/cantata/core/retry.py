"""Error classes and retry policies: which failures are worth another attempt, and when.

`classify` sorts an exception into ``"retryable"`` (timeouts, rate limits, 5xx, dropped
connections: the same call may well succeed later), ``"fatal"`` (validation and
configuration mistakes: it fails the same way each time) or ``"needs_person"`` (an
exception that says so, by subclassing `NeedsPerson`). A `RetryPolicy` says how often and
after what pause a failure of the classes it names is tried again; `RetryPolicy.call` runs
a function under it, and its pauses end at once when the run is cancelled.

Who takes a policy: workflow executors (`WorkflowBuilder.with_retry`: the invocation is
tried again within its superstep; a needs-a-person failure becomes a request for input),
`ChatAgent(retry_policy=)` and `FunctionInvokingChatClient(retry_policy=)` (a model call,
never after part of its stream reached the caller), and tools (``@tool(retry_policy=)``).
"""

from __future__ import annotations

import asyncio
import builtins
import logging
import math
import random
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from .cancellation import CancellationToken
from .errors import (
    CancelledError,
    CantataError,
    ConfigurationError,
    ModelHTTPError,
    RunError,
    UsageError,
)

__all__ = ["ErrorClass", "NeedsPerson", "RetryPolicy", "classify"]

_log = logging.getLogger("cantata.retry")
T = TypeVar("T")

ErrorClass = Literal["retryable", "fatal", "needs_person"]
_CLASSES = frozenset({"retryable", "fatal", "needs_person"})


class NeedsPerson(RunError):
    """A failure only a person can resolve (a refused payment, an ambiguous request).

    ``NeedsPerson("card refused; update it and answer", details={"order": 17})``: in a
    workflow executor the run stops with a request for input that carries the message and
    `details` (keep them JSON data, so the request survives a checkpoint).
    """

    details: Any = None


def classify(exc: BaseException) -> ErrorClass:
    """The class of a failure: retryable, fatal, or needs a person."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:  # the cause decides for wrappers
        seen.add(id(current))
        found = _own_class(current)
        if found is not None:
            return found
        current = current.__cause__
    return "fatal"


def _own_class(exc: BaseException) -> ErrorClass | None:
    if isinstance(exc, NeedsPerson):
        return "needs_person"
    if isinstance(exc, ModelHTTPError):
        code = exc.status_code
        return "retryable" if code in (408, 409, 425, 429) or code >= 500 else "fatal"
    if isinstance(exc, builtins.TimeoutError | asyncio.TimeoutError | ConnectionError):
        return "retryable"
    if _is_transport_error(exc):
        return "retryable"
    if isinstance(exc, UsageError | builtins.TypeError | builtins.ValueError):
        return "fatal"
    if isinstance(exc, CantataError):
        return None  # a wrapper (WorkflowError, AgentError...): its cause decides
    return None


def _is_transport_error(exc: BaseException) -> bool:
    """A dropped or refused connection of the HTTP stack the model clients use (httpx, and
    the OpenAI SDK's wrapper of it); looked up only when those modules are loaded, so core
    imports neither."""
    httpx = sys.modules.get("httpx")
    if httpx is not None and isinstance(exc, httpx.TransportError):
        return True
    openai = sys.modules.get("openai")
    return openai is not None and isinstance(exc, openai.APIConnectionError)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How a failing executor, agent or tool is tried again.

    `attempts` counts the first one (1: no retry). The pause before attempt n+1 is
    ``initial_delay * multiplier**(n-1)``, at most `max_delay`, less a random share of up
    to `jitter` of it (so many callers that failed together do not retry together).
    """

    attempts: int = 3
    initial_delay: float = 0.5
    max_delay: float = 30.0
    multiplier: float = 2.0
    jitter: float = 0.5
    retry_on: frozenset[ErrorClass] = frozenset({"retryable"})

    def __post_init__(self) -> None:
        if type(self.attempts) is not int or self.attempts < 1:
            raise ConfigurationError(
                f"RetryPolicy attempts must be an int of 1 or more, not {self.attempts!r}"
            )
        for name in ("initial_delay", "max_delay", "multiplier", "jitter"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or value < 0
            ):
                raise ConfigurationError(
                    f"RetryPolicy {name} must be a finite number of 0 or more, not {value!r}"
                )
        if self.jitter > 1:
            raise ConfigurationError(f"RetryPolicy jitter is a share of 0 to 1, not {self.jitter}")
        given = self.retry_on
        if isinstance(given, str) or not isinstance(given, set | frozenset | list | tuple):
            raise ConfigurationError(
                f"RetryPolicy retry_on must be a set of error classes (of {sorted(_CLASSES)}), "
                f"not {given!r}"
            )
        unknown = sorted(repr(c) for c in given if not (isinstance(c, str) and c in _CLASSES))
        if unknown:
            raise ConfigurationError(
                f"RetryPolicy retry_on has unknown classes {', '.join(unknown)}; use "
                f"{sorted(_CLASSES)}"
            )
        object.__setattr__(self, "retry_on", frozenset(given))

    def should_retry(self, exc: BaseException, attempt: int) -> bool:
        """Whether attempt `attempt` (1 for the first), which failed with `exc`, is retried."""
        return attempt < self.attempts and classify(exc) in self.retry_on

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        """Seconds to wait after failed attempt `attempt` (1 for the first)."""
        try:
            grown = self.initial_delay * self.multiplier ** (attempt - 1)
        except OverflowError:  # a large multiplier far into the attempts: the cap holds
            grown = self.max_delay
        base = min(self.max_delay, grown)
        return base * (1 - self.jitter * (rng or random).random())

    def pause(self, attempt: int, exc: BaseException | None = None) -> float:
        """The wait after failed attempt `attempt`: `delay`, or longer when the failure says
        when to come back (an HTTP ``Retry-After``), never more than `max_delay`."""
        wait = self.delay(attempt)
        asked = _retry_after(exc)
        if asked is not None:
            wait = max(wait, min(asked, self.max_delay))
        return wait

    async def wait(self, seconds: float, token: CancellationToken | None = None) -> None:
        """Sleep `seconds`; a cancellation of the token (or of the task) ends the wait at
        once, raising `cantata.core.CancelledError` (or the task's own cancellation)."""
        if token is None:
            await asyncio.sleep(seconds)
            return
        token.raise_if_cancelled()
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        timer = loop.call_later(seconds, _finish, done)
        token.link_future(done)
        try:
            await done
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if token.is_cancelled and (current is None or not current.cancelling()):
                raise CancelledError(
                    "a retry's wait was cancelled through its CancellationToken"
                ) from None
            raise
        finally:
            timer.cancel()

    async def call(
        self,
        fn: Callable[[], Awaitable[T]],
        *,
        what: str,
        token: CancellationToken | None = None,
        retry_if: Callable[[BaseException], bool] | None = None,
    ) -> T:
        """``await fn()``, tried again on a failure this policy retries (and `retry_if`
        allows) after `pause`; the last failure is raised as it is. `what` names the call
        in the warning logged before each retry."""
        attempt = 1
        while True:
            try:
                return await fn()
            except Exception as exc:
                if not self.should_retry(exc, attempt) or (retry_if and not retry_if(exc)):
                    raise
                seconds = self.pause(attempt, exc)
                _log.warning(
                    "%s failed (%s: %s), attempt %d of %d; retrying in %.2f s",
                    what,
                    type(exc).__name__,
                    exc,
                    attempt,
                    self.attempts,
                    seconds,
                )
                await self.wait(seconds, token)
                attempt += 1


def _finish(done: asyncio.Future[None]) -> None:
    if not done.done():
        done.set_result(None)


def _retry_after(exc: BaseException | None) -> float | None:
    """The wait a failure (or its cause) asks for, in seconds, when it names one."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        value = getattr(exc, "retry_after", None)
        if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
            return float(value)
        exc = exc.__cause__
    return None
