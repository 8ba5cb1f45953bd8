"""MCPTools: an MCP server's tools offered to agents, against the small server in
`_mcp_server.py` (a subprocess over stdio) and cantata's own MCP endpoint (a real uvicorn)."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, TextIO

import mcp_types as types
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cantata.agents import ChatAgent
from cantata.core import (
    ConfigurationError,
    DataContent,
    FunctionApprovalRequestContent,
    Message,
    ToolError,
    UsageError,
)
from cantata.models import ChatOptions, ScriptedChatClient, tool_call
from cantata.serve import mcp_routes, openai_routes
from cantata.stores import MemoryStore
from cantata.tools.mcp_tools import MCPTools, _result_value

from ..serve._servers import echo_agent, running, serving
from ._mcp_server import build_server

# the OpenAI routes and /mcp only: the tests do not depend on the other optional parts
PROVIDERS = [openai_routes.contribute, mcp_routes.contribute]

HERE = Path(__file__).resolve().parent
SERVER = [sys.executable, str(HERE / "_mcp_server.py")]
TIMEOUT = 60.0


@pytest.fixture
def errlog(tmp_path: Path) -> Any:
    """The server's stderr (its logs), kept out of the test output."""
    with (tmp_path / "server.log").open("w") as log:
        yield log


@pytest.fixture
async def mcp(errlog: TextIO) -> AsyncIterator[MCPTools]:
    async with asyncio.timeout(TIMEOUT), MCPTools(stdio=SERVER, errlog=errlog) as tools:
        yield tools


def by_name(tools: MCPTools) -> dict[str, Any]:
    return {t.name: t for t in tools.tools}


def results(messages: list[Message]) -> list[Any]:
    return [r for m in messages for r in m.function_results]


# --- listing and calling -----------------------------------------------------------------


async def test_lists_the_servers_tools_with_their_schemas(mcp: MCPTools) -> None:
    tools = by_name(mcp)
    assert set(tools) == {
        "add",
        "shout",
        "files_count",
        "broken",
        "slow",
        "die",
        "delete_all",
    }
    add = tools["add"]
    assert add.description == "Add two whole numbers."
    assert add.parameters["required"] == ["a", "b"]
    assert add.parameters["properties"]["a"]["type"] == "integer"
    assert not any(t.requires_approval for t in mcp.tools)


async def test_calls_return_structured_results_and_dotted_names_work(mcp: MCPTools) -> None:
    tools = by_name(mcp)
    assert await tools["add"].invoke({"a": 2, "b": 3}) == {"result": 5}
    assert await tools["files_count"].invoke({"text": "one two three"}) == {"words": 3}


async def test_an_error_result_is_a_tool_error_with_the_servers_text(mcp: MCPTools) -> None:
    with pytest.raises(ToolError, match=r"'broken'.*reported an error.*broken on purpose: why"):
        await by_name(mcp)["broken"].invoke({"reason": "why"})


async def test_missing_arguments_are_refused_before_the_server_is_asked(mcp: MCPTools) -> None:
    with pytest.raises(ToolError, match=r"b: field required"):
        await by_name(mcp)["add"].invoke({"a": 1})


async def test_allow_list_and_prefix(errlog: TextIO) -> None:
    async with MCPTools(
        stdio=SERVER, allow=["add", "files.count"], prefix="m_", errlog=errlog
    ) as m:
        assert sorted(t.name for t in m.tools) == ["m_add", "m_files_count"]
        assert await by_name(m)["m_add"].invoke({"a": 1, "b": 1}) == {"result": 2}


async def test_allow_naming_a_tool_the_server_lacks_is_refused(errlog: TextIO) -> None:
    with pytest.raises(ConfigurationError, match=r"'nope'.*does not have.*'add'"):
        async with MCPTools(stdio=SERVER, allow=["add", "nope"], errlog=errlog):
            pass


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=6,
)


@given(arguments=st.dictionaries(st.sampled_from(["a", "b", "c", ""]) | st.text(max_size=5), _JSON))
async def test_any_arguments_get_the_sum_or_a_tool_error(
    mcp: MCPTools, arguments: dict[str, Any]
) -> None:
    add = by_name(mcp)["add"]
    a, b = arguments.get("a"), arguments.get("b")
    if type(a) is int and type(b) is int and abs(a) < 2**53 and abs(b) < 2**53:
        assert await add.invoke(arguments) == {"result": a + b}
        return
    try:
        value = await add.invoke(arguments)
    except ToolError:
        return
    # the server's own coercion (e.g. 2.0 or "3" read as whole numbers) still adds them
    assert isinstance(value, dict) and set(value) == {"result"}


# --- end to end: an agent calling MCP tools ----------------------------------------------


