"""as_mcp_server: served agents, workflows and teams as MCP tools, checked with the official
MCP client over stdio (a subprocess), streamable HTTP (a real uvicorn) and in process."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from typing import Any

import httpx
import mcp_types as types
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client, MCPError, StdioServerParameters

from cantata.agents import ChatAgent
from cantata.core import ConfigurationError, Message
from cantata.models import ChatOptions, ScriptedChatClient
from cantata.serve import Limits, mcp_routes, openai_routes
from cantata.serve.mcp_server import as_mcp_server
from cantata.stores import MemoryStore
from cantata.teams import GroupChat
from cantata.workflows import WorkflowBuilder

from ._servers import ROOT, cli_server, echo_agent, serving

# the OpenAI routes and /mcp only: the tests do not depend on the other optional parts
PROVIDERS = [openai_routes.contribute, mcp_routes.contribute]

TIMEOUT = 30.0


def _text(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


def _failing_agent() -> ChatAgent:
    def fail(messages: list[Message], options: ChatOptions) -> str:
        raise RuntimeError("the model is down")

    return ChatAgent(ScriptedChatClient(fail), name="flaky", description="Always fails.")


def _slow_agent() -> ChatAgent:
    async def slow(messages: list[Message], options: ChatOptions) -> str:
        await asyncio.sleep(60)
        return "late"

    return ChatAgent(ScriptedChatClient(slow), name="slow", description="Takes a minute.")


# --- over stdio, in a subprocess -------------------------------------------------------


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_stdio_lists_and_calls_the_served_agent(mode: str) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "cantata.serve.mcp_stdio", "tests/serve/_servers.py:echo"],
        cwd=str(ROOT),
    )
    async with asyncio.timeout(TIMEOUT), Client(params, mode=mode) as client:
        listed = await client.list_tools()
        (tool,) = listed.tools
        assert tool.name == "echo"
        assert tool.description == "Counts the user's turns."
        assert tool.input_schema["required"] == ["task"]
        first = await client.call_tool("echo", {"task": "hello"})
        second = await client.call_tool("echo", {"task": "again"})
    assert not first.is_error and _text(first) == "turn 1: hello"
    assert _text(second) == "turn 1: again"  # each call runs on a fresh thread


def test_stdio_entry_point_refuses_an_unknown_target_clearly() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "cantata.serve.mcp_stdio", "tests/serve/_servers.py:nothing"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2
    assert "has no attribute 'nothing'" in done.stderr


# --- over streamable HTTP, mounted in the serve app ------------------------------------


async def test_http_serves_agents_workflows_and_teams_at_mcp() -> None:
    workflow = WorkflowBuilder(echo_agent("inner")).build()
    team = GroupChat([echo_agent("first"), echo_agent("second")], name="pair", max_turns=2)
    served = {"echo": echo_agent(), "flow": workflow, "pair": team}
    async with MemoryStore() as store, serving(served, store=store, providers=PROVIDERS) as url:
        for mode in ("auto", "legacy"):
            async with asyncio.timeout(TIMEOUT), Client(f"{url}/mcp", mode=mode) as client:
                listed = await client.list_tools()
                assert [t.name for t in listed.tools] == ["echo", "flow", "pair"]
                answer = await client.call_tool("echo", {"task": "hi"})
                flowed = await client.call_tool("flow", {"task": "through"})
                teamed = await client.call_tool("pair", {"task": "go"})
            assert _text(answer) == "turn 1: hi"
            assert not flowed.is_error and _text(flowed) == "turn 1: through"
            # both speakers answer, one after the other; the second saw the first's answer
            assert not teamed.is_error and _text(teamed) == "turn 1: go\n\nturn 2: turn 1: go"


async def test_http_mcp_needs_the_servers_token() -> None:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    async with (
        MemoryStore() as store,
        serving(echo_agent(), store=store, token="s3cret", providers=PROVIDERS) as url,
    ):
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        async with httpx.AsyncClient(timeout=TIMEOUT) as plain:
            refused = await plain.post(f"{url}/mcp", json=body)
        assert refused.status_code == 401
        authorized = httpx2.AsyncClient(headers={"Authorization": "Bearer s3cret"})
        async with asyncio.timeout(TIMEOUT), authorized:
            transport = streamable_http_client(f"{url}/mcp", http_client=authorized)
            async with Client(transport) as client:
                result = await client.call_tool("echo", {"task": "let me in"})
        assert _text(result) == "turn 1: let me in"


async def test_cantata_serve_offers_mcp_by_default() -> None:
    with cli_server("tests/serve/_servers.py:echo", "--store", "memory://") as (url, _proc):
        async with asyncio.timeout(TIMEOUT), Client(f"{url}/mcp") as client:
            (tool,) = (await client.list_tools()).tools
            result = await client.call_tool(tool.name, {"task": "from afar"})
    assert tool.name == "echo" and _text(result) == "turn 1: from afar"


async def test_a_client_that_disconnects_cancels_the_run() -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def gate(messages: list[Message], options: ChatOptions) -> str:
        started.set()
        try:
            await asyncio.sleep(TIMEOUT * 2)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "too late"

    agent = ChatAgent(ScriptedChatClient(gate), name="gate")
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "gate", "arguments": {"task": "wait"}},
    }
    headers = {"Accept": "application/json, text/event-stream"}
    async with MemoryStore() as store, serving(agent, store=store, providers=PROVIDERS) as url:
        async with httpx.AsyncClient(timeout=TIMEOUT) as plain:
            request = asyncio.create_task(plain.post(f"{url}/mcp", json=body, headers=headers))
            async with asyncio.timeout(TIMEOUT):
                await started.wait()
            request.cancel()
        async with asyncio.timeout(TIMEOUT):
            await cancelled.wait()  # hangs (and times out) if the run outlives its client


async def test_a_run_cut_by_the_request_timeout_is_answered_as_a_tool_error() -> None:
    limits = Limits(request_timeout=2.0)
    async with (
        MemoryStore() as store,
        serving(_slow_agent(), store=store, limits=limits, providers=PROVIDERS) as url,
        asyncio.timeout(TIMEOUT),
        Client(f"{url}/mcp") as client,
    ):
        result = await client.call_tool("slow", {"task": "wait"})
    assert result.is_error and "did not answer within" in _text(result)


# --- in process: errors are results the calling model can read -------------------------


async def test_a_failing_agent_is_an_error_result_naming_it() -> None:
    async with Client(as_mcp_server([_failing_agent()])) as client:
        result = await client.call_tool("flaky", {"task": "try"})
    assert result.is_error
    assert "agent 'flaky' failed" in _text(result) and "the model is down" in _text(result)


async def test_a_run_past_its_time_bound_is_cancelled_and_answered() -> None:
    async with asyncio.timeout(TIMEOUT):
        async with Client(as_mcp_server(_slow_agent(), call_timeout=0.2)) as client:
            result = await client.call_tool("slow", {"task": "wait"})
    assert result.is_error and "did not answer within 0.2 s" in _text(result)


async def test_unknown_tool_is_a_protocol_error_listing_the_tools() -> None:
    async with Client(as_mcp_server(echo_agent())) as client:
        with pytest.raises(MCPError, match=r"no tool named 'nope'.*'echo'"):
            await client.call_tool("nope", {"task": "x"})


async def test_arguments_without_a_task_text_are_an_error_result() -> None:
    async with Client(as_mcp_server(echo_agent())) as client:
        result = await client.call_tool("echo", {"task": 3})
    assert result.is_error and "takes one argument 'task'" in _text(result)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    arguments=st.dictionaries(
        st.text(max_size=8),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=20),
            lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
            max_leaves=8,
        ),
        max_size=4,
    )
)
def test_any_arguments_get_an_answer_or_an_error_result(arguments: dict[str, Any]) -> None:
    async def call() -> types.CallToolResult:
        async with asyncio.timeout(TIMEOUT), Client(as_mcp_server(echo_agent())) as client:
            return await client.call_tool("echo", arguments)

    result = asyncio.run(call())
    task = arguments.get("task")
    if isinstance(task, str):
        assert not result.is_error and _text(result) == f"turn 1: {task}"
    else:
        assert result.is_error and "takes one argument 'task'" in _text(result)


def test_served_names_that_become_one_tool_name_are_refused() -> None:
    with pytest.raises(ConfigurationError, match=r"'a:b' and 'a_b' both become"):
        as_mcp_server({"a:b": echo_agent(), "a_b": echo_agent()})


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), True, "10"])
def test_call_timeout_must_be_positive_seconds(bad: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"call_timeout must be a positive"):
        as_mcp_server(echo_agent(), call_timeout=bad)
