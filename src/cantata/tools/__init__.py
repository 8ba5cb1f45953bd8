"""cantata.tools: tools from typed Python functions, the function-invocation loop,
middleware around model calls and tool calls, and ready-made tools (a Python executor
confined by the kernel, a container executor, file reading under one root)."""

from .code_executor import (
    CodeExecutionError,
    CodeResult,
    CodeRunner,
    LocalCodeExecutor,
    SandboxUnavailableError,
    extract_code,
    python_tool,
)
from .container_executor import ContainerCodeExecutor
from .context import ToolContext
from .errors import ToolSchemaError
from .file_tools import FileAccessError, FileTools
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
    "CodeExecutionError",
    "CodeResult",
    "CodeRunner",
    "ContainerCodeExecutor",
    "FileAccessError",
    "FileTools",
    "FunctionInvocationContext",
    "FunctionInvokingChatClient",
    "FunctionMiddleware",
    "FunctionNext",
    "FunctionTool",
    "LimitName",
    "LocalCodeExecutor",
    "MCPTools",
    "OnMessage",
    "SandboxUnavailableError",
    "ToolArgumentsError",
    "ToolContext",
    "ToolMethod",
    "ToolSchemaError",
    "chat_middleware",
    "extract_code",
    "function_middleware",
    "plugin_tools",
    "python_tool",
    "tool",
]
