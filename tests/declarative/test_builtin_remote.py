"""Configs of the remote agents: a `ResponsesAgent` and an `A2AAgent` loaded from their
configs talk to a real cantata server (uvicorn on 127.0.0.1, with a token) like the agents
they were written from; keys and tokens are left out or written as placeholders."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from cantata.agents import A2AAgent, ResponsesAgent
from cantata.core import ConfigurationError, ModelHTTPError
from cantata.declarative import from_config, to_config
from cantata.stores import MemoryStore

from ..serve._servers import echo_agent, serving

TOKEN = "tok-" + "s3cret"


@pytest.fixture
async def server() -> AsyncIterator[str]:
    async with MemoryStore() as store, serving(echo_agent(), store=store, token=TOKEN) as url:
        yield url


def _written(agent: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    plain = json.loads(json.dumps(to_config(agent)))
    secret = json.loads(json.dumps(to_config(agent, include_secrets=True)))
    assert TOKEN not in json.dumps([plain, secret])
    return plain, secret


async def test_responses_agent_round_trip_talks_to_the_server(server: str) -> None:
    first = ResponsesAgent(
        f"{server}/v1", model="echo", name="remote", description="d", instructions="Be short.",
        api_key=TOKEN, timeout=20.0, store=True,
    )  # fmt: skip
    plain, secret = _written(first)
    assert "api_key" not in plain["config"]
    assert secret["config"]["api_key"] == "${Env:OPENAI_API_KEY}"
    assert plain["config"] == {
        "base_url": f"{server}/v1", "model": "echo", "name": "remote", "description": "d",
        "instructions": "Be short.", "store": True, "timeout": 20.0,
    }  # fmt: skip
    async with first, from_config(secret, env={"OPENAI_API_KEY": TOKEN}) as back:
        assert isinstance(back, ResponsesAgent)
        assert to_config(back) == plain
        thread = back.create_thread()
        assert (await back.run("hi", thread=thread)).text == "turn 1: hi"
        assert (await back.run("again", thread=thread)).text == "turn 2: again"
    async with from_config(plain) as keyless:  # no key: the server refuses it
        with pytest.raises(ModelHTTPError, match="HTTP 401"):
            await keyless.run("hi")


async def test_a2a_agent_round_trip_talks_to_the_server(server: str) -> None:
    first = A2AAgent(f"{server}/a2a/echo", token=TOKEN, timeout=15.0, description="remote echo")
    plain, secret = _written(first)
    assert "token" not in plain["config"]
    assert secret["config"]["token"] == "${Env:CANTATA_A2A_TOKEN}"
    async with first, from_config(secret, env={"CANTATA_A2A_TOKEN": TOKEN}) as back:
        assert isinstance(back, A2AAgent)
        assert to_config(back) == plain
        assert (back.name, back.description) == ("echo", "remote echo")
        thread = back.create_thread()
        assert (await back.run("hello", thread=thread)).text == "turn 1: hello"
        assert (await back.run("more", thread=thread)).text == "turn 2: more"


@pytest.mark.parametrize(
    ("provider", "config", "match"),
    [
        ("cantata.agents.ResponsesAgent", {"base_url": "http://h/v1"}, "missing field"),
        ("cantata.agents.ResponsesAgent", {"base_url": "http://h", "model": ""}, "model="),
        ("cantata.agents.ResponsesAgent", {"base_url": "x", "model": "m"}, "not an http"),
        ("cantata.agents.ResponsesAgent", {"base_url": "http://[::1", "model": "m"}, "IPv6"),
        ("cantata.agents.ResponsesAgent", {"base_url": "x", "model": "m", "store": 1}, "bool"),
        ("cantata.agents.ResponsesAgent", {"base_url": "x", "model": "m", "k": 1}, "unknown"),
        ("cantata.agents.A2AAgent", {"url": "ftp://h"}, "http"),
        ("cantata.agents.A2AAgent", {"url": "http://h", "timeout": 0}, "positive"),
        ("cantata.agents.A2AAgent", {"url": "http://h", "token": 5}, "'token' must be str"),
        ("cantata.agents.A2AAgent", {"url": "http://h", "name": "a b"}, "not valid"),
    ],
)
def test_bad_remote_agent_configs_are_typed_errors(
    provider: str, config: dict[str, Any], match: str
) -> None:
    with pytest.raises(ConfigurationError, match=match):
        from_config({"provider": provider, "config": config})
