"""The slot through which agents, workflows and teams reach the serving layer above them.

Serving over MCP is a function of `cantata.serve`: ``as_mcp_server(agent)``. Agents,
workflows and teams also kept an ``as_mcp_server()`` method, now deprecated, and those three
layers sit below serve, so they may not import it (every module imports only from the
layers below its own; tests/test_layers.py parses every import). An import inside the
method, lazy or through `importlib`, would still be an arrow pointing up: it ties the lower
layers to the upper one and, through it, to each other, into one import circle. A
registration made from above is not: the `cantata` package, which sits over every layer and
runs before any of them is imported, registers serve's implementation here (a loader that
imports the serving layer on the first call only), and the deprecated methods call
`mcp_server`. So every arrow points down, a lower layer reads and tests without the upper
ones, and the methods keep working for one release.
"""

from __future__ import annotations

import warnings
from typing import Any, Protocol

from .errors import ConfigurationError

__all__ = ["MCPServerFactory", "mcp_server", "register_mcp_server"]


class MCPServerFactory(Protocol):
    """What serve registers: `served` (an agent, workflow or team) as an MCP server."""

    def __call__(self, served: Any, /, *, name: str, call_timeout: float | None) -> Any: ...


_factory: MCPServerFactory | None = None


def register_mcp_server(factory: MCPServerFactory) -> None:
    """Make `factory` the implementation behind the deprecated ``as_mcp_server()`` methods."""
    global _factory
    _factory = factory


def mcp_server(served: Any, *, kind: str, name: str, call_timeout: float | None) -> Any:
    """`served` as an MCP server through the registered implementation, with the warning
    that tells the caller of a deprecated ``{kind}.as_mcp_server()`` what to call instead."""
    warnings.warn(
        f"{kind}.as_mcp_server() is deprecated and goes in the next release; call "
        f"cantata.serve.as_mcp_server({kind}) instead",
        DeprecationWarning,
        stacklevel=3,
    )
    if _factory is None:
        raise ConfigurationError(
            "no MCP server implementation is registered; call "
            f"cantata.serve.as_mcp_server({kind}) (needs the serve extra)"
        )
    return _factory(served, name=name, call_timeout=call_timeout)
