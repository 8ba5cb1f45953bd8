"""The YAML examples in examples/ load offline, and run on the embedded model (local_model);
the remote one runs against the agent example served by `cantata serve`."""

from __future__ import annotations

from pathlib import Path

import pytest

from cantata.agents import ChatAgent, ResponsesAgent
from cantata.declarative import load, workflow_agents
from cantata.models import LocalChatClient
from cantata.teams import GroupChat
from cantata.workflows import AgentUpdateEvent, Workflow

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SPECS = sorted(EXAMPLES.glob("*.yaml"))
ALLOW = ["demo", "handoff_triage"]  # the example modules whose tools the specs name
REMOTE = {"remote_forecaster.yaml"}  # specs of agents on a server, not on the local model


@pytest.fixture
def examples_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLES))


def test_there_are_examples() -> None:
    names = {p.name for p in SPECS}
    assert {"agent_with_tool.yaml", "writer_critic.yaml", "translation_chain.yaml",
            "remote_forecaster.yaml", "selector_picnic.yaml",
            "handoff_triage.yaml"} <= names  # fmt: skip


@pytest.mark.usefixtures("examples_on_path")
@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.name)
async def test_each_example_loads_on_the_local_model(path: Path) -> None:
    component = load(path, allow=ALLOW)
    if path.name in REMOTE:
        assert isinstance(component, ResponsesAgent)
        await component.aclose()
        return
    if isinstance(component, Workflow):
        agents = workflow_agents(component)
    else:
        agents = getattr(component, "participants", [component])
    assert agents and all(isinstance(a.client, LocalChatClient) for a in agents)


@pytest.mark.local_model
@pytest.mark.usefixtures("examples_on_path")
async def test_agent_with_tool_calls_it_on_the_local_model() -> None:
    agent = load(EXAMPLES / "agent_with_tool.yaml", allow=["demo"])
    assert isinstance(agent, ChatAgent)
    async with agent:
        response = await agent.run("What is the weather in Oslo today?")
    calls = [c for m in response.messages for c in m.function_calls]
    assert calls and calls[0].name == "get_weather"
    assert response.text.strip()


@pytest.mark.local_model
async def test_writer_critic_runs_to_an_end_on_the_local_model() -> None:
    team = load(EXAMPLES / "writer_critic.yaml")
    assert isinstance(team, GroupChat)
    try:
        result = await team.run("Write a four-line poem about the sea.")
    finally:
        for agent in team.participants:
            await agent.aclose()
    speakers = [m.author_name for m in result.messages[1:]]
    assert speakers[:2] == ["writer", "critic"]
    assert result.stop_message is not None
    assert result.stop_message.source in {"TextMention", "MaxMessage"}


@pytest.mark.local_model
async def test_translation_chain_runs_every_step_on_the_local_model() -> None:
    workflow = load(EXAMPLES / "translation_chain.yaml")
    assert isinstance(workflow, Workflow)
    speakers: list[str] = []
    try:
        stream = workflow.run_stream("a cat who learns to play the piano")
        async for event in stream:
            if isinstance(event, AgentUpdateEvent) and event.executor_id not in speakers:
                speakers.append(event.executor_id)
        outputs = stream.result.outputs
    finally:
        for agent in workflow_agents(workflow):
            await agent.aclose()
    assert speakers == ["writer", "french", "spanish", "english"]
    assert len(outputs) == 1 and outputs[0].text.strip()


@pytest.mark.local_model
def test_cantata_run_streams_the_agent_example_in_a_subprocess() -> None:
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(EXAMPLES)}
    args = [sys.executable, "-m", "cantata.cli", "run", str(EXAMPLES / "agent_with_tool.yaml"),
            "What is the weather in Oslo today?", "--allow", "demo", "--json"]  # fmt: skip
    done = subprocess.run(args, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    import json

    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    kinds = [e["event"] for e in events]
    assert "tool_call" in kinds and "tool_result" in kinds and kinds[-1] == "done"


@pytest.mark.local_model
async def test_the_remote_example_asks_the_served_agent_example() -> None:
    import yaml

    from ..serve._servers import cli_server

    with cli_server(
        "examples/agent_with_tool.yaml", "--allow", "demo", "--store", "memory://",
        env={"PYTHONPATH": str(EXAMPLES)},
    ) as (url, _proc):  # fmt: skip
        spec = yaml.safe_load((EXAMPLES / "remote_forecaster.yaml").read_text())
        agent = load({**spec, "url": f"{url}/v1"})  # the example's port, made free
        assert isinstance(agent, ResponsesAgent) and agent.model == "forecaster"
        async with agent:
            answer = await agent.run("What is the weather in Oslo today?")
    assert answer.text.strip() and answer.author_name == "remote_forecaster"


@pytest.mark.local_model
async def test_selector_picnic_routes_every_turn_on_the_local_model() -> None:
    from cantata.teams import RoutingEvent, Selector, TaskResult

    team = load(EXAMPLES / "selector_picnic.yaml")
    assert isinstance(team, GroupChat) and isinstance(team.speaker, Selector)
    names = ["planner", "cook", "weather"]
    routes: list[RoutingEvent] = []
    result: TaskResult | None = None
    try:
        async for item in team.run_stream("Plan a small picnic for four friends on Saturday."):
            if isinstance(item, RoutingEvent):
                routes.append(item)
            elif isinstance(item, TaskResult):
                result = item
    finally:
        for agent in team.participants:
            await agent.aclose()
        await team.speaker.client.aclose()
    assert result is not None
    assert len(routes) == 4 and all(r.choice in names for r in routes)
    speakers = [m.author_name for m in result.messages[1:]]
    assert speakers == [r.choice for r in routes]


@pytest.mark.local_model
@pytest.mark.usefixtures("examples_on_path")
async def test_handoff_triage_hands_off_to_a_specialist_on_the_local_model() -> None:
    from cantata.teams import Handoff, RoutingEvent, TaskResult, handoff_of

    team = load(EXAMPLES / "handoff_triage.yaml", allow=ALLOW)
    assert isinstance(team, Handoff)
    try:
        items = [item async for item in team.run_stream("How much is invoice INV-7?")]
    finally:
        for agent in team.participants:
            await agent.aclose()
    routes = [i for i in items if isinstance(i, RoutingEvent)]
    result = items[-1]
    assert isinstance(result, TaskResult)
    assert routes[0].choice == "triage"
    assert len(routes) >= 2 and routes[1].choice in {"billing", "tech_support"}
    handoffs = [h for m in result.messages if (h := handoff_of(m)) is not None]
    assert handoffs and (handoffs[0].source, handoffs[0].target) == ("triage", routes[1].choice)
    assert result.stop_message is not None
    assert result.stop_message.source in {"user_input", "max_turns"}
    assert result.messages[-1].author_name in {"billing", "tech_support"}
