"""The names cantata.tools exports stay exported."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import cantata.tools

EXPECTED = {
    "DEFAULT_MCP_CONNECT_TIMEOUT",
    "DEFAULT_MCP_TOOL_TIMEOUT",
    "MCPTools",
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
}


def test_every_expected_name_is_exported_and_importable() -> None:
    assert set(cantata.tools.__all__) == EXPECTED
    for name in EXPECTED:
        assert getattr(cantata.tools, name) is not None


def test_public_classes_and_functions_have_docstrings() -> None:
    for name in EXPECTED:
        value = getattr(cantata.tools, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert (getattr(value, "__doc__", None) or "").strip(), name


def test_public_methods_and_properties_have_docstrings() -> None:
    # they become API docs, and a tool's are read by people wiring agents together
    missing: list[str] = []
    for name in EXPECTED:
        value = getattr(cantata.tools, name)
        if not inspect.isclass(value):
            continue
        for attribute, member in vars(value).items():
            documentable = isinstance(member, property) or inspect.isfunction(member)
            if attribute.startswith("_") or not documentable:
                continue
            if not (inspect.getdoc(member) or "").strip():
                missing.append(f"{name}.{attribute}")
    assert missing == []


ALLOWED_LAYERS = {"core", "stores", "runtime", "models"}


def test_tools_imports_only_the_layers_above_it() -> None:
    package = Path(cantata.tools.__file__).parent
    found: list[str] = []
    for path in sorted(package.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom):
                if node.level == 2 and node.module:
                    names.append(node.module.split(".")[0])
                elif node.level == 0 and (node.module or "").startswith("cantata."):
                    names.append((node.module or "").split(".")[1])
            elif isinstance(node, ast.Import):
                names += [a.name.split(".")[1] for a in node.names if a.name.startswith("cantata.")]
            found += [f"{path.name}: {n}" for n in names if n not in ALLOWED_LAYERS]
    assert found == []
