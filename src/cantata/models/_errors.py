"""Map the `openai` SDK's exceptions into cantata's error hierarchy."""

from __future__ import annotations

import email.utils
import time
from collections.abc import Mapping

import openai

from ..core import CantataError, ModelError, ModelHTTPError, ModelOutputError, TimeoutError


def map_openai_error(exc: openai.OpenAIError, *, model: str, base_url: str) -> CantataError:
    """The cantata error that stands for an SDK error, naming the model and the server."""
    where = f"model {model!r} at {base_url}"
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        return ModelHTTPError(
            f"{where} answered HTTP {status}: {_short(exc.message)}{_hint(status)}",
            status_code=status,
            body=exc.body,
            retry_after=parse_retry_after(exc.response.headers),
        )
    if isinstance(exc, openai.APITimeoutError):
        return TimeoutError(
            f"request to {where} timed out; raise `timeout=` on the client or check the server"
        )
    if isinstance(exc, openai.APIConnectionError):
        return ModelError(
            f"could not connect to {where}: {exc.__cause__ or exc}; "
            "check that the server is running and that base_url is right"
        )
    if isinstance(exc, openai.APIResponseValidationError):
        return ModelOutputError(f"{where} sent a response the SDK cannot read: {exc}")
    return ModelError(f"request to {where} failed: {exc}")


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait, from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date)."""
    lowered = {k.lower(): v for k, v in headers.items()}
    raw_ms = lowered.get("retry-after-ms")
    if raw_ms is not None:
        try:
            return max(0.0, float(raw_ms) / 1000.0)
        except ValueError:
            pass
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _hint(status: int) -> str:
    if status == 401:
        return "; set OPENAI_API_KEY or pass api_key="
    if status == 404:
        return "; check the model name and base_url"
    if status == 429:
        return "; the server is rate limiting: wait `retry_after` seconds and retry"
    return ""


def _short(text: str, limit: int = 500) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
