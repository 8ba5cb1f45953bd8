"""Placeholders in specs and configs: ``${Env:NAME}`` and ``${Settings:key}``.

They are replaced in the parsed values, never in the text, so a value (a key holding a
colon or a newline) cannot change the structure of the spec. A string that is exactly one
``${Settings:key}`` takes the setting's value whatever its type (a number stays a number);
inside longer text a value is written as text. Every unresolved placeholder is reported
together, by name and by where it is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .errors import SpecError, UnresolvedPlaceholderError

__all__ = ["MAX_DEPTH", "PLACEHOLDER", "find_placeholders", "resolve_placeholders"]

MAX_DEPTH = 64
"""Most levels of nesting a spec or config may have (deeper is refused, not recursed)."""

PLACEHOLDER = re.compile(r"\$\{(?P<source>[A-Za-z]+):(?P<key>[A-Za-z0-9_.\-]+)\}")
_SOURCES = ("Env", "Settings")


def find_placeholders(value: Any) -> list[str]:
    """Every placeholder text in `value` (strings in nested dicts and lists)."""
    found: list[str] = []
    for text in _strings(value, "", 0):
        found.extend(m.group(0) for m in PLACEHOLDER.finditer(text[1]))
    return found


def resolve_placeholders(value: Any, *, env: Mapping[str, str], settings: Mapping[str, Any]) -> Any:
    """A copy of `value` with its placeholders replaced; raises
    `UnresolvedPlaceholderError` naming every one that has no value."""
    missing: list[str] = []
    out = _resolve(value, env, settings, missing, "", 0)
    if missing:
        raise UnresolvedPlaceholderError(
            f"unresolved placeholder(s): {', '.join(missing)}; set the environment "
            "variable(s) or pass settings={...} with the key(s)",
            placeholders=missing,
        )
    return out


def _strings(value: Any, where: str, depth: int) -> list[tuple[str, str]]:
    _check_depth(depth, where)
    if isinstance(value, str):
        return [(where, value)]
    if isinstance(value, Mapping):
        return [s for k, v in value.items() for s in _strings(v, f"{where}.{k}", depth + 1)]
    if isinstance(value, list | tuple):
        return [s for i, v in enumerate(value) for s in _strings(v, f"{where}[{i}]", depth + 1)]
    return []


def _check_depth(depth: int, where: str) -> None:
    if depth > MAX_DEPTH:
        raise SpecError(
            f"{where[:120] or 'the spec'}... is nested more than {MAX_DEPTH} levels deep; "
            "flatten it",
            where=where[:120],
        )


def _resolve(
    value: Any,
    env: Mapping[str, str],
    settings: Mapping[str, Any],
    missing: list[str],
    where: str,
    depth: int,
) -> Any:
    _check_depth(depth, where)
    if isinstance(value, str):
        return _resolve_text(value, env, settings, missing, where)
    if isinstance(value, Mapping):
        return {
            k: _resolve(v, env, settings, missing, f"{where}.{k}", depth + 1)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [
            _resolve(v, env, settings, missing, f"{where}[{i}]", depth + 1)
            for i, v in enumerate(value)
        ]
    return value


def _lookup(
    source: str, key: str, env: Mapping[str, str], settings: Mapping[str, Any]
) -> tuple[bool, Any]:
    if source == "Env":
        return (key in env, env.get(key))
    if source == "Settings":
        return (key in settings, settings.get(key))
    return (False, None)


def _resolve_text(
    text: str,
    env: Mapping[str, str],
    settings: Mapping[str, Any],
    missing: list[str],
    where: str,
) -> Any:
    whole = PLACEHOLDER.fullmatch(text)
    if whole:
        found, got = _lookup(whole["source"], whole["key"], env, settings)
        if not found:
            missing.append(_describe(whole, where))
        return got if found else text

    def one(m: re.Match[str]) -> str:
        found, got = _lookup(m["source"], m["key"], env, settings)
        if not found:
            missing.append(_describe(m, where))
            return m.group(0)
        return str(got)

    return PLACEHOLDER.sub(one, text)


def _describe(m: re.Match[str], where: str) -> str:
    if m["source"] not in _SOURCES:
        return f"{m.group(0)} at {where or 'top'} (unknown source; use Env or Settings)"
    return f"{m.group(0)} at {where or 'top'}"