async def test_an_agent_calls_an_mcp_tool_and_answers_with_its_result(mcp: MCPTools) -> None:
    def model(messages: list[Message], options: ChatOptions) -> Any:
        done = [r for m in messages for r in m.function_results]
        if not done:
            return [tool_call("add", {"a": 20, "b": 22})]
        return f"the sum is {done[-1].result['result']}"

    client = ScriptedChatClient(model)
    agent = ChatAgent(client, name="calc", tools=mcp.tools)
    response = await agent.run("what is 20 + 22?")
    assert response.text == "the sum is 42"
    offered = {spec.name for spec in client.calls[0].options.tools or ()}
    assert "add" in offered and "delete_all" in offered


async def test_approval_per_tool_stops_the_run_until_a_person_answers(errlog: TextIO) -> None:
    async with MCPTools(stdio=SERVER, require_approval=["delete_all"], errlog=errlog) as m:
        assert [t.name for t in m.tools if t.requires_approval] == ["delete_all"]
        client = ScriptedChatClient([[tool_call("delete_all", {"confirm": True})], "done"])
        agent = ChatAgent(client, name="ops", tools=m.tools)
        first = await agent.run("clean up")
        assert first.finish_reason == "approval_required"
        (request,) = first.user_input_requests
        assert isinstance(request, FunctionApprovalRequestContent)
        second = await agent.run(
            Message("user", [request.create_response(True)]), thread=first.thread
        )
    assert second.text == "done"
    assert [r.result for r in results(second.messages)] == [{"result": "deleted everything"}]


async def test_a_server_that_dies_mid_call_is_an_error_the_model_sees(errlog: TextIO) -> None:
    script = [[tool_call("die", {})], [tool_call("add", {"a": 1, "b": 2})], "the server is gone"]
    client = ScriptedChatClient(script)
    async with asyncio.timeout(TIMEOUT), MCPTools(stdio=SERVER, errlog=errlog) as m:
        response = await ChatAgent(client, name="a", tools=m.tools).run("go")
    assert response.text == "the server is gone"
    died, after = results(response.messages)
    assert died.is_error and "closed during the call" in (died.error or "")
    assert after.is_error and "connection to server" in (after.error or "")


async def test_a_call_past_its_time_bound_is_a_tool_error(errlog: TextIO) -> None:
    async with (
        asyncio.timeout(TIMEOUT),
        MCPTools(stdio=SERVER, call_timeout=0.3, errlog=errlog) as m,
    ):
        with pytest.raises(ToolError, match=r"'slow'.*did not answer within 0.3 s"):
            await by_name(m)["slow"].invoke({"seconds": 30})
        assert await by_name(m)["shout"].invoke({"text": "still here"}) == {"result": "STILL HERE"}


# --- against cantata's own MCP endpoint ----------------------------------------------------


async def test_cantatas_own_served_agent_is_a_tool_of_another_agent() -> None:
    async with (
        MemoryStore() as store,
        serving(echo_agent(), store=store, token="tok", providers=PROVIDERS) as url,
    ):
        headers = {"Authorization": "Bearer tok"}
        async with asyncio.timeout(TIMEOUT), MCPTools(url=f"{url}/mcp", headers=headers) as m:
            (echo,) = m.tools
            assert echo.name == "echo" and echo.parameters["required"] == ["task"]
            client = ScriptedChatClient([[tool_call("echo", {"task": "ping"})], "relayed"])
            response = await ChatAgent(client, name="caller", tools=m.tools).run("relay")
    assert response.text == "relayed"
    assert [r.result for r in results(response.messages)] == ["turn 1: ping"]


async def test_the_sdks_own_streamable_http_server_with_sessions_and_streams() -> None:
    app = build_server().streamable_http_app()  # stateful sessions, answers as event streams
    async with (
        running(app) as url,
        asyncio.timeout(TIMEOUT),
        MCPTools(url=f"{url}/mcp", allow=["shout", "broken"]) as m,
    ):
        tools = by_name(m)
        assert await tools["shout"].invoke({"text": "over http"}) == {"result": "OVER HTTP"}
        with pytest.raises(ToolError, match="broken on purpose"):
            await tools["broken"].invoke({})


async def test_a_stopped_http_server_is_a_tool_error_not_a_hang() -> None:
    async with asyncio.timeout(TIMEOUT):
        async with MemoryStore() as store:
            server = serving(echo_agent(), store=store, providers=PROVIDERS)
            url = await server.__aenter__()
            async with MCPTools(url=f"{url}/mcp", call_timeout=5.0) as m:
                await server.__aexit__(None, None, None)
                with pytest.raises(ToolError, match=r"echo"):
                    await m.tools[0].invoke({"task": "anyone?"})


# --- lifecycle and bad input ---------------------------------------------------------------


async def test_tools_are_only_offered_while_open(errlog: TextIO) -> None:
    m = MCPTools(stdio=SERVER, errlog=errlog)
    with pytest.raises(UsageError, match=r"not open.*async with MCPTools"):
        _ = m.tools
    async with m:
        add = by_name(m)["add"]
        with pytest.raises(UsageError, match=r"already open"):
            await m.__aenter__()
    with pytest.raises(ToolError, match=r"connection to server .* is gone .*closed"):
        await add.invoke({"a": 1, "b": 2})
    async with m:  # opened again: a new server process, new tools
        assert await by_name(m)["add"].invoke({"a": 1, "b": 2}) == {"result": 3}


