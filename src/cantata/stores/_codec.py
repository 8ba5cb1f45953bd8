"""JSON text in and out of every backend, and the checks every backend shares.

Values are checked strictly (exact `dict` with `str` keys, `list`, `str`, `int`, finite
`float`, `bool`, `None`) because anything looser would not round-trip exactly: JSON turns
tuples into lists and integer keys into strings. Text is written ASCII-only so that every
string (NUL characters and lone surrogates included) survives SQLite, PostgreSQL and Redis.
"""

from __future__ import annotations

import json
import math
from typing import Any

from ..core import StoreError
from .errors import StoreCorruptionError

SCHEMA_VERSION = 1
"""Version 1: logs are (name, position, JSON text) rows or lists; values are JSON text."""

_encode = json.JSONEncoder(ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode
_decode = json.JSONDecoder().decode
_SCALARS = (str, int, bool, type(None))


def _bad_part(value: Any, depth: int = 0) -> str | None:
    """A description of the first part of `value` that is not JSON data, or None."""
    cls = type(value)
    if cls in _SCALARS:
        return None
    if cls is float:
        return None if math.isfinite(value) else f"the float {value!r} (JSON has no NaN or inf)"
    if depth > 500:
        return "nesting deeper than 500 levels"
    if cls is list:
        for item in value:
            bad = _bad_part(item, depth + 1)
            if bad is not None:
                return bad
        return None
    if cls is dict:
        for key, item in value.items():
            if type(key) is not str:
                return f"the non-string dict key {key!r}"
            bad = _bad_part(item, depth + 1)
            if bad is not None:
                return bad
        return None
    return f"a value of type {cls.__module__}.{cls.__qualname__}"


def check_json(value: Any, *, store: str, where: str) -> None:
    """Raise `StoreError` unless `value` is plain JSON data that round-trips exactly."""
    bad = _bad_part(value)
    if bad is not None:
        raise StoreError(
            f"{store}: cannot write {where}: the value is not JSON data ({bad}); "
            "convert it with cantata.core.to_json first"
        )


def encode(value: Any, *, store: str, where: str) -> str:
    """The JSON text of a value, after `check_json`."""
    check_json(value, store=store, where=where)
    return _encode(value)


def decode(text: Any, *, store: str, where: str) -> Any:
    """Parse stored JSON text; damaged data raises `StoreCorruptionError` naming `where`."""
    if isinstance(text, bytes):
        try:
            text = text.decode("ascii")
        except UnicodeDecodeError as exc:
            raise _corrupt(store, where, exc) from exc
    if type(text) is not str:
        raise _corrupt(store, where, f"stored as {type(text).__name__}, not JSON text")
    try:
        return _decode(text)
    except ValueError as exc:
        raise _corrupt(store, where, exc) from exc


def _corrupt(store: str, where: str, reason: object) -> StoreCorruptionError:
    return StoreCorruptionError(
        f"{store}: {where} is corrupted ({reason}); delete or rewrite it, "
        "or restore the data from a backup"
    )


def check_name(name: Any, *, store: str, kind: str) -> None:
    """Log names and keys: any string without NUL characters or lone surrogates."""
    if type(name) is not str:
        raise StoreError(
            f"{store}: a {kind} must be a str, got {type(name).__name__} {name!r}; "
            "pass a string such as 'thread:<id>'"
        )
    if "\x00" in name:
        raise StoreError(f"{store}: {kind} {name!r} contains a NUL character; remove it")
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise StoreError(
            f"{store}: {kind} {name!r} is not valid Unicode (a lone surrogate); "
            "build names from proper text"
        ) from None


def check_index(value: Any, *, store: str, name: str) -> None:
    """`start` and `stop` of `read` are ints (negative counts from the end, as in slices)."""
    if type(value) is not int:
        raise StoreError(
            f"{store}: read {name}= must be an int, got {type(value).__name__} {value!r}"
        )


def prefix_upper(prefix: str) -> str | None:
    """The smallest string above every string that starts with `prefix` (None: no bound).

    `prefix <= key < prefix_upper(prefix)` selects keys with that prefix through an index,
    in code-point order (which is UTF-8 byte order, and PostgreSQL's "C" collation).
    """
    chars = list(prefix)
    while chars:
        code = ord(chars[-1]) + 1
        if code == 0xD800:
            code = 0xE000  # surrogates are never stored, skip them
        if code <= 0x10FFFF:
            chars[-1] = chr(code)
            return "".join(chars)
        chars.pop()
    return None
