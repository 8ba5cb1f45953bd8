"""Errors of the server: a refused request carries its HTTP status and OpenAI's error fields.

Every route raises `RequestError` (or lets a `CantataError` through, mapped by
`status_for`), and the app writes it in OpenAI's error shape,
``{"error": {"message", "type", "param", "code"}}``, so an OpenAI client shows the message.
The message is for a person (it names no Python class); ``code`` says what failed for a
program: OpenAI's own codes where one fits (``model_not_found``, ``context_length_exceeded``,
``server_shutting_down``...), ``guardrail_tripwire:<guardrail>`` (400) for a guardrail
that stopped the run and ``usage_limit_exceeded:<limit>`` (429) for a usage limit it
reached, else the name of the cantata error (``ModelError``, ``TimeoutError``...);
``type`` is OpenAI's kind of error for the status.
"""

from __future__ import annotations

import logging
from typing import Any

from starlette.responses import JSONResponse

from ..core import (
    AlreadyAnsweredError,
    CancelledError,
    CantataError,
    ContextLengthError,
    GuardrailTripwire,
    InvalidMessageError,
    ModelHTTPError,
    RunError,
    SerializationError,
    TimeoutError,
    UsageError,
    UsageLimitExceeded,
)

__all__ = [
    "OverloadedError",
    "RequestError",
    "ServerStoppingError",
    "error_body",
    "error_response",
    "status_for",
]

_log = logging.getLogger("cantata.serve")

_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    405: "invalid_request_error",
    409: "invalid_request_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    429: "rate_limit_error",
    499: "cancelled",
    500: "server_error",
    503: "server_error",
    504: "timeout",
}


class RequestError(UsageError):
    """A request the server refuses; `status` is its HTTP status, `param` the field at fault."""

    def __init__(
        self, message: str, *, status: int = 400, param: str | None = None, code: str | None = None
    ) -> None:
        super().__init__(message, status=status, param=param, code=code)

    status: int
    param: str | None
    code: str | None


class OverloadedError(RequestError):
    """The server has as much work as it takes (429): try again after `retry_after` seconds."""

    def __init__(self, message: str, *, retry_after: int, code: str = "rate_limit_exceeded"):
        super().__init__(message, status=429, code=code)
        self.retry_after = retry_after

    retry_after: int


class ServerStoppingError(RunError):
    """The server is shutting down: a request it did not finish within the grace period (503;
    the same request to another server, or to this one restarted, can succeed)."""

    retry_after: int = 1


def status_for(exc: BaseException) -> int:
    """The HTTP status of a failure: the caller's mistakes are 4xx, the run's are 5xx."""
    if isinstance(exc, RequestError):
        return exc.status
    if _context_overflow(exc):
        return 400
    if isinstance(exc, ServerStoppingError):
        return 503
    if isinstance(exc, AlreadyAnsweredError):
        return 409
    if isinstance(exc, GuardrailTripwire):
        return 400  # what the client sent, or asked for, is refused
    if isinstance(exc, UsageLimitExceeded):
        return 429
    if isinstance(exc, (InvalidMessageError, SerializationError, UsageError)):
        return 400
    if isinstance(exc, TimeoutError):
        return 504
    if isinstance(exc, CancelledError):
        return 499
    return 500


def error_body(exc: BaseException) -> dict[str, Any]:
    """OpenAI's error JSON for `exc` (a non-cantata error says only its type: no internals)."""
    status = status_for(exc)
    if isinstance(exc, CantataError):
        message = str(exc) or f"the run failed ({type(exc).__name__})"
    else:
        message = f"the run failed with {type(exc).__name__}; see the server's log"
    return {
        "error": {
            "message": message,
            "type": _TYPES.get(
                status, "server_error" if status >= 500 else "invalid_request_error"
            ),
            "param": getattr(exc, "param", None) if isinstance(exc, RequestError) else None,
            "code": _code(exc),
        }
    }


def _context_overflow(exc: BaseException) -> bool:
    """The prompt was longer than the model's context: the embedded model's typed error, or
    an OpenAI-compatible server's 400 saying so."""
    if isinstance(exc, ContextLengthError):
        return True
    return (
        isinstance(exc, ModelHTTPError)
        and exc.status_code == 400
        and "context_length_exceeded" in str(exc.body)
    )


def _code(exc: BaseException) -> str | None:
    if isinstance(exc, AlreadyAnsweredError):
        return "already_answered"
    if isinstance(exc, RequestError):
        return exc.code
    if _context_overflow(exc):
        return "context_length_exceeded"
    if isinstance(exc, ServerStoppingError):
        return "server_shutting_down"
    if isinstance(exc, GuardrailTripwire):
        return f"guardrail_tripwire:{exc.guardrail}"
    if isinstance(exc, UsageLimitExceeded):
        return f"usage_limit_exceeded:{exc.limit}"
    return type(exc).__name__


def error_headers(exc: BaseException) -> dict[str, str]:
    """The headers an error response carries: ``WWW-Authenticate`` on a 401, ``Retry-After``
    (whole seconds) when the client should come back later."""
    headers: dict[str, str] = {}
    if status_for(exc) == 401:
        headers["WWW-Authenticate"] = "Bearer"
    retry_after = getattr(exc, "retry_after", None)
    if isinstance(exc, (OverloadedError, ServerStoppingError)) and retry_after is not None:
        headers["Retry-After"] = str(int(retry_after))
    return headers


def error_response(exc: BaseException) -> JSONResponse:
    """`exc` as an HTTP response in OpenAI's error shape; unexpected failures are logged."""
    status = status_for(exc)
    if status >= 500 and not isinstance(exc, CantataError):
        _log.error("request failed", exc_info=exc)
    return JSONResponse(error_body(exc), status_code=status, headers=error_headers(exc) or None)
