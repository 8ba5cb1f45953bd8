"""Hypothesis fuzz of HTTP bodies on a real server: bad input is always a typed 4xx in
OpenAI's error shape, never a 500, and every request ends (the client's timeout bounds it)."""

from __future__ import annotations

import json
from typing import Any

import httpx
from hypothesis import given
from hypothesis import strategies as st

PATHS = ("/v1/chat/completions", "/v1/responses")

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)
roles = st.sampled_from(["system", "developer", "user", "assistant", "tool"]) | json_values
parts = st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "input_text", "image_url", "input_image"]) | json_values},
    optional={"text": st.text() | json_values, "image_url": json_values | st.text()},
)
messages = st.fixed_dictionaries(
    {"role": roles},
    optional={
        "content": st.text() | st.lists(parts, max_size=3) | json_values,
        "name": st.text() | json_values,
        "tool_call_id": st.text() | json_values,
        "tool_calls": json_values,
        "type": st.sampled_from(["message", "function_call_output"]) | json_values,
        "call_id": st.text(),
        "output": st.text() | json_values,
    },
)
bodies = st.fixed_dictionaries(
    {},
    optional={
        "model": st.just("echo") | json_values,
        "messages": st.lists(messages, max_size=4) | json_values,
        "input": st.text() | st.lists(messages, max_size=4) | json_values,
        "stream": st.booleans() | json_values,
        "stream_options": json_values,
        "n": json_values,
        "tools": json_values,
        "store": st.booleans() | json_values,
        "instructions": st.text() | json_values,
        "previous_response_id": st.text() | json_values,
    },
)


def _raw(value: Any) -> bytes:
    return json.dumps(value).encode()


async def _check(url: str, path: str, content: bytes) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        reply = await http.post(
            f"{url}{path}", content=content, headers={"content-type": "application/json"}
        )
        text = (await reply.aread()).decode("utf-8", "replace")
    assert reply.status_code < 500, text
    if reply.status_code >= 400:
        error = json.loads(text)["error"]
        assert error["message"] and error["type"], text
    elif "text/event-stream" in reply.headers.get("content-type", ""):
        assert text.rstrip().endswith(("[DONE]", "}")), text  # the stream ended whole
        assert '"error"' not in text.split("\n")[-3:][0], text


@given(path=st.sampled_from(PATHS), body=bodies)
async def test_any_json_body_is_answered_or_refused_with_a_typed_4xx(
    echo_url: str, path: str, body: dict[str, Any]
) -> None:
    await _check(echo_url, path, _raw(body))


@given(path=st.sampled_from(PATHS), content=st.binary(max_size=200) | json_values.map(_raw))
async def test_any_bytes_are_refused_with_a_typed_4xx(
    echo_url: str, path: str, content: bytes
) -> None:
    await _check(echo_url, path, content)


@given(depth=st.integers(min_value=50, max_value=20_000), path=st.sampled_from(PATHS))
async def test_deeply_nested_bodies_are_refused(echo_url: str, depth: int, path: str) -> None:
    body = b'{"model": "echo", "messages": ' + b"[" * depth + b"]" * depth + b"}"
    await _check(echo_url, path, body)


async def test_a_role_that_is_not_a_string_is_a_400(echo_url: str) -> None:
    # found by the fuzz above: a list as a role was looked up in a dict (TypeError, a 500)
    for path, key in (("/v1/chat/completions", "messages"), ("/v1/responses", "input")):
        body = {"model": "echo", key: [{"role": ["user"], "content": "hi"}]}
        await _check(echo_url, path, _raw(body))
        async with httpx.AsyncClient(timeout=30) as http:
            reply = await http.post(f"{echo_url}{path}", json=body)
        assert reply.status_code == 400 and "role must be one of" in reply.text
