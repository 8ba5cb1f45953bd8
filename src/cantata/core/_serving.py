"""The slot through which agents, workflows and teams reach the serving layer above them.

``agent.as_mcp_server()`` (and the same method on a workflow or team) is how Semantic Kernel
and Agent Framework users serve an agent over MCP, and `cantata.serve.as_mcp_server(obj)` is
the same server as a function; both spellings reach that one function. Agents, workflows and
teams sit below serve, so they may not import it (every module imports only from the layers
below its own; tests/test_layers.py parses every import). An import inside the method, lazy
or through `importlib`, would still be an arrow pointing up: it ties the lower layers to the
upper one and, through it, to each other, into one import circle. A registration made from
above is not: the `cantata` package, which sits over every layer and runs before any of them
is imported, registers serve's implementation here (a loader that imports the serving layer
on the first call only), and the methods call `mcp_server`. So every arrow points down, and a
lower layer reads and tests without the upper ones.
"""

from __future__ import annotations

from typing import Any, Protocol

from .errors import ConfigurationError

__all__ = ["MCPServerFactory", "mcp_server", "register_mcp_server"]


class MCPServerFactory(Protocol):
    """What serve registers: `served` (an agent, workflow or team) as an MCP server."""

    def __call__(self, served: Any, /, *, name: str, call_timeout: float | None) -> Any: ...


_factory: MCPServerFactory | None = None


def register_mcp_server(factory: MCPServerFactory) -> None:
    """Make `factory` the implementation behind the ``as_mcp_server()`` methods."""
    global _factory
    _factory = factory


def mcp_server(served: Any, *, kind: str, name: str, call_timeout: float | None) -> Any:
    """`served` as an MCP server through the registered implementation; `kind` (agent,
    workflow, team) names the caller in the error raised when nothing is registered."""
    if _factory is None:
        raise ConfigurationError(
            f"no MCP server implementation is registered for {kind}.as_mcp_server(); "
            f"import cantata (or call cantata.serve.as_mcp_server({kind})), which needs the "
            "serve extra"
        )
    return _factory(served, name=name, call_timeout=call_timeout)
