"""Turning what a tool returned or raised into what the model reads back."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

from pydantic import BaseModel

from ..core import RetryTool, SerializationError, ToolError, to_json

_PRIMITIVES = (str, int, float, bool, type(None))


def jsonable(value: Any) -> Any:
    """A tool's return value as JSON data: pydantic models dumped, dataclasses as dicts,
    containers converted item by item, other values through the type registry; a value
    the registry does not know becomes its ``str()`` (the model reads text anyway)."""
    if type(value) in _PRIMITIVES:
        return value
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable(dataclasses.asdict(value))
    if isinstance(value, enum.Enum):
        return jsonable(value.value)
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: jsonable(v) for k, v in value.items()}
    try:
        return to_json(value)
    except SerializationError:
        return str(value)


def error_text(exc: BaseException, tool_name: str) -> str:
    """What the model is told when a call failed: enough to fix the call or move on."""
    if isinstance(exc, RetryTool | ToolError):
        return str(exc) or f"tool {tool_name!r} failed ({type(exc).__name__})"
    detail = str(exc)
    kind = type(exc).__name__
    return (
        f"tool {tool_name!r} failed: {kind}: {detail}"
        if detail
        else f"tool {tool_name!r} failed: {kind}"
    )


def unknown_tool_text(name: str, available: list[str]) -> str:
    listed = ", ".join(repr(n) for n in sorted(available)) or "none"
    return f"there is no tool named {name!r}; the available tools are: {listed}"


REJECTED_TEXT = "the user rejected this call"
