"""JSON text in and out of every backend, and the checks every backend shares.

Values are checked strictly (exact `dict` with `str` keys, `list`, `str`, `int`, finite
`float`, `bool`, `None`) because anything looser would not round-trip exactly: JSON turns
tuples into lists and integer keys into strings. Text is written ASCII-only so that every
string (NUL characters and lone surrogates included) survives SQLite, PostgreSQL and Redis.
Nesting is bounded by `cantata.core.MAX_JSON_DEPTH` both ways: deeper values are refused
on write, and deeper stored text (written by someone else) is a `StoreCorruptionError`.
"""

from __future__ import annotations

import json
import math
from typing import Any

from ..core import (
    MAX_JSON_DEPTH,
    SerializationError,
    StoreError,
    check_json_depth,
    loads_json,
    short_repr,
)
from .errors import StoreCorruptionError

SCHEMA_VERSION = 1
"""Version 1: logs are (name, position, JSON text) rows or lists; values are JSON text."""

_encode = json.JSONEncoder(ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode
_SCALARS = frozenset({str, bool, type(None)})
# JSON text of an int is decimal, and Python converts at most 4,300 digits by default.
_MAX_INT_BITS = 13_000


def _bad_scalar(value: Any) -> str | None:
    cls = type(value)
    if cls in _SCALARS:
        return None
    if cls is int:
        if value.bit_length() <= _MAX_INT_BITS:
            return None
        return f"an int of {value.bit_length()} bits (at most {_MAX_INT_BITS}; store it as text)"
    if cls is float:
        return None if math.isfinite(value) else f"the float {value!r} (JSON has no NaN or inf)"
    return f"a value of type {cls.__module__}.{cls.__qualname__}"


_FAST_LEVELS = 16  # real data ends sooner; deeper, the walk visits each container once


def _bad_part(value: Any) -> str | None:
    """A description of the first part of `value` that is not JSON data, or None.

    Level by level, without recursion, so a value of any depth is described instead of
    exhausting the stack. Past a few levels the depth is measured exactly first (a value
    that contains itself is too deep) and shared containers are then checked once each,
    so sharing cannot multiply the work.
    """
    if type(value) is not list and type(value) is not dict:
        return _bad_scalar(value)
    level: list[Any] = [value]
    depth = 0
    seen: set[int] | None = None
    while level:
        depth += 1
        if depth > _FAST_LEVELS and seen is None:
            try:
                check_json_depth(value)
            except SerializationError:
                return f"nesting deeper than the limit of {MAX_JSON_DEPTH} levels"
            seen = set()
        if seen is not None:
            level = _unseen(level, seen)
        below: list[Any] = []
        for container in level:
            bad = _bad_items(container, below)
            if bad is not None:
                return bad
        level = below
    return None


def _unseen(level: list[Any], seen: set[int]) -> list[Any]:
    fresh = []
    for container in level:
        if id(container) not in seen:
            seen.add(id(container))
            fresh.append(container)
    return fresh


def _bad_items(container: Any, below: list[Any]) -> str | None:
    """Check the scalars of one container; its lists and dicts go to `below`."""
    if type(container) is dict:
        for key in container:
            if type(key) is not str:
                return f"the non-string dict key {short_repr(key)}"
        items = container.values()
    else:
        items = container
    for item in items:
        cls = type(item)
        if cls is list or cls is dict:
            below.append(item)
        elif cls not in _SCALARS:
            bad = _bad_scalar(item)
            if bad is not None:
                return bad
    return None


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
    try:
        return _encode(value)
    except ValueError as exc:  # an int too long for a decimal string
        raise StoreError(
            f"{store}: cannot write {where}: {short_repr(str(exc), 200)}; "
            "store such numbers as strings"
        ) from None


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
        # What the store wrote: ASCII with escaped surrogates, finite floats, bounded depth.
        return loads_json(text, allow_surrogates=True, allow_nan=False)
    except SerializationError as exc:
        raise _corrupt(store, where, exc) from exc


def _corrupt(store: str, where: str, reason: object) -> StoreCorruptionError:
    return StoreCorruptionError(
        f"{store}: {where} is corrupted ({reason}); delete or rewrite it, "
        "or restore the data from a backup"
    )


def quoted(name: str) -> str:
    """The repr of a log name or key for a message, shortened when it is long."""
    return repr(name) if len(name) <= 80 else short_repr(name, 80)


def check_name(name: Any, *, store: str, kind: str) -> None:
    """Log names and keys: any string without NUL characters or lone surrogates."""
    if type(name) is not str:
        raise StoreError(
            f"{store}: a {kind} must be a str, got {type(name).__name__} {short_repr(name)}; "
            "pass a string such as 'thread:<id>'"
        )
    if "\x00" in name:
        raise StoreError(f"{store}: {kind} {short_repr(name)} contains a NUL character; remove it")
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise StoreError(
            f"{store}: {kind} {short_repr(name)} is not valid Unicode (a lone surrogate); "
            "build names from proper text"
        ) from None


def check_index(value: Any, *, store: str, name: str) -> None:
    """`start` and `stop` of `read` are ints (negative counts from the end, as in slices)."""
    if type(value) is not int:
        raise StoreError(
            f"{store}: read {name}= must be an int, got {type(value).__name__} {short_repr(value)}"
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
