"""Tools by reference: a spec names a tool (``id: module.function``) and loading finds it
among the tools the caller passed, or imports it from an import path the caller allows.
Nothing in the text is executed or imported otherwise."""

from __future__ import annotations

import contextlib
import importlib
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..tools import FunctionTool, tool
from .errors import SpecError, UnknownToolError

if TYPE_CHECKING:
    from .context import ConfigContext

__all__ = ["index_tools", "resolve_tool", "tool_id"]

_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def tool_id(t: FunctionTool) -> str:
    """The import path of a tool's function (``module.qualname``): its id in a config."""
    func = t.func if hasattr(t, "func") else None
    module = getattr(func, "__module__", None)
    qual = getattr(func, "__qualname__", None)
    if not module or not qual or "<" in qual:
        raise SpecError(
            f"tool {t.name!r} has no import path (a lambda or a nested function); define it "
            "at module level to write it in a config",
            tool_name=t.name,
        )
    return f"{module}.{qual}"


def index_tools(tools: Iterable[Any] | Mapping[str, Any]) -> dict[str, FunctionTool]:
    """The caller's tools by name and by import path."""
    items: list[tuple[str | None, Any]] = (
        [(str(k), v) for k, v in tools.items()]
        if isinstance(tools, Mapping)
        else [(None, v) for v in tools]
    )
    out: dict[str, FunctionTool] = {}
    for key, value in items:
        t: FunctionTool = value if isinstance(value, FunctionTool) else _as_tool(value)
        out[t.name] = t
        if key is not None:
            out[key] = t
        with contextlib.suppress(SpecError):  # a lambda is found by its name only
            out[tool_id(t)] = t
    return out


def _as_tool(value: Any) -> FunctionTool:
    if not callable(value):
        raise SpecError(f"tools= must hold FunctionTools or functions, got {value!r}")
    made: FunctionTool = tool(value)
    return made


def resolve_tool(ref: str, ctx: ConfigContext, *, where: str) -> FunctionTool:
    """The tool `ref` names (a name or ``module.function``)."""
    if not isinstance(ref, str):
        raise SpecError(f"{where}: a tool id must be a string, got {type(ref).__name__}")
    found: FunctionTool | None = ctx.tools.get(ref)
    if found is not None:
        return found
    if _DOTTED.fullmatch(ref) and "." in ref and ctx.allows(ref):
        return _import_tool(ref, where)
    available = sorted(ctx.tools)
    raise UnknownToolError(
        f"{where}: tool {ref[:200]!r} is not available; available tools: "
        f"{available or 'none'}; allowed import paths: {list(ctx.allow) or 'none'} "
        "(pass the tool in tools=[...] or its module in allow=[...])",
        tool_id=ref[:200],
        available=available,
    )


def _import_tool(ref: str, where: str) -> FunctionTool:
    module, _, name = ref.rpartition(".")
    try:
        obj = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise UnknownToolError(
            f"{where}: tool {ref!r} cannot be imported: {exc}", tool_id=ref, available=[]
        ) from exc
    if isinstance(obj, FunctionTool):
        return obj
    if not callable(obj) or isinstance(obj, type):
        raise SpecError(f"{where}: {ref!r} is not a function or a FunctionTool")
    imported: FunctionTool = tool(obj)
    return imported
