"""The README's way to serve: `cantata serve examples/serve_agent.py:agent` (the embedded
model) called with curl's body through httpx and with the `openai` client."""

from __future__ import annotations

import httpx
import pytest
from openai import AsyncOpenAI

from ._servers import cli_server


@pytest.mark.local_model
async def test_the_example_agent_answers_over_http() -> None:
    with cli_server("examples/serve_agent.py:agent", "--store", "memory://") as (url, _proc):
        async with httpx.AsyncClient(timeout=300) as http:
            reply = await http.post(
                f"{url}/v1/chat/completions",
                json={
                    "model": "assistant",
                    "messages": [{"role": "user", "content": "Say hello."}],
                },
            )
        assert reply.status_code == 200, reply.text
        assert reply.json()["choices"][0]["message"]["content"].strip()
        async with AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", timeout=300) as client:
            first = await client.responses.create(model="assistant", input="My name is Ada.")
            second = await client.responses.create(
                model="assistant", input="What is my name?", previous_response_id=first.id
            )
            assert first.output_text.strip() and second.output_text.strip()
