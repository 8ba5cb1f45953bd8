"""The MCP endpoint of `cantata serve`: ``/mcp``, streamable HTTP, every served object a tool.

The endpoint is stateless and answers in JSON: each POST is a whole exchange, so the
server's limits hold as for any other route (the body limit, the request timeout, a
client that disconnects cancelling its call) and no session outlives its request. A GET
(the stream a server would push its own messages on) is 405, which the protocol allows
for a server with nothing to push: no stream is ever held open idle. The token check of
the app covers it like every route. The SDK's DNS-rebinding check is left off: the app's
guard (`guard`) checks the ``Host`` of every route, ``--allowed-host`` names included.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings

from .admission import AdmittedRoute, RouteWork, Work, rpc_method
from .app import Contribution, ServeContext
from .mcp_server import as_mcp_server

__all__ = ["MCP_PATH", "MCP_WORK", "contribute"]

MCP_PATH = "/mcp"
"""Where the streamable-HTTP MCP endpoint is mounted."""


def _mcp_work(body: bytes) -> Work:
    return "model" if rpc_method(body) == "tools/call" else "none"


MCP_WORK = RouteWork(_mcp_work, protocol="jsonrpc")
"""A tool call runs a model (it runs a served agent); listing tools does not."""


def contribute(ctx: ServeContext) -> Contribution:
    """The ``/mcp`` route and the session manager that runs while the app runs."""
    # the run's bound sits inside the request's, so a long run is answered as an error
    # result the calling model reads, before the limits cut the request off
    bound = ctx.limits.request_timeout
    server = as_mcp_server(ctx.served, call_timeout=bound - min(5.0, bound / 2), drain=ctx.drain)
    manager = StreamableHTTPSessionManager(
        app=server,
        json_response=True,
        stateless=True,
        security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        max_request_body_size=ctx.limits.max_body_bytes,
    )

    @asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        async with manager.run():
            yield

    return Contribution(
        routes=[
            AdmittedRoute(MCP_PATH, StreamableHTTPASGIApp(manager), methods=["POST"], work=MCP_WORK)
        ],
        lifespan=lifespan,
    )
