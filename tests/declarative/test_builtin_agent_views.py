"""Configs of agents that wrap a team or a workflow, and of the code runner (loaded only
when allowed, on the running interpreter)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from cantata.agents import ChatAgent
from cantata.core import ConfigurationError, Message
from cantata.declarative import (
    SpecError,
    UntrustedProviderError,
    from_config,
    load,
    to_config,
)
from cantata.models import OpenAIChatClient
from cantata.teams import CodeRunnerAgent, Sequential, TeamAgent
from cantata.tools import LocalCodeExecutor
from cantata.workflows import WorkflowAgent

ALLOW_RUNNER = ["cantata.teams.CodeRunnerAgent"]
WORKFLOW = """
version: 1
type: workflow
name: chain
start: first
executors:
  - name: first
    model: {api: scripted, connection: {script: ["one"]}}
  - name: second
    model: {api: scripted, connection: {script: ["two"]}}
edges:
  - {from: first, to: second}
"""


def _agent(name: str) -> ChatAgent:
    return ChatAgent(OpenAIChatClient("m", base_url="http://127.0.0.1:9/v1"), name=name)


def _through_json(obj: Any) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(json.dumps(to_config(obj)))
    return loaded


def test_team_agent_round_trip() -> None:
    view = Sequential([_agent("a"), _agent("b")], name="pair").as_agent(description="two")
    config = _through_json(view)
    assert config["provider"] == "cantata.teams.TeamAgent"
    back = from_config(config)
    assert isinstance(back, TeamAgent) and isinstance(back.team, Sequential)
    assert (back.name, back.description) == ("pair", "two")
    assert [p.name for p in back.team.participants] == ["a", "b"]
    assert to_config(back) == config


async def test_workflow_agent_loads_and_runs_but_a_workflow_is_not_written() -> None:
    workflow_config = {"provider": "cantata.workflows.Workflow", "config": {
        "name": "chain", "start": "first",
        "executors": [{"agent": {"provider": "cantata.agents.ChatAgent", "config": {
            "name": n, "client": {"provider": "cantata.models.ScriptedChatClient",
                                  "config": {"script": [n.upper()]}}}}}
            for n in ("first", "second")],
        "edges": [{"from": "first", "to": "second"}],
    }}  # fmt: skip
    agent = from_config(
        {"provider": "cantata.workflows.WorkflowAgent",
         "config": {"workflow": workflow_config, "name": "wf", "description": "a chain"}}
    )  # fmt: skip
    assert isinstance(agent, WorkflowAgent) and agent.description == "a chain"
    answer = await agent.run("go")
    assert "SECOND" in answer.text
    with pytest.raises(SpecError, match="write a workflow spec"):
        to_config(load(WORKFLOW).as_agent())


async def test_code_runner_round_trip_runs_code_only_when_allowed(tmp_path: Path) -> None:
    runner = CodeRunnerAgent(
        LocalCodeExecutor(timeout=20.0, max_output=500, work_dir=tmp_path), name="terminal"
    )
    config = _through_json(runner)
    assert config["config"]["work_dir"] == str(tmp_path)
    with pytest.raises(UntrustedProviderError, match=r"allow=\[.cantata.teams.CodeRunnerAgent"):
        from_config(config)
    back = from_config(config, allow=ALLOW_RUNNER)
    assert isinstance(back, CodeRunnerAgent) and to_config(back) == config
    assert back.executor.python == sys.executable
    answer = await back.run([Message("user", "```python\nprint(6 * 7)\n```")])
    assert "42" in answer.text
    scratch = _through_json(CodeRunnerAgent(LocalCodeExecutor()))
    assert scratch["config"]["work_dir"] is None


def test_a_code_runner_on_another_interpreter_is_not_written() -> None:
    runner = CodeRunnerAgent(LocalCodeExecutor(python="/usr/bin/python3-other"))
    with pytest.raises(SpecError, match="never names a program"):
        to_config(runner)


@pytest.mark.parametrize(
    ("provider", "config", "match"),
    [
        ("cantata.teams.TeamAgent", {}, "missing field"),
        ("cantata.teams.TeamAgent", {"team": {"provider": "cantata.teams.RoundRobin"}},
         "must be a team config"),
        ("cantata.workflows.WorkflowAgent", {"workflow": 1}, "must be a mapping"),
        ("cantata.teams.CodeRunnerAgent", {"timeout": -1}, "positive"),
        ("cantata.teams.CodeRunnerAgent", {"python": "/bin/sh"}, "unknown field"),
        ("cantata.teams.CodeRunnerAgent", {"work_dir": "/nonexistent/x"}, "not a directory"),
    ],
)  # fmt: skip
def test_bad_view_configs_are_typed_errors(
    provider: str, config: dict[str, Any], match: str
) -> None:
    with pytest.raises(ConfigurationError, match=match):
        from_config({"provider": provider, "config": config}, allow=ALLOW_RUNNER)
