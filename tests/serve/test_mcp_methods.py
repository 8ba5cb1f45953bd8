"""`agent.as_mcp_server()`, `workflow.as_mcp_server()` and `team.as_mcp_server()`
(first-class, the same server as `cantata.serve.as_mcp_server(obj)`, which they call): each
definition offers itself as an MCP tool, checked with the official MCP client, without a
warning."""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

import pytest
from mcp import Client

from cantata.agents import ChatAgent
from cantata.models import ScriptedChatClient
from cantata.serve import as_mcp_server
from cantata.teams import GroupChat, MaxMessage
from cantata.workflows import AgentExecutor, WorkflowBuilder

TIMEOUT = 60


def _echo(name: str) -> ChatAgent:
    return ChatAgent(
        ScriptedChatClient(lambda messages, options: f"{name}: {messages[-1].text}"),
        name=name,
        description=f"The {name} agent.",
    )


def _definitions() -> dict[str, Any]:
    agent = _echo("echo")
    workflow = WorkflowBuilder(AgentExecutor(_echo("step")), name="flow").build()
    team = GroupChat([_echo("solo")], name="crew", termination=MaxMessage(2))
    return {"agent": agent, "workflow": workflow, "team": team}


@pytest.mark.parametrize("kind", ["agent", "workflow", "team"])
async def test_a_definition_serves_itself_as_an_mcp_tool(kind: str) -> None:
    definition = _definitions()[kind]
    if not hasattr(definition, "as_mcp_server"):
        pytest.fail(f"a {kind} has no as_mcp_server()")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        server = definition.as_mcp_server(name="served")
    async with asyncio.timeout(TIMEOUT), Client(as_mcp_server(definition, name="served")) as ref:
        expected = [(t.name, t.description) for t in (await ref.list_tools()).tools]
    async with asyncio.timeout(TIMEOUT), Client(server) as client:
        tools = (await client.list_tools()).tools
        assert len(tools) == 1
        assert [(t.name, t.description) for t in tools] == expected
        result = await client.call_tool(tools[0].name, {"task": "hello"})
        assert not result.is_error
        assert "hello" in result.content[0].text


def test_the_method_fails_clearly_when_no_implementation_is_registered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from cantata.core import ConfigurationError, _serving

    monkeypatch.setattr(_serving, "_factory", None)
    with pytest.raises(ConfigurationError, match=r"agent\.as_mcp_server\(\)"):
        _echo("echo").as_mcp_server()
