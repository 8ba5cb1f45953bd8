"""`MCPTools`: the tools of an MCP server, offered to an agent as cantata tools.

``async with MCPTools(stdio=["python", "server.py"]) as mcp:`` starts the server (or
connects to ``url=``), lists its tools and makes each a `FunctionTool` whose schema is the
server's; ``ChatAgent(client, tools=mcp.tools)`` offers them. Leaving the block closes the
session and stops the subprocess.

Every wait is bounded: connecting and listing (`connect_timeout`), each call
(`call_timeout`). A call that fails in any way (the server reports an error, refuses the
call, stops in the middle of it, or does not answer in time) raises `ToolError`, which the
function loop hands to the model as the call's result: the run goes on. Once the
connection is gone, later calls fail at once with the same clear error.

What the model reads of a result is its content, chosen for a model: text as text, images
(and embedded image resources) as `DataContent` the model sees beside the result (the
function loop sends them as images), other kinds described in a line. The
``structuredContent`` is the result instead when the tool declares an ``outputSchema`` and
its content is text only (that text is then the same data serialized), or when the result
has no content: never an image's base64 turned into JSON text. Tools that run only as MCP
tasks (``execution.taskSupport`` ``"required"``) are left out, with a log line: MCPTools
calls tools directly.

The `mcp` package is imported when the tools are opened, so `cantata.tools` imports
without it.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import math
import re
import sys
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from types import TracebackType
from typing import TYPE_CHECKING, Any, TextIO

from ..core import ConfigurationError, DataContent, ToolError, UsageError, short_repr
from .context import ToolContext
from .mcp_connection import MCPConnection
from .tool import FunctionTool

if TYPE_CHECKING:
    from mcp import Client, StdioServerParameters
    from mcp_types import CallToolResult, Tool

__all__ = ["DEFAULT_MCP_CONNECT_TIMEOUT", "DEFAULT_MCP_TOOL_TIMEOUT", "MCPTools"]

DEFAULT_MCP_CONNECT_TIMEOUT = 30.0
"""Seconds to start or reach a server and list its tools."""

DEFAULT_MCP_TOOL_TIMEOUT = 60.0
"""Seconds one tool call may take before the model is told it did not answer."""

_INVALID = re.compile(r"[^A-Za-z0-9_-]")
_log = logging.getLogger("cantata.tools.mcp")


class MCPTools:
    """The tools of one MCP server, over stdio (`stdio`: a command as a list of strings,
    or the SDK's `StdioServerParameters`) or streamable HTTP (`url`, with optional
    `headers`, e.g. ``{"Authorization": "Bearer ..."}`` for a `cantata serve` token).

    `allow` names the server's tools to offer (all by default; a name the server lacks is
    an error). `require_approval` is True (every tool), or the names of the tools whose
    every call waits for a person's approval, as for any `FunctionTool`. `prefix` is put
    before each tool name, to keep tools of two servers apart. Names the server uses that
    a model cannot call (``files.read``) are offered with ``_`` for each other character.
    """

    def __init__(
        self,
        *,
        stdio: Sequence[str] | StdioServerParameters | None = None,
        url: str | None = None,
        headers: Mapping[str, str] | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        allow: Iterable[str] | None = None,
        require_approval: bool | Iterable[str] = False,
        prefix: str = "",
        connect_timeout: float = DEFAULT_MCP_CONNECT_TIMEOUT,
        call_timeout: float = DEFAULT_MCP_TOOL_TIMEOUT,
        errlog: TextIO | None = None,
    ) -> None:
        if (stdio is None) == (url is None):
            raise ConfigurationError(
                "MCPTools needs exactly one of stdio= (a command that starts the server) "
                "or url= (a streamable-HTTP endpoint)"
            )
        if url is not None and (
            not isinstance(url, str) or not url.startswith(("http://", "https://"))
        ):
            raise ConfigurationError(f"MCPTools: url must be an http(s) URL, got {short_repr(url)}")
        if stdio is not None and not _is_parameters(stdio) and not _is_command(stdio):
            raise ConfigurationError(
                f"MCPTools: stdio must be a non-empty list of strings (the command and its "
                f"arguments) or StdioServerParameters, got {short_repr(stdio)}"
            )
        if not isinstance(prefix, str) or _INVALID.search(prefix):
            raise ConfigurationError(
                f"MCPTools: prefix must be letters, digits, '_' or '-', got {short_repr(prefix)}"
            )
        self._stdio = stdio
        self._url = url
        self._headers = dict(headers or {})
        self._env = dict(env) if env is not None else None
        self._cwd = cwd
        self._allow = _names("allow", allow) if allow is not None else None
        self._approval: bool | frozenset[str] = (
            require_approval
            if isinstance(require_approval, bool)
            else _names("require_approval", require_approval)
        )
        self._prefix = prefix
        self._connect_timeout = _seconds("connect_timeout", connect_timeout)
        self._call_timeout = _seconds("call_timeout", call_timeout)
        self._errlog = errlog
        self._connection: MCPConnection | None = None
        self._tools: tuple[FunctionTool, ...] = ()
        self._gone: str | None = None

    # -- the server ------------------------------------------------------------------

    @property
    def server(self) -> str:
        """The server as named in errors: its URL, or its command."""
        if self._url is not None:
            return self._url
        if _is_command(self._stdio):
            return " ".join(self._stdio)  # type: ignore[arg-type]
        params: Any = self._stdio
        return " ".join([params.command, *params.args])

    @property
    def tools(self) -> tuple[FunctionTool, ...]:
        """The server's tools as cantata tools (open the `MCPTools` first)."""
        if self._connection is None:
            raise UsageError(
                f"the tools of MCP server {self.server!r} are not open; use "
                "`async with MCPTools(...) as mcp:` and pass mcp.tools to the agent inside it"
            )
        return self._tools

    def __iter__(self) -> Iterator[FunctionTool]:
        return iter(self.tools)

    def __repr__(self) -> str:
        state = "open" if self._connection is not None else "closed"
        return f"MCPTools({self.server!r}, {state}, {len(self._tools)} tools)"

    async def __aenter__(self) -> MCPTools:
        if self._connection is not None:
            raise UsageError(f"MCPTools for {self.server!r} is already open; open it once")
        connection = MCPConnection(self._make_client)
        try:
            listed = await connection.open(self._connect_timeout)
        except TimeoutError as exc:
            raise ToolError(
                f"MCP server {self.server!r} did not start or list its tools within "
                f"{self._connect_timeout:g} s; check the command or URL, or raise "
                "connect_timeout"
            ) from exc
        except ConfigurationError:
            raise
        except Exception as exc:
            cause = _leaf(exc)
            raise ToolError(
                f"could not open MCP server {self.server!r}: {type(cause).__name__}: "
                f"{cause}; check that it starts (or answers) and speaks MCP"
            ) from exc
        try:
            self._tools = self._make_tools(listed)
        except BaseException:
            await connection.close()
            raise
        self._connection, self._gone = connection, None
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the session and stop the server process (bounded: the SDK closes stdin,
        then terminates, then kills). Calls after this fail with a tool error."""
        connection, self._connection = self._connection, None
        self._gone = self._gone or "it was closed"
        if connection is not None:
            await connection.close()

    @asynccontextmanager
    async def _make_client(self) -> AsyncIterator[Client]:
        try:
            from mcp import Client, StdioServerParameters
            from mcp.client.stdio import stdio_client
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client
        except ModuleNotFoundError as exc:  # pragma: no cover - the serve extra is missing
            raise ConfigurationError(
                f"MCPTools needs the `mcp` package ({exc}); install cantata[serve]"
            ) from exc
        if self._url is not None:
            async with create_mcp_http_client(headers=self._headers) as http:
                transport = streamable_http_client(self._url, http_client=http)
                async with Client(transport, read_timeout_seconds=self._call_timeout) as client:
                    yield client
            return
        params = self._stdio
        if not isinstance(params, StdioServerParameters):
            command = list(params)  # type: ignore[arg-type]
            params = StdioServerParameters(
                command=command[0], args=command[1:], env=self._env, cwd=self._cwd
            )
        transport = stdio_client(params, errlog=self._errlog or sys.stderr)
        async with Client(transport, read_timeout_seconds=self._call_timeout) as client:
            yield client

    # -- the tools -------------------------------------------------------------------

    def _make_tools(self, listed: list[Tool]) -> tuple[FunctionTool, ...]:
        by_name = {t.name: t for t in listed}
        for what, names in (("allow", self._allow), ("require_approval", self._approval)):
            if isinstance(names, frozenset) and (missing := sorted(names - by_name.keys())):
                raise ConfigurationError(
                    f"MCPTools {what} names {', '.join(map(repr, missing))}, which MCP server "
                    f"{self.server!r} does not have; its tools are: "
                    f"{', '.join(map(repr, by_name)) or 'none'}"
                )
        out: dict[str, FunctionTool] = {}
        for remote in listed:
            if self._allow is not None and remote.name not in self._allow:
                continue
            if _task_only(remote):
                if self._allow is not None:
                    raise ConfigurationError(
                        f"MCPTools allow names {remote.name!r}, which MCP server "
                        f"{self.server!r} runs only as a task (taskSupport 'required'); "
                        "MCPTools calls tools directly, so it cannot be offered"
                    )
                _log.info(
                    "MCP server %r: tool %r left out: it runs only as a task "
                    "(taskSupport 'required'), and MCPTools calls tools directly",
                    self.server,
                    remote.name,
                )
                continue
            made = self._make_tool(remote)
            if made.name in out:
                raise ConfigurationError(
                    f"MCP server {self.server!r} has two tools that are both offered as "
                    f"{made.name!r}; allow only one of them"
                )
            out[made.name] = made
        return tuple(out.values())

    def _make_tool(self, remote: Tool) -> FunctionTool:
        name = self._prefix + _INVALID.sub("_", remote.name)
        if len(name) > 64:
            raise ConfigurationError(
                f"the MCP tool {remote.name[:80]!r} of server {self.server!r} would be offered "
                f"as {name[:80]!r}, longer than the 64 characters models accept; leave it out "
                "with allow="
            )
        approval = self._approval is True or (
            isinstance(self._approval, frozenset) and remote.name in self._approval
        )
        call = self._caller(remote.name, name, remote.output_schema is not None)
        try:
            return FunctionTool(
                name,
                remote.description or remote.title or f"The MCP tool {remote.name!r}.",
                func=call,
                parameters=_object_schema(remote.input_schema),
                approval_mode="always_require" if approval else "never_require",
            )
        except ConfigurationError as exc:
            raise ConfigurationError(
                f"the MCP tool {remote.name!r} of server {self.server!r} cannot be offered: "
                f"{exc}; leave it out with allow="
            ) from exc

    def _caller(self, remote_name: str, name: str, declared: bool) -> Any:
        async def call(_context: ToolContext, /, **arguments: Any) -> Any:
            client = self._connection.client if self._connection is not None else None
            if client is None or self._gone is not None:
                raise ToolError(
                    f"MCP tool {name!r} cannot run: the connection to server {self.server!r} "
                    f"is gone ({self._gone or 'it was never opened'})"
                )
            result = await self._call(client, remote_name, name, arguments)
            return _result_value(name, self.server, result, declared=declared)

        call.__name__ = name
        return call

    async def _call(
        self, client: Client, remote_name: str, name: str, arguments: dict[str, Any]
    ) -> CallToolResult:
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

        bound = self._call_timeout + 1.0  # the SDK's own bound comes first; ours backs it
        try:
            async with asyncio.timeout(bound):
                return await client.call_tool(remote_name, arguments)
        except TimeoutError:
            raise self._timed_out(name) from None
        except MCPError as exc:
            if exc.code == REQUEST_TIMEOUT:
                raise self._timed_out(name) from None
            if exc.code == CONNECTION_CLOSED:
                self._gone = "the server closed the connection (it may have stopped)"
                raise ToolError(
                    f"MCP tool {name!r} failed: the connection to server {self.server!r} "
                    "closed during the call (the server may have stopped); its tools cannot "
                    "be used until it is opened again"
                ) from exc
            raise ToolError(
                f"MCP server {self.server!r} refused the call of tool {name!r}: {exc.message}"
            ) from exc
        except (OSError, EOFError) as exc:
            raise ToolError(
                f"MCP tool {name!r} failed: server {self.server!r} cannot be reached "
                f"({type(exc).__name__}: {exc})"
            ) from exc

    def _timed_out(self, name: str) -> ToolError:
        return ToolError(
            f"MCP tool {name!r} of server {self.server!r} did not answer within "
            f"{self._call_timeout:g} s; try again later or with less to do"
        )


def _leaf(exc: BaseException) -> BaseException:
    """The first error inside nested exception groups (the SDK's task groups wrap them)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _task_only(remote: Tool) -> bool:
    execution = getattr(remote, "execution", None)
    return getattr(execution, "task_support", None) == "required"


def _result_value(name: str, server: str, result: CallToolResult, *, declared: bool) -> Any:
    """What the model reads (see the module's docstring): the text of the content (other
    kinds described by kind), with its images as `DataContent` after it; the structured
    result when the tool `declared` an output schema and the content is text only, or when
    there is no content. An error result raises `ToolError` with its text."""
    images = [i for i in (_image(name, server, c) for c in result.content) if i is not None]
    text = "\n".join(_content_text(c) for c in result.content if not _is_image(c))
    if result.is_error:
        raise ToolError(
            f"MCP tool {name!r} of server {server!r} reported an error: {text or '(no text)'}"
        )
    if images:
        return [text, *images] if text else images
    if result.structured_content is not None and (declared or not result.content):
        return result.structured_content
    return text


def _is_image(content: Any) -> bool:
    kind = getattr(content, "type", None)
    if kind == "image":
        return True
    inner = getattr(content, "resource", None) if kind == "resource" else None
    mime = getattr(inner, "mime_type", None) or ""
    return getattr(inner, "blob", None) is not None and mime.startswith("image/")


def _image(name: str, server: str, content: Any) -> DataContent | None:
    """An image content (or an embedded image resource) as `DataContent`, else None."""
    if not _is_image(content):
        return None
    if content.type == "image":
        mime, data = content.mime_type, content.data
    else:
        mime, data = content.resource.mime_type, content.resource.blob
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise ToolError(
            f"MCP tool {name!r} of server {server!r} returned an image ({mime}) whose data "
            "is not base64"
        ) from None
    return DataContent(mime, data=raw)


def _content_text(content: Any) -> str:
    kind = getattr(content, "type", "unknown")
    if kind == "text":
        return str(content.text)
    if kind in ("image", "audio"):
        return f"[{kind} {content.mime_type}, {len(content.data)} base64 characters]"
    if kind == "resource_link":
        return f"[resource {content.uri}]"
    if kind == "resource":
        inner = content.resource
        text = getattr(inner, "text", None)
        return str(text) if text is not None else f"[resource {inner.uri}]"
    return f"[{kind} content]"


def _object_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The server's input schema as a tool's parameters (an object schema, as models need)."""
    out = dict(schema)
    out.setdefault("type", "object")
    out.setdefault("properties", {})
    return out


def _is_parameters(value: object) -> bool:
    try:
        from mcp import StdioServerParameters
    except ModuleNotFoundError:  # pragma: no cover
        return False
    return isinstance(value, StdioServerParameters)


def _is_command(value: object) -> bool:
    return (
        isinstance(value, list | tuple)
        and len(value) > 0
        and all(isinstance(part, str) and part for part in value)
    )


def _names(what: str, names: Iterable[str]) -> frozenset[str]:
    listed = None if isinstance(names, str | bytes) else list(names)
    if listed is None or not all(isinstance(n, str) for n in listed):
        raise ConfigurationError(
            f"MCPTools: {what} must be a list of tool names, got {short_repr(names)}"
        )
    return frozenset(listed)


def _seconds(what: str, value: float) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ConfigurationError(
            f"MCPTools: {what} must be a positive finite number of seconds, got {value!r}"
        )
    return float(value)
