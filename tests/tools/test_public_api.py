"""The names cantata.tools exports stay exported."""

from __future__ import annotations

import inspect

import cantata.tools

EXPECTED = {
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
    "OnMessage",
    "ToolArgumentsError",
    "ToolContext",
    "chat_middleware",
    "function_middleware",
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
