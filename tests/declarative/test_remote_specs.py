"""Remote agent specs (``type: remote_agent``): over the Responses API or A2A, alone or as a
team participant, against a real cantata server with a token given by placeholder; the
schema covers them; `cantata run` runs one."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import jsonschema
import pytest
import yaml
from typer.testing import CliRunner

from cantata.agents import A2AAgent, ResponsesAgent
from cantata.cli import app
from cantata.declarative import SpecError, load, spec_schema, to_config
from cantata.stores import MemoryStore
from cantata.teams import Sequential

from ..serve._servers import cli_server, echo_agent, serving

TOKEN = "remote-" + "t0ken"
ENV = {"ECHO_TOKEN": TOKEN}
RESPONSES = """
version: 1
type: remote_agent
name: far
description: the echo agent, far away
protocol: responses
url: ${Settings:url}/v1
model: echo
token: ${Env:ECHO_TOKEN}
timeout: 30
"""
A2A = """
version: 1
type: remote_agent
name: far_a2a
protocol: a2a
url: ${Settings:url}/a2a/echo
token: ${Env:ECHO_TOKEN}
"""
TEAM = """
version: 1
type: sequential
name: relay
participants:
  - type: remote_agent
    name: far
    protocol: a2a
    url: ${Settings:url}/a2a/echo
    token: ${Env:ECHO_TOKEN}
  - name: closer
    model: {api: scripted, connection: {script: ["closed"]}}
"""


@pytest.fixture
async def url() -> AsyncIterator[str]:
    async with MemoryStore() as store, serving(echo_agent(), store=store, token=TOKEN) as base:
        yield base


async def test_a_responses_remote_agent_spec_runs_against_the_server(url: str) -> None:
    agent = load(RESPONSES, settings={"url": url}, env=ENV)
    assert isinstance(agent, ResponsesAgent)
    assert (agent.name, agent.description, agent.model) == (
        "far",
        "the echo agent, far away",
        "echo",
    )
    assert TOKEN not in json.dumps(to_config(agent, include_secrets=True))
    async with agent:
        thread = agent.create_thread()
        assert (await agent.run("hi", thread=thread)).text == "turn 1: hi"
        assert (await agent.run("again", thread=thread)).text == "turn 2: again"


async def test_an_a2a_remote_agent_spec_runs_against_the_server(url: str) -> None:
    agent = load(A2A, settings={"url": url}, env=ENV)
    assert isinstance(agent, A2AAgent) and agent.name == "far_a2a"
    async with agent:
        assert (await agent.run("hello")).text == "turn 1: hello"


async def test_a_remote_participant_in_a_team_spec(url: str) -> None:
    team = load(TEAM, settings={"url": url}, env=ENV)
    assert isinstance(team, Sequential)
    assert [type(p).__name__ for p in team.participants] == ["A2AAgent", "ChatAgent"]
    try:
        result = await team.run("ping")
    finally:
        for agent in team.participants:
            await agent.aclose()
    said = [(m.author_name, m.text) for m in result.messages if m.role == "assistant"]
    assert said == [("far", "turn 1: ping"), ("closer", "closed")]


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"model": "echo"}, "'model' is for protocol responses only"),
        ({"store": True}, "'store' is for protocol responses only"),
        ({"protocol": "grpc"}, "protocol"),
        ({"url": 5}, "url"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_bad_remote_agent_specs_are_spec_errors(change: dict[str, object], match: str) -> None:
    spec = yaml.safe_load(A2A) | {"url": "http://127.0.0.1:9/a2a/x", "token": None} | change
    with pytest.raises(SpecError, match=match):
        load(spec)
    responses = yaml.safe_load(RESPONSES) | {"url": "http://127.0.0.1:9/v1", "token": None}
    with pytest.raises(SpecError, match="needs model"):
        load({k: v for k, v in responses.items() if k != "model"})


def test_the_schema_covers_remote_agents() -> None:
    schema = spec_schema()
    for text in (RESPONSES, A2A, TEAM):
        jsonschema.validate(yaml.safe_load(text), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(yaml.safe_load(A2A) | {"protocol": "grpc"}, schema)


def test_cantata_run_runs_a_remote_agent_spec(tmp_path: object) -> None:
    env = {"CANTATA_SERVE_TOKEN": TOKEN}
    with cli_server("tests/serve/_servers.py:echo", "--store", "memory://", env=env) as (
        base,
        _proc,
    ):
        spec = f"{tmp_path}/far.yaml"
        with open(spec, "w") as f:
            f.write(RESPONSES)
        result = CliRunner().invoke(
            app, ["run", spec, "hello there", "--json", "--setting", f"url={base}"], env=ENV
        )
    assert result.exit_code == 0, result.output
    events = [json.loads(line) for line in result.output.splitlines() if line.strip()]
    text = "".join(e["text"] for e in events if e["event"] == "text")
    assert text == "turn 1: hello there"
    assert events[-1] == {"event": "done", "agent": "far"}
