"""cantata: one engine for AI agents, workflows and teams.

The names a first program needs are importable from here (``from cantata import
ChatAgent, tool, WorkflowBuilder, LocalChatClient``); everything else lives in the layer
that owns it (see docs/architecture.md): `cantata.core`, `cantata.stores`, `cantata.runtime`,
`cantata.models`, `cantata.tools`, `cantata.agents`, `cantata.workflows`, `cantata.teams`,
`cantata.declarative`, `cantata.serve`, `cantata.cli`. The root names load their layer on
first use, so ``import cantata.core`` does not pay for the agents and workflows. Sitting over
every layer, this package also wires the one thing a lower layer reaches above itself for:
serve's MCP server behind the ``as_mcp_server()`` methods (`cantata.core._serving`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .core._serving import register_mcp_server

if TYPE_CHECKING:
    from .agents import AgentResponse, ChatAgent, LocalThread
    from .core import CantataError, Message
    from .models import ChatOptions, LocalChatClient, OpenAIChatClient, ScriptedChatClient
    from .runtime import AgentId, LocalRuntime, RoutedAgent, TopicId, message_handler
    from .stores import MemoryStore, SQLiteStore, open_store
    from .tools import tool
    from .workflows import (
        AgentExecutor,
        Executor,
        Workflow,
        WorkflowBuilder,
        WorkflowContext,
        executor,
        handler,
    )

__version__ = "0.1.0"

# name -> the layer that defines it
_EXPORTS: dict[str, str] = {
    "Message": "core",
    "CantataError": "core",
    "MemoryStore": "stores",
    "SQLiteStore": "stores",
    "open_store": "stores",
    "AgentId": "runtime",
    "TopicId": "runtime",
    "LocalRuntime": "runtime",
    "RoutedAgent": "runtime",
    "message_handler": "runtime",
    "ChatOptions": "models",
    "LocalChatClient": "models",
    "OpenAIChatClient": "models",
    "ScriptedChatClient": "models",
    "tool": "tools",
    "ChatAgent": "agents",
    "AgentResponse": "agents",
    "LocalThread": "agents",
    "WorkflowBuilder": "workflows",
    "Workflow": "workflows",
    "Executor": "workflows",
    "WorkflowContext": "workflows",
    "AgentExecutor": "workflows",
    "executor": "workflows",
    "handler": "workflows",
}

__all__ = [
    "AgentExecutor",
    "AgentId",
    "AgentResponse",
    "CantataError",
    "ChatAgent",
    "ChatOptions",
    "Executor",
    "LocalChatClient",
    "LocalRuntime",
    "LocalThread",
    "MemoryStore",
    "Message",
    "OpenAIChatClient",
    "RoutedAgent",
    "SQLiteStore",
    "ScriptedChatClient",
    "TopicId",
    "Workflow",
    "WorkflowBuilder",
    "WorkflowContext",
    "__version__",
    "executor",
    "handler",
    "message_handler",
    "open_store",
    "tool",
]


def __getattr__(name: str) -> Any:
    layer = _EXPORTS.get(name)
    if layer is None:
        raise AttributeError(f"module 'cantata' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{layer}", __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


def _mcp_server(served: Any, /, *, name: str, call_timeout: float | None) -> Any:
    # Registered below so the `as_mcp_server()` methods of agents, workflows and
    # teams reach the serving layer without importing it (see cantata.core._serving); the
    # import waits for the first call, so importing cantata does not load serve.
    from .serve.mcp_server import as_mcp_server

    return as_mcp_server(served, name=name, call_timeout=call_timeout)


register_mcp_server(_mcp_server)
