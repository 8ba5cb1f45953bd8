"""Agents, workflows and teams as MCP tools (`as_mcp_server`).

Each served object becomes one MCP tool: its served name, its description, one ``task``
text argument, and the text of its answer. Every call runs on a fresh thread (an MCP tool
call carries no conversation), within a time bound. A failed run is a tool result marked
as an error, so the calling model reads what went wrong; only a call to a tool this server
does not have is a protocol error, as the MCP specification asks.

The returned object is the `mcp` package's own low-level `Server`, so anything the SDK
can run it on works: `run_mcp_stdio` runs it on stdin/stdout, and `cantata serve` mounts
it at ``/mcp`` over streamable HTTP (`mcp_routes`).
"""

from __future__ import annotations

import asyncio
import math
import re
from typing import Any

import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError

from ..core import CancelledError, ConfigurationError, short_repr
from .drain import Drain
from .openai_messages import answer_text
from .served import Served, ServedSet

__all__ = ["DEFAULT_MCP_CALL_TIMEOUT", "MCP_TASK_ARGUMENT", "as_mcp_server", "run_mcp_stdio"]

DEFAULT_MCP_CALL_TIMEOUT = 300.0
"""Seconds one tool call may run before it is cancelled and answered with an error."""

MCP_TASK_ARGUMENT = "task"
"""The one argument of every tool: the task text handed to the agent."""

_TOOL_NAME = re.compile(r"[^A-Za-z0-9_.-]")
_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        MCP_TASK_ARGUMENT: {
            "type": "string",
            "description": "What to do or ask, in plain words; the answer comes back as text.",
        }
    },
    "required": [MCP_TASK_ARGUMENT],
    "additionalProperties": False,
}


def as_mcp_server(
    served: Any,
    *,
    name: str = "cantata",
    call_timeout: float | None = DEFAULT_MCP_CALL_TIMEOUT,
    drain: Drain | None = None,
) -> Server[Any]:
    """An MCP server offering `served` (an agent, workflow or team, a dict or list of them,
    or a `ServedSet`) as tools, one per object, named as it is served.

    `name` is the server's own name (what clients show); `call_timeout` bounds each call's run
    in seconds (None: unbounded, for runs you bound yourself); a call still running when
    `drain`'s grace period ends is answered as a failed call (`cantata serve` passes its
    app's)."""
    stopping = drain or Drain()
    entries = served if isinstance(served, ServedSet) else ServedSet(served)
    if call_timeout is not None and (
        isinstance(call_timeout, bool)
        or not isinstance(call_timeout, int | float)
        or not math.isfinite(call_timeout)
        or call_timeout <= 0
    ):
        raise ConfigurationError(
            f"as_mcp_server: call_timeout must be a positive finite number of seconds or None, "
            f"got {call_timeout!r}"
        )
    tools = _tool_names(entries)

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[_tool(tool_name, entry) for tool_name, entry in tools.items()]
        )

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        entry = tools.get(params.name)
        if entry is None:
            listed = ", ".join(repr(n) for n in tools)
            raise MCPError(
                types.INVALID_PARAMS,
                f"there is no tool named {params.name[:80]!r} on this server; its tools are: "
                f"{listed}",
            )
        task = (params.arguments or {}).get(MCP_TASK_ARGUMENT)
        if not isinstance(task, str):
            return _error(
                f"tool {params.name!r} takes one argument {MCP_TASK_ARGUMENT!r}, the task as "
                f"text; got {short_repr(params.arguments)}"
            )
        return await _run(entry, task, call_timeout, stopping)

    return Server(
        name,
        description="Agents served by cantata, one tool each.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def run_mcp_stdio(
    served: Any, *, name: str = "cantata", call_timeout: float | None = DEFAULT_MCP_CALL_TIMEOUT
) -> None:
    """Serve `served` as MCP tools on this process's stdin and stdout until the client
    closes stdin (what an MCP client that starts the process as a subprocess expects)."""
    from mcp.server.stdio import stdio_server

    server = as_mcp_server(served, name=name, call_timeout=call_timeout)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def _tool_names(entries: ServedSet) -> dict[str, Served]:
    """Served names as MCP tool names (letters, digits, '_', '-', '.'; others become '_')."""
    out: dict[str, Served] = {}
    for served_name, entry in entries.items():
        tool_name = _TOOL_NAME.sub("_", served_name)
        if tool_name in out:
            raise ConfigurationError(
                f"served names {out[tool_name].name!r} and {served_name!r} both become the MCP "
                f"tool name {tool_name!r}; serve a dict with names that differ in letters, "
                "digits, '_', '-' or '.'"
            )
        out[tool_name] = entry
    return out


def _tool(tool_name: str, entry: Served) -> types.Tool:
    description = entry.description or f"Ask the {entry.kind} {entry.name!r}."
    return types.Tool(
        name=tool_name,
        title=entry.name,
        description=description,
        input_schema=_INPUT_SCHEMA,
    )


async def _run(
    entry: Served, task: str, call_timeout: float | None, drain: Drain
) -> types.CallToolResult:
    try:
        async with asyncio.timeout(call_timeout), drain.stoppable():
            response = await entry.agent.run(task)
    except TimeoutError:
        return _error(
            f"{entry.kind} {entry.name!r} did not answer within {call_timeout:g} s and was "
            "cancelled; ask for less"
        )
    except CancelledError as exc:
        return _error(f"{entry.kind} {entry.name!r} was cancelled: {exc}")
    except Exception as exc:  # the calling model reads what failed and may try otherwise
        return _error(f"{entry.kind} {entry.name!r} failed: {type(exc).__name__}: {exc}")
    if response.finish_reason in ("approval_required", "tool_calls"):
        return _error(
            f"{entry.kind} {entry.name!r} stopped before answering (finish reason "
            f"{response.finish_reason!r}): it waits for an approval or a tool result that an "
            "MCP call cannot give"
        )
    return types.CallToolResult(content=[types.TextContent(text=answer_text(response))])


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)
