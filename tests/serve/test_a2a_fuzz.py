"""Hypothesis fuzz of A2A JSON-RPC bodies on a real server: every request is answered in
JSON-RPC's shape (a result, or an error with a code and a message), never with an HTTP
500 nor the internal-error code, and every stream ends whole."""

from __future__ import annotations

import json
from typing import Any

import httpx
from hypothesis import given
from hypothesis import strategies as st

INTERNAL_ERROR = -32603
METHODS = (
    "SendMessage",
    "SendStreamingMessage",
    "GetTask",
    "ListTasks",
    "CancelTask",
    "message/send",
    "message/stream",
    "tasks/get",
    "tasks/cancel",
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)
tags = st.fixed_dictionaries(
    {},
    optional={
        "cantata": st.fixed_dictionaries(
            {}, optional={"message": json_values, "author": json_values}
        )
        | json_values
    },
)
parts = st.fixed_dictionaries(
    {},
    optional={
        "text": st.text() | json_values,
        "data": json_values,
        "raw": st.text(alphabet="ABCDabcd0123+/=") | json_values,
        "url": st.text() | json_values,
        "mediaType": st.text() | json_values,
        "metadata": tags | json_values,
        "kind": st.sampled_from(["text", "data", "file"]),
    },
)
messages = st.fixed_dictionaries(
    {},
    optional={
        "role": st.sampled_from(["ROLE_USER", "ROLE_AGENT", "user", "agent"]) | json_values,
        "messageId": st.text() | json_values,
        "contextId": st.text(max_size=140) | json_values,
        "taskId": st.text(max_size=140) | json_values,
        "parts": st.lists(parts, max_size=4) | json_values,
        "kind": st.just("message"),
        "metadata": json_values,
    },
)
params = st.fixed_dictionaries(
    {},
    optional={
        "message": messages | json_values,
        "configuration": json_values,
        "id": st.text() | json_values,
        "contextId": st.text() | json_values,
        "historyLength": json_values,
        "pageSize": json_values,
        "pageToken": st.text() | json_values,
    },
)
bodies = st.fixed_dictionaries(
    {"jsonrpc": st.just("2.0") | json_values},
    optional={
        "id": st.integers() | st.text() | json_values,
        "method": st.sampled_from(METHODS) | json_values,
        "params": params | json_values,
    },
)


async def _check(url: str, content: bytes, version: str) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        reply = await http.post(
            f"{url}/a2a/echo",
            content=content,
            headers={"content-type": "application/json", "A2A-Version": version},
        )
        text = (await reply.aread()).decode("utf-8", "replace")
    assert reply.status_code < 500, text
    if reply.status_code != 200:  # the app's own guards answer in its error shape
        assert json.loads(text)["error"]["message"], text
        return
    if "text/event-stream" in reply.headers.get("content-type", ""):
        answers = [
            json.loads(line[len("data:") :])
            for line in text.splitlines()
            if line.startswith("data:")
        ]
        assert answers, text
    else:
        answers = [json.loads(text)]
    for answer in answers:
        assert answer.get("jsonrpc") == "2.0", text
        if "error" in answer:
            error = answer["error"]
            assert type(error["code"]) is int and error["message"], text
            assert error["code"] != INTERNAL_ERROR, text
        else:
            assert "result" in answer, text


@given(body=bodies, version=st.sampled_from(["1.0", "0.3"]))
async def test_any_json_rpc_body_is_answered_in_json_rpc_shape(
    echo_url: str, body: dict[str, Any], version: str
) -> None:
    await _check(echo_url, json.dumps(body).encode(), version)


@given(content=st.binary(max_size=200) | json_values.map(lambda v: json.dumps(v).encode()))
async def test_any_bytes_are_answered_in_json_rpc_shape(echo_url: str, content: bytes) -> None:
    await _check(echo_url, content, "1.0")


@given(depth=st.integers(min_value=50, max_value=20_000))
async def test_deeply_nested_bodies_are_parse_errors(echo_url: str, depth: int) -> None:
    body = b'{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": ' + b"[" * depth
    await _check(echo_url, body + b"]" * depth + b"}", "1.0")


async def test_bytes_that_are_not_utf8_are_a_parse_error(echo_url: str) -> None:
    # found by the fuzz above: the SDK answered an internal error (-32603)
    async with httpx.AsyncClient(timeout=30) as http:
        reply = await http.post(
            f"{echo_url}/a2a/echo", content=b"\x80", headers={"Content-Type": "application/json"}
        )
    assert reply.json()["error"]["code"] == -32700


async def test_a_0_3_method_sent_as_1_0_is_a_version_error(echo_url: str) -> None:
    # found by the fuzz above: the SDK answered an internal error (-32603)
    body = {"jsonrpc": "2.0", "id": 7, "method": "tasks/get", "params": {"id": "t"}}
    async with httpx.AsyncClient(timeout=30) as http:
        reply = await http.post(f"{echo_url}/a2a/echo", json=body, headers={"A2A-Version": "1.0"})
    error = reply.json()["error"]
    assert error["code"] == -32009 and "A2A-Version: 0.3" in error["message"]
    assert reply.json()["id"] == 7
