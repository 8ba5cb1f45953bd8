"""What an agent takes as a tool, and how each kind becomes a `FunctionTool`."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeAlias

from ..core import ConfigurationError
from ..tools import FunctionTool, ToolMethod, plugin_tools, tool
from .agent import Agent

__all__ = ["ToolLike", "as_tools"]

ToolLike: TypeAlias = FunctionTool | Agent | Callable[..., Any] | object
"""What an agent takes as a tool: a `FunctionTool`, another agent, a typed function, or a
plugin (an object whose ``@tool``-marked methods it offers, bound to the object)."""


def as_tools(items: Iterable[Any], *, owner: str) -> list[FunctionTool]:
    """`items` as the tools of agent `owner`; raises `ConfigurationError` for one that is
    not a tool (or a plugin class given where an instance belongs)."""
    out: list[FunctionTool] = []
    for item in items:
        if isinstance(item, FunctionTool):
            out.append(item)
        elif isinstance(item, Agent):
            out.append(item.as_tool())
        elif isinstance(item, type) and any(
            isinstance(v, ToolMethod) for k in item.__mro__ for v in vars(k).values()
        ):
            raise ConfigurationError(
                f"agent `{owner}`: {item.__name__} is a plugin class; pass an instance "
                f"({item.__name__}(...)), whose @tool methods are then bound to it"
            )
        elif found := plugin_tools(item):
            out.extend(found)
        elif callable(item):
            out.append(tool(item))
        else:
            raise ConfigurationError(
                f"agent `{owner}`: {item!r} is not a tool; pass a FunctionTool, a typed "
                "function, another agent, or an object with @tool-marked methods"
            )
    return out
