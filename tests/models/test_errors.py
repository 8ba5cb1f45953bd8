"""Retry-After parsing and the SDK error mapping (the HTTP round trips are in
test_openai_chat.py)."""

from __future__ import annotations

import email.utils
import time

import openai
from hypothesis import given
from hypothesis import strategies as st

from cantata.core import ModelError, ModelHTTPError, ModelOutputError, TimeoutError
from cantata.models._errors import map_openai_error, parse_retry_after, refused_feature

try:  # the HTTP library the installed openai SDK is built on
    import httpx2 as http
except ImportError:  # older openai releases use httpx
    import httpx as http  # type: ignore[no-redef]


def test_retry_after_seconds_milliseconds_and_dates() -> None:
    assert parse_retry_after({"Retry-After": "12"}) == 12.0
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    future = email.utils.formatdate(time.time() + 60, usegmt=True)
    parsed = parse_retry_after({"Retry-After": future})
    assert parsed is not None and 50 < parsed <= 60
    assert parse_retry_after({}) is None
    assert parse_retry_after({"Retry-After": "soon"}) is None
    assert parse_retry_after({"Retry-After": "-3"}) == 0.0


@given(st.text(max_size=40))
def test_retry_after_never_raises(value: str) -> None:
    result = parse_retry_after({"Retry-After": value})
    assert result is None or result >= 0.0


def _request() -> http.Request:
    return http.Request("POST", "http://127.0.0.1:1/v1/chat/completions")


def test_status_error_keeps_status_body_and_retry_after() -> None:
    response = http.Response(429, headers={"retry-after": "3"}, request=_request())
    exc = openai.RateLimitError("too many", response=response, body={"error": "slow"})
    mapped = map_openai_error(exc, model="m", base_url="http://x")
    assert isinstance(mapped, ModelHTTPError)
    assert (mapped.status_code, mapped.body, mapped.retry_after) == (429, {"error": "slow"}, 3.0)
    assert "'m'" in str(mapped) and "http://x" in str(mapped) and "retry" in str(mapped)


def test_timeouts_connections_and_validation_map_to_their_families() -> None:
    timeout = map_openai_error(openai.APITimeoutError(_request()), model="m", base_url="u")
    assert isinstance(timeout, TimeoutError) and isinstance(timeout, ModelError) is False
    conn = map_openai_error(openai.APIConnectionError(request=_request()), model="m", base_url="u")
    assert isinstance(conn, ModelError) and "base_url" in str(conn)
    response = http.Response(200, request=_request())
    bad = openai.APIResponseValidationError(response=response, body=None)
    assert isinstance(map_openai_error(bad, model="m", base_url="u"), ModelOutputError)


def _status(code: int, message: str, body: object = None) -> openai.APIStatusError:
    response = http.Response(code, request=_request())
    return openai.APIStatusError(message, response=response, body=body)


def test_a_refusal_is_put_on_the_feature_its_error_names() -> None:
    llama = _status(500, "response_format.type: Input should be 'text' or 'json_object'")
    assert refused_feature(llama, ["tool_choice", "json_schema"]) == "json_schema"
    bare = _status(500, "Error code: 500")
    assert refused_feature(bare, ["tool_choice", "json_schema"]) == "tool_choice"
    assert refused_feature(_status(400, "tool_choice is not supported"), ["tool_choice"]) == (
        "tool_choice"
    )


def test_no_refusal_for_statuses_that_mean_something_else_or_nothing_to_give_up() -> None:
    for code in (401, 403, 404, 408, 429, 502, 503):
        assert refused_feature(_status(code, "response_format"), ["json_schema"]) is None
    assert refused_feature(_status(500, "response_format"), []) is None


def test_a_refusal_without_fallbacks_names_the_feature_and_the_setting() -> None:
    mapped = map_openai_error(
        _status(500, "bad"), model="m", base_url="u", features=["json_schema", "tool_choice"]
    )
    assert "structured_output='json_object'" in str(mapped)
    assert "tool_choice='auto'" in str(mapped) and "fallbacks=True" in str(mapped)


def test_401_and_404_hints_name_the_key_source_and_the_missing_v1() -> None:
    unset = map_openai_error(_status(401, "no"), model="m", base_url="u", key_source=None)
    assert "CANTATA_API_KEY" in str(unset) and "none was set" in str(unset)
    env = map_openai_error(
        _status(401, "no"), model="m", base_url="u", key_source="CANTATA_API_KEY"
    )
    assert "refused the API key from CANTATA_API_KEY" in str(env)
    bare = map_openai_error(_status(404, "nf"), model="m", base_url="http://h:1")
    assert "try http://h:1/v1" in str(bare)
    with_v1 = map_openai_error(_status(404, "nf"), model="m", base_url="http://h:1/v1")
    assert "try" not in str(with_v1)
