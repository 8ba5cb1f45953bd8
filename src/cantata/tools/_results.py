"""Turning what a tool returned or raised into what the model reads back."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

from pydantic import BaseModel

from ..core import DataContent, RetryTool, SerializationError, ToolError, to_json

_PRIMITIVES = (str, int, float, bool, type(None))
_KEY_TEXT = {True: "true", False: "false", None: "null"}


def split_attachments(value: Any) -> tuple[Any, tuple[DataContent, ...]]:
    """A returned `DataContent` (an image), alone or as items of a returned list, goes in
    the tool message beside the result, for the model to see; the result is the rest (the
    one other item, or the list of them), or names the attachments when nothing else is
    left. Any other value is the result as it is."""
    if type(value) is DataContent:
        return _attached_text((value,)), (value,)
    if type(value) is not list or not any(type(v) is DataContent for v in value):
        return value, ()
    attached = tuple(v for v in value if type(v) is DataContent)
    rest = [v for v in value if type(v) is not DataContent]
    if not rest:
        return _attached_text(attached), attached
    return (rest[0] if len(rest) == 1 else rest), attached


def _attached_text(attached: tuple[DataContent, ...]) -> str:
    return f"[attached: {', '.join(d.media_type for d in attached)}]"


def jsonable(value: Any) -> Any:
    """A tool's return value as JSON data: pydantic models dumped, dataclasses as dicts,
    containers converted item by item (keys that are numbers, booleans or None written as
    JSON writes them), other values through the type registry; a value that cannot be
    converted becomes its ``str()`` (the model reads text anyway).

    Never raises: a tool's odd return value (a lock inside a dataclass, a cycle, a model
    with an arbitrary field) must not turn a successful call into a crashed run.
    """
    return _convert(value, set())


def _convert(value: Any, path: set[int]) -> Any:
    if type(value) in _PRIMITIVES:
        return value
    if isinstance(value, enum.Enum):
        return _convert(value.value, path)
    key = id(value)
    if key in path:  # a container that holds itself
        return "..."
    path.add(key)
    try:
        return _convert_object(value, path)
    except Exception:
        return _text(value)
    finally:
        path.discard(key)


def _convert_object(value: Any, path: set[int]) -> Any:
    if isinstance(value, BaseModel):
        try:
            return value.model_dump(mode="json")
        except Exception:  # a field pydantic cannot dump: convert field by field
            fields = {name: getattr(value, name) for name in type(value).model_fields}
            return _convert({**fields, **(value.model_extra or {})}, path)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        # not dataclasses.asdict: it deep-copies every field, which fails on locks,
        # sockets and other handles a tool may hold
        return {f.name: _convert(getattr(value, f.name), path) for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [_convert(v, path) for v in value]
    if isinstance(value, dict) and all(type(k) in _PRIMITIVES for k in value):
        return {_key_text(k): _convert(v, path) for k, v in value.items()}
    try:
        return to_json(value)
    except SerializationError:
        return _text(value)


def _key_text(key: str | int | float | bool | None) -> str:
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, bool):
        return _KEY_TEXT[key]
    return repr(key)


def _text(value: Any) -> str:
    try:
        return str(value)
    except Exception:
        return f"<{type(value).__name__} object>"


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
