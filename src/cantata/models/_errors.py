"""Map the `openai` SDK's exceptions into cantata's error hierarchy."""

from __future__ import annotations

import email.utils
import time
import urllib.parse
from collections.abc import Mapping, Sequence

import openai

from ..core import (
    CantataError,
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelOutputError,
    TimeoutError,
)
from ._openai_mapping import Feature

KeySource = str | None
"""Where the client's API key came from: ``"api_key="`` or the environment variable's name
(None: no key, none sent)."""

# Statuses a server answers a request field it does not support with (llama.cpp's server
# turns validation errors and failed asserts into 500).
_REFUSAL_STATUSES = frozenset({400, 422, 500, 501})
_FEATURE_WORDS: dict[Feature, tuple[str, ...]] = {
    "json_schema": ("response_format",),
    "json_object": ("response_format",),
    "tool_choice": ("tool_choice",),
    "tool_stream": ("stream",),
}
_SETTINGS: dict[Feature, str] = {
    "tool_choice": "use tool_choice='auto'",
    "tool_stream": "use get_response instead of a stream",
    "json_schema": "set structured_output='json_object'",
    "json_object": "drop response_format and ask for JSON in the instructions",
}


def refused_feature(exc: openai.APIStatusError, used: Sequence[Feature]) -> Feature | None:
    """The feature a refusal is most likely about: the one its error text names, else the
    first used; None when the status is not one a refusal comes with."""
    if exc.status_code not in _REFUSAL_STATUSES or not used:
        return None
    text = f"{exc.message} {exc.body}".lower()
    named = [f for f in used if all(w in text for w in _FEATURE_WORDS[f])]
    return (named or list(used))[0]


def map_openai_error(
    exc: openai.OpenAIError,
    *,
    model: str,
    base_url: str,
    key_source: KeySource = "api_key=",
    features: Sequence[Feature] = (),
    tried: Sequence[Feature] = (),
) -> CantataError:
    """The cantata error that stands for an SDK error, naming the model and the server.

    `features` are the refusable features the failed request used (their hints are added to
    a refusal); `tried` are those whose fallbacks were tried without success."""
    where = f"model {model!r} at {base_url}"
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        hint = _hint(status, base_url, key_source)
        if features and status in _REFUSAL_STATUSES:
            hint += "; if the server lacks " + " or ".join(
                f"{f} ({_SETTINGS[f]}, or pass fallbacks=True)" for f in features
            )
        if tried:
            hint += f"; it failed with the fallbacks for {', '.join(tried)} too"
        return ModelHTTPError(
            f"{where} answered HTTP {status}: {_short(exc.message)}{hint}",
            status_code=status,
            body=exc.body,
            retry_after=parse_retry_after(exc.response.headers),
        )
    if isinstance(exc, openai.APITimeoutError):
        return TimeoutError(
            f"request to {where} timed out; raise `timeout=` on the client or check the server"
        )
    if isinstance(exc, openai.APIConnectionError):
        return ModelConnectionError(
            f"could not connect to {where}: {exc.__cause__ or exc}; "
            "check that the server is running and that base_url= is right"
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


def _hint(status: int, base_url: str, key_source: KeySource) -> str:
    if status == 401:
        if key_source is None:
            return (
                "; the server wants an API key and none was set: set CANTATA_API_KEY "
                "(or OPENAI_API_KEY), or pass api_key="
            )
        return f"; the server refused the API key from {key_source}: check it"
    if status == 404:
        if "v1" not in urllib.parse.urlsplit(base_url).path.split("/"):
            return (
                f"; base_url= {base_url} has no /v1, under which most servers answer: "
                f"try {base_url}/v1"
            )
        return "; check the model name and base_url="
    if status == 429:
        return "; the server is rate limiting: wait `retry_after` seconds and retry"
    return ""


def _short(text: str, limit: int = 500) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
