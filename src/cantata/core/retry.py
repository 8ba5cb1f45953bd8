"""Error classes and retry policies: which failures are worth another attempt, and when.

`classify` sorts an exception into ``"retryable"`` (timeouts, rate limits, 5xx, dropped
connections: the same call may well succeed later), ``"fatal"`` (validation and
configuration mistakes: it fails the same way each time) or ``"needs_person"`` (an
exception that says so, by subclassing `NeedsPerson`). A `RetryPolicy` says how often and
after what pause a failure of the classes it names is tried again.
"""

from __future__ import annotations

import asyncio
import builtins
import random
from dataclasses import dataclass
from typing import Literal

from .errors import CantataError, ConfigurationError, ModelHTTPError, RunError, UsageError

__all__ = ["ErrorClass", "NeedsPerson", "RetryPolicy", "classify"]

ErrorClass = Literal["retryable", "fatal", "needs_person"]
_CLASSES = frozenset({"retryable", "fatal", "needs_person"})


class NeedsPerson(RunError):
    """A failure only a person can resolve (a refused payment, an ambiguous request)."""


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
    if isinstance(exc, UsageError | builtins.TypeError | builtins.ValueError):
        return "fatal"
    if isinstance(exc, CantataError):
        return None  # a wrapper (WorkflowError, AgentError...): its cause decides
    return None


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
            if not isinstance(value, int | float) or value != value or value < 0:
                raise ConfigurationError(
                    f"RetryPolicy {name} must be a number of 0 or more, not {value!r}"
                )
        if self.jitter > 1:
            raise ConfigurationError(f"RetryPolicy jitter is a share of 0 to 1, not {self.jitter}")
        unknown = set(self.retry_on) - _CLASSES
        if unknown:
            raise ConfigurationError(
                f"RetryPolicy retry_on has unknown classes {sorted(unknown)}; use "
                f"{sorted(_CLASSES)}"
            )

    def should_retry(self, exc: BaseException, attempt: int) -> bool:
        """Whether attempt `attempt` (1 for the first), which failed with `exc`, is retried."""
        return attempt < self.attempts and classify(exc) in self.retry_on

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        """Seconds to wait after failed attempt `attempt` (1 for the first)."""
        base = min(self.max_delay, self.initial_delay * self.multiplier ** (attempt - 1))
        return base * (1 - self.jitter * (rng or random).random())
