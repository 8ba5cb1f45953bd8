"""cantata.tools: tools from typed Python functions, the function-invocation loop, and
middleware around model calls and tool calls."""

from .context import ToolContext
from .errors import ToolSchemaError
from .invoking import FunctionInvokingChatClient, LimitName, OnMessage
from .mcp_tools import DEFAULT_MCP_CONNECT_TIMEOUT, DEFAULT_MCP_TOOL_TIMEOUT, MCPTools
from .middleware import (
    ChatContext,
    ChatMiddleware,
    ChatNext,
    FunctionInvocationContext,
    FunctionMiddleware,
    FunctionNext,
    chat_middleware,
    function_middleware,
)
from .tool import ApprovalMode, FunctionTool, ToolArgumentsError, ToolMethod, plugin_tools, tool

__all__ = [
    "DEFAULT_MCP_CONNECT_TIMEOUT",
    "DEFAULT_MCP_TOOL_TIMEOUT",
    "ApprovalMode",
    "ChatContext",
    "ChatMiddleware",
    "ChatNext",
    "FunctionInvocationContext",
    "FunctionInvokingChatClient",
    "FunctionMiddleware",
    "FunctionNext",
    "FunctionTool",
    "LimitName",
    "MCPTools",
    "OnMessage",
    "ToolArgumentsError",
    "ToolContext",
    "ToolMethod",
    "ToolSchemaError",
    "chat_middleware",
    "function_middleware",
    "plugin_tools",
    "tool",
]
