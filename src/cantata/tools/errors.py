"""Errors of tool definitions that callers may want to catch by type."""

from __future__ import annotations

from ..core import ConfigurationError

__all__ = ["ToolSchemaError"]


class ToolSchemaError(ConfigurationError):
    """A tool's parameter has a type with no JSON schema, so no model could fill it;
    `tool_name` and `parameter` say which."""

    def __init__(self, message: str, *, tool_name: str, parameter: str) -> None:
        super().__init__(message)
        self.tool_name = tool_name
        self.parameter = parameter
