"""`ChatOptions` as spec data: ``model.options`` in a spec, ``options`` in a config."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from ..models import ChatOptions
from .errors import SpecError

__all__ = ["options_from_data", "options_to_data"]

_FIELDS = {f.name for f in fields(ChatOptions)} - {"tools"}


def options_from_data(data: Any, *, where: str) -> ChatOptions:
    """Chat options from a mapping; a response format is a JSON schema (a mapping)."""
    if data is None:
        return ChatOptions()
    if not isinstance(data, Mapping):
        raise SpecError(f"{where}: options must be a mapping, got {type(data).__name__}")
    unknown = sorted(set(map(str, data)) - _FIELDS)
    if unknown:
        raise SpecError(
            f"{where}: unknown chat option(s) {unknown}; known: {sorted(_FIELDS)} (put "
            "provider-specific fields under 'extra')"
        )
    _check(data, where)
    args: dict[str, Any] = {k: (list(v) if k == "stop" else v) for k, v in data.items()}
    return ChatOptions(**args)


def _check(data: Mapping[str, Any], where: str) -> None:
    kinds: dict[str, tuple[type, ...]] = {
        "model": (str,),
        "temperature": (int, float),
        "top_p": (int, float),
        "max_tokens": (int,),
        "seed": (int,),
        "stop": (list,),
        "tool_choice": (str, dict),
        "response_format": (dict,),
        "extra": (dict,),
    }
    for key, value in data.items():
        ok = kinds[key]
        if value is not None and (isinstance(value, bool) or not isinstance(value, ok)):
            raise SpecError(
                f"{where}: option {key!r} must be {' or '.join(t.__name__ for t in ok)}, "
                f"got {type(value).__name__}"
            )
    stop = data.get("stop")
    if stop is not None and not all(isinstance(s, str) for s in stop):
        raise SpecError(f"{where}: option 'stop' must be a list of strings")


def options_to_data(options: ChatOptions, *, where: str) -> dict[str, Any]:
    """The set fields of `options`; a pydantic response format becomes its JSON schema."""
    out: dict[str, Any] = {}
    for name in sorted(_FIELDS):
        value = getattr(options, name)
        if value is None or (name == "extra" and not value):
            continue
        if name == "response_format" and not isinstance(value, dict):
            value = {"title": value.__name__, **value.model_json_schema()}
        out[name] = list(value) if name == "stop" else value
    if options.tools:
        raise SpecError(f"{where}: options carrying tool specs cannot be written; give tools")
    return out