async def test_a_server_that_does_not_start_is_a_clear_error(errlog: TextIO) -> None:
    with pytest.raises(ToolError, match=r"could not open MCP server"):
        async with MCPTools(stdio=[sys.executable, "-c", "pass"], errlog=errlog):
            pass
    with pytest.raises(ToolError, match=r"could not open MCP server"):
        async with MCPTools(stdio=["/nonexistent/mcp-server"], errlog=errlog):
            pass


async def test_an_http_url_where_nothing_listens_is_a_clear_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(
        ToolError, match=rf"could not open MCP server 'http://127.0.0.1:{port}/mcp'"
    ):
        async with asyncio.timeout(TIMEOUT), MCPTools(url=f"http://127.0.0.1:{port}/mcp"):
            pass


async def test_a_server_that_never_answers_times_out(errlog: TextIO) -> None:
    silent = [sys.executable, "-c", "import time; time.sleep(60)"]
    with pytest.raises(ToolError, match=r"did not start or list its tools within 0.5 s"):
        async with (
            asyncio.timeout(TIMEOUT),
            MCPTools(stdio=silent, connect_timeout=0.5, errlog=errlog),
        ):
            pass


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "exactly one of stdio= .* or url="),
        ({"stdio": SERVER, "url": "http://127.0.0.1:1/mcp"}, "exactly one of"),
        ({"url": "ftp://x"}, "url must be an http"),
        ({"stdio": []}, "stdio must be a non-empty list"),
        ({"stdio": "python server.py"}, "stdio must be a non-empty list"),
        ({"stdio": SERVER, "prefix": "a b"}, "prefix must be"),
        ({"stdio": SERVER, "allow": "add"}, "allow must be a list of tool names"),
        ({"stdio": SERVER, "require_approval": [1]}, "require_approval must be a list"),
        ({"stdio": SERVER, "call_timeout": 0}, "call_timeout must be a positive"),
        ({"stdio": SERVER, "connect_timeout": float("inf")}, "connect_timeout must be"),
    ],
)
def test_bad_options_are_refused_with_what_to_do(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        MCPTools(**options)


LEFT_OPEN = """
import asyncio, sys
from cantata.tools.mcp_tools import MCPTools, _result_value

async def main():
    tools = MCPTools(stdio=[sys.executable, sys.argv[1]], env={"MCP_TEST_PID_FILE": sys.argv[2]})
    await tools.__aenter__()
    print("open", len(tools.tools), flush=True)  # and never closed

asyncio.run(main())
print("exited", flush=True)
"""


def test_tools_left_open_let_the_interpreter_exit_and_stop_the_server(tmp_path: Path) -> None:
    script, pid_file = tmp_path / "left_open.py", tmp_path / "server.pid"
    script.write_text(LEFT_OPEN)
    done = subprocess.run(
        [sys.executable, str(script), str(HERE / "_mcp_server.py"), str(pid_file)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["open", "7", "exited"]
    pid = int(pid_file.read_text())
    for _ in range(200):  # the server sees its stdin close and ends (bounded: 20 s)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    raise AssertionError(f"the MCP server process {pid} outlived its client")


def test_contents_other_than_text_and_images_are_described_for_the_model() -> None:
    result = types.CallToolResult(
        content=[
            types.TextContent(text="see:"),
            types.ImageContent(data="aGVsbG8=", mime_type="image/png"),
            types.ResourceLink(uri="file:///tmp/a.txt", name="a"),
            types.EmbeddedResource(
                resource=types.TextResourceContents(uri="file:///tmp/b.txt", text="inside b")
            ),
            types.EmbeddedResource(
                resource=types.BlobResourceContents(uri="file:///tmp/c.bin", blob="AAAA")
            ),
        ]
    )
    assert _result_value("t", "srv", result, declared=False) == [
        "see:\n[resource file:///tmp/a.txt]\ninside b\n[resource file:///tmp/c.bin]",
        DataContent("image/png", data=b"hello"),
    ]
    with pytest.raises(
        ToolError, match=r"MCP tool 't' of server 'srv' reported an error: \(no text\)"
    ):
        _result_value("t", "srv", types.CallToolResult(content=[], is_error=True), declared=False)


async def test_cantatas_own_stdio_server_is_a_tool_of_another_agent(errlog: TextIO) -> None:
    served = [sys.executable, "-m", "cantata.serve.mcp_stdio", "tests/serve/_servers.py:echo"]
    root = str(HERE.parents[1])
    client = ScriptedChatClient([[tool_call("echo", {"task": "over stdio"})], "relayed"])
    async with asyncio.timeout(TIMEOUT), MCPTools(stdio=served, cwd=root, errlog=errlog) as m:
        response = await ChatAgent(client, name="caller", tools=m.tools).run("relay")
    assert response.text == "relayed"
    assert [r.result for r in results(response.messages)] == ["turn 1: over stdio"]
