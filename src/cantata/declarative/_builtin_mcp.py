"""The adapter of `MCPTools`, the tools of one MCP server (over stdio or streamable HTTP).

Its headers and its server's environment often hold tokens, so they are secrets: left out,
or with ``include_secrets`` written as placeholders, ``${Env:NAME}`` for an environment
variable of the server and ``${Env:MCP_<HEADER>}`` for a header, never their values. A
stdio server is a program the config names, so it loads only when the caller allows it
(``allow=['cantata.tools.MCPTools']``); an HTTP server needs no permission. The config is
of the server, not of its tools: a loaded `MCPTools` is opened as any other.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..tools import MCPTools
from ._builtin_models import _fields, _typed
from .errors import SpecError, UntrustedProviderError
from .registry import ComponentAdapter, ConfigContext, register_component

__all__: list[str] = []

_MCP = "cantata.tools.MCPTools"


def _env_name(header: str) -> str:
    return "MCP_" + re.sub(r"[^A-Za-z0-9]", "_", header).upper()


def _dump_mcp(mcp: MCPTools, ctx: ConfigContext) -> dict[str, Any]:
    stdio: Any = mcp._stdio  # the server's settings, read-only
    env = dict(mcp._env or {})
    cwd = mcp._cwd
    if stdio is not None and not isinstance(stdio, list | tuple):  # StdioServerParameters
        env = {**(stdio.env or {}), **env}
        cwd = cwd or (str(stdio.cwd) if stdio.cwd is not None else None)
        stdio = [stdio.command, *stdio.args]
    approval = mcp._approval
    out: dict[str, Any] = {
        "stdio": list(stdio) if stdio is not None else None,
        "url": mcp._url,
        "cwd": cwd,
        "allow": sorted(mcp._allow) if mcp._allow is not None else None,
        "require_approval": approval if isinstance(approval, bool) else sorted(approval),
        "prefix": mcp._prefix,
        "connect_timeout": mcp._connect_timeout,
        "call_timeout": mcp._call_timeout,
    }
    if ctx.include_secrets and mcp._headers:
        out["headers"] = {k: "${Env:" + _env_name(k) + "}" for k in mcp._headers}
    if ctx.include_secrets and env:
        out["env"] = {k: "${Env:" + k + "}" for k in env}
    return {k: v for k, v in out.items() if v is not None}


def _strings(value: Any, key: str) -> dict[str, str]:
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise SpecError(f"{_MCP}: {key!r} must map names to strings")
    return dict(value)


def _build_mcp(config: Mapping[str, Any], ctx: ConfigContext) -> MCPTools:
    names = {"stdio", "url", "headers", "env", "cwd", "allow", "require_approval", "prefix",
             "connect_timeout", "call_timeout"}  # fmt: skip
    args = _fields(config, names, _MCP)
    _typed(args, {"stdio": list, "url": str, "cwd": str, "allow": list, "prefix": str}, _MCP)
    _typed(args, {"connect_timeout": float, "call_timeout": float}, _MCP)
    if args.get("stdio") is not None and not ctx.allows(_MCP):
        raise UntrustedProviderError(
            f"{_MCP}: a stdio MCP server is a program the config starts; it loads only when "
            f"the caller allows it: allow=[{_MCP!r}] (an HTTP server, url:, needs no allow)",
            provider=_MCP,
        )
    for key in ("headers", "env"):
        if args.get(key) is not None:
            args[key] = _strings(args[key], key)
    approval = args.get("require_approval")
    if approval is not None and not isinstance(approval, bool | list):
        raise SpecError(f"{_MCP}: 'require_approval' must be true, false or a list of names")
    return MCPTools(**{k: v for k, v in args.items() if v is not None})


register_component(ComponentAdapter(_MCP, "tool", MCPTools, _dump_mcp, _build_mcp))
