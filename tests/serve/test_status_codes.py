"""Status codes a client can cause, on a real uvicorn: a prompt longer than the model's
context is 400 ``context_length_exceeded`` (with the official client, and with the embedded
model for real), and malformed A2A and MCP bodies are answered as JSON-RPC errors under 500
with no traceback in the server's log (Hypothesis)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cantata.agents import ChatAgent
from cantata.core import ContextLengthError, ModelHTTPError
from cantata.models import ScriptedChatClient
from cantata.stores import MemoryStore

from ._servers import serving

WAIT = 30.0


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextmanager
def _logged() -> Iterator[list[logging.LogRecord]]:
    """Every log record of the block (the server runs in this process)."""
    handler = _Records()
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield handler.records
    finally:
        root.removeHandler(handler)


TOO_LONG = "the prompt is 9000 tokens, more than the context of 4096"


@pytest.mark.parametrize(
    "too_long",
    [
        ContextLengthError(TOO_LONG),  # the embedded model's
        ModelHTTPError(  # what an OpenAI-compatible model server answers
            f"HTTP 400: {TOO_LONG}",
            status_code=400,
            body={"error": {"code": "context_length_exceeded", "message": TOO_LONG}},
        ),
    ],
)
async def test_a_prompt_longer_than_the_context_is_400_context_length_exceeded(
    too_long: Exception,
) -> None:
    agent = ChatAgent(ScriptedChatClient([too_long, too_long]), name="small")
    async with MemoryStore() as store, serving(agent, store=store) as url:
        client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="-", max_retries=0)
        async with client:
            with pytest.raises(openai.BadRequestError) as chat:
                await client.chat.completions.create(
                    model="small", messages=[{"role": "user", "content": "long"}]
                )
            with pytest.raises(openai.BadRequestError) as responses:
                await client.responses.create(model="small", input="long")
    for raised in (chat.value, responses.value):
        assert raised.status_code == 400 and raised.code == "context_length_exceeded"
        assert "9000 tokens" in raised.message


@pytest.mark.local_model
async def test_the_embedded_model_refuses_a_prompt_past_its_context_with_400() -> None:
    from cantata.models import LocalChatClient

    body = {"model": "local", "messages": [{"role": "user", "content": "word " * 3000}]}
    async with (
        LocalChatClient(n_ctx=512, parallel=1) as model,
        MemoryStore() as store,
        serving(ChatAgent(model, name="local"), store=store) as url,
    ):
        with _logged() as records:
            async with httpx.AsyncClient(timeout=WAIT) as http:
                reply = await http.post(f"{url}/v1/chat/completions", json=body)
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"]["code"] == "context_length_exceeded"
    assert not [r for r in records if r.exc_info], "a client's error logged a traceback"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=12,
)
a2a_bodies = st.fixed_dictionaries(
    {"jsonrpc": st.just("2.0"), "id": st.integers(0, 99)},
    optional={
        "method": st.sampled_from(["SendMessage", "GetTask", "CancelTask", "ListTasks"]),
        "params": st.fixed_dictionaries(
            {}, optional={"message": json_values, "id": json_values, "pageSize": json_values}
        )
        | json_values,
    },
)
mcp_bodies = st.fixed_dictionaries(
    {"jsonrpc": st.just("2.0") | json_values},
    optional={
        "id": st.integers(0, 99) | json_values,
        "method": st.sampled_from(["tools/call", "tools/list", "initialize"]) | json_values,
        "params": st.fixed_dictionaries(
            {}, optional={"name": st.just("echo") | json_values, "arguments": json_values}
        )
        | json_values,
    },
)


async def _post(url: str, path: str, body: dict[str, Any]) -> tuple[int, list[logging.LogRecord]]:
    headers = {"A2A-Version": "1.0", "Accept": "application/json, text/event-stream"}
    with _logged() as records:
        async with httpx.AsyncClient(timeout=WAIT) as http:
            reply = await http.post(f"{url}{path}", content=json.dumps(body), headers=headers)
            await reply.aread()
    return reply.status_code, records


@given(body=a2a_bodies)
async def test_malformed_a2a_requests_log_no_traceback(echo_url: str, body: dict[str, Any]) -> None:
    status, records = await _post(echo_url, "/a2a/echo", body)
    assert status < 500
    assert not [r for r in records if r.exc_info], [r.getMessage() for r in records]


@given(body=mcp_bodies)
async def test_malformed_mcp_requests_log_no_traceback(echo_url: str, body: dict[str, Any]) -> None:
    status, records = await _post(echo_url, "/mcp", body)
    assert status < 500
    assert not [r for r in records if r.exc_info], [r.getMessage() for r in records]
