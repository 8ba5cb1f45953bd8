"""`MCPTools` configs against real MCP servers: the small stdio server of the tools tests
(loaded only when allowed) and cantata's own /mcp endpoint behind a token, whose header is
a secret written as a placeholder."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from cantata.core import ConfigurationError
from cantata.declarative import UntrustedProviderError, from_config, to_config
from cantata.serve import mcp_routes, openai_routes
from cantata.stores import MemoryStore
from cantata.tools import MCPTools

from ..serve._servers import echo_agent, serving

SERVER = [sys.executable, str(Path(__file__).resolve().parents[1] / "tools" / "_mcp_server.py")]
ALLOW = ["cantata.tools.MCPTools"]
TIMEOUT = 60.0
TOKEN = "mcp-" + "t0ken"


async def test_stdio_server_round_trip_loads_only_when_allowed() -> None:
    first = MCPTools(
        stdio=SERVER, env={"MCP_SECRET": "x"}, allow=["add", "shout"],
        require_approval=["shout"], prefix="t_", call_timeout=20.0,
    )  # fmt: skip
    config = json.loads(json.dumps(to_config(first)))
    assert "env" not in config["config"] and "MCP_SECRET" not in json.dumps(config)
    with pytest.raises(UntrustedProviderError, match="stdio MCP server"):
        from_config(config)
    back = from_config(config, allow=ALLOW)
    assert isinstance(back, MCPTools) and to_config(back) == config
    secret = to_config(first, include_secrets=True)
    assert secret["config"]["env"] == {"MCP_SECRET": "${Env:MCP_SECRET}"}
    async with asyncio.timeout(TIMEOUT), back:
        tools = {t.name: t for t in back.tools}
        assert sorted(tools) == ["t_add", "t_shout"]
        assert tools["t_shout"].approval_mode == "always_require"
        assert await tools["t_add"].invoke({"a": 2, "b": 3}) == {"result": 5}


async def test_http_server_with_a_token_header_written_as_a_placeholder() -> None:
    providers = [openai_routes.contribute, mcp_routes.contribute]
    async with (
        MemoryStore() as store,
        serving(echo_agent(), store=store, token=TOKEN, providers=providers) as url,
    ):
        first = MCPTools(url=f"{url}/mcp", headers={"Authorization": f"Bearer {TOKEN}"})
        plain, secret = to_config(first), to_config(first, include_secrets=True)
        assert TOKEN not in json.dumps([plain, secret]) and "headers" not in plain["config"]
        assert secret["config"]["headers"] == {"Authorization": "${Env:MCP_AUTHORIZATION}"}
        back = from_config(secret, env={"MCP_AUTHORIZATION": f"Bearer {TOKEN}"})
        async with asyncio.timeout(TIMEOUT), back:
            (echo,) = back.tools
            assert await echo.invoke({"task": "ping"}) == "turn 1: ping"


@pytest.mark.parametrize(
    ("config", "match"),
    [
        ({}, "exactly one of stdio"),
        ({"url": "ftp://h"}, "http"),
        ({"url": "http://h", "headers": {"A": 1}}, "map names to strings"),
        ({"url": "http://h", "require_approval": "all"}, "require_approval"),
        ({"url": "http://h", "call_timeout": "1"}, "must be float"),
        ({"url": "http://h", "prefix": "a b"}, "prefix"),
        ({"stdio": "python"}, "must be list"),
        ({"stdio": [1]}, "list of strings"),
        ({"url": "http://h", "errlog": "x"}, "unknown field"),
    ],
)
def test_bad_mcp_configs_are_typed_errors(config: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        from_config({"provider": "cantata.tools.MCPTools", "config": config}, allow=ALLOW)
