"""JSON parsing with a nesting limit, for every decoder that reads text from outside.

Python's parser recurses once per level, so a few thousand ``[`` exhaust the stack and
reach callers as a bare `RecursionError`; code that walks parsed data recurses the same
way. One limit, far deeper than any thread, checkpoint or tool call ever nests and far
below the interpreter's recursion limit, keeps every reader and writer safe.

The C parser checks the interpreter's recursion limit at every level and unwinds
cleanly, so text deeper than it can take is turned into the typed error; what parses is
then measured by an iterative walk, which costs less than the parse itself (counting
the depth on the text first, with regular expressions, cost twice the parse). Everything
here raises `SerializationError` and nothing else.
"""

from __future__ import annotations

import json
import math
import re
import reprlib
from typing import Any

from .errors import SerializationError

__all__ = [
    "MAX_JSON_DEPTH",
    "check_json_depth",
    "compact_json",
    "loads_json",
    "parse_json",
    "short_repr",
]

MAX_JSON_DEPTH = 100
"""Most levels of nested lists and objects any cantata reader or writer accepts.

``[]`` is one level, ``[[1]]`` two. Real threads and checkpoints stay under ten; the
interpreter's recursion limit (1,000 frames) would be reached near 300-500 levels.
"""

_decoder = json.JSONDecoder()
_decode = _decoder.decode
_scan = _decoder.scan_once  # type: ignore[attr-defined]


def parse_json(text: str) -> Any:
    """``json.loads(text)`` for a `str`, the same value and errors (`ValueError`), without
    the decoder's Python layers when the text is one value with nothing around it (what
    every writer here produces): messages cross processes and stores as JSON, so this
    parse runs for each of them."""
    try:
        value, end = _scan(text, 0)
    except StopIteration:
        return _decode(text)  # leading whitespace, or not JSON: its own error
    if end != len(text):
        return _decode(text)  # trailing whitespace, or extra data: its own error
    return value


def _not_json(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_compact = (
    json.encoder.c_make_encoder(  # type: ignore[attr-defined]
        None, _not_json, json.encoder.encode_basestring, None, ":", ",", False, False, True
    )
    if json.encoder.c_make_encoder is not None  # type: ignore[attr-defined]
    else None
)


def compact_json(value: Any) -> str:
    """``json.dumps(value, separators=(",", ":"), ensure_ascii=False)``, the same text and
    errors, through one C encoder made once instead of an encoder object per call (this
    runs for every message that crosses a process or goes to a store). A value that
    contains itself is the same `ValueError` as there."""
    if _compact is None:  # no C encoder in this interpreter
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    try:
        return "".join(_compact(value, 0))
    except RecursionError:
        raise ValueError("Circular reference detected (or nested too deep)") from None


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise SerializationError(
            f"JSON number {short_repr(text)} does not fit a float; write it as a string"
        )
    return number


def _no_constant(name: str) -> Any:
    raise SerializationError(f"JSON text holds {name}, which standard JSON does not allow")


_parse_finite = json.JSONDecoder(parse_float=_finite, parse_constant=_no_constant).decode
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_CONTAINERS = frozenset({list, dict, tuple, set, frozenset})
_SHORT = reprlib.Repr()
_SHORT.maxstring = 60
_SHORT.maxother = 60
_SHORT.maxlevel = 3
_SHORT.maxlist = _SHORT.maxtuple = _SHORT.maxdict = _SHORT.maxset = 4


def short_repr(value: Any, limit: int = 80) -> str:
    """A repr of at most `limit` characters and a few levels, safe for any value.

    Error messages use it so that a huge or deeply nested input never lands in a log
    whole (nor costs a recursion of its own to print).
    """
    try:
        text = _SHORT.repr(value)
    except Exception:  # a broken __repr__ must not hide the real error
        text = f"<{type(value).__name__} object>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _too_deep(max_depth: int) -> SerializationError:
    return SerializationError(
        f"JSON nested deeper than the limit of {max_depth} levels of lists and objects; "
        "flatten the data (cantata.core.MAX_JSON_DEPTH is the limit every reader applies)"
    )


def _check_str(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise SerializationError(
            f"JSON text holds a lone surrogate at character {exc.start}; "
            "it cannot be valid Unicode text: decode the source with errors='strict'"
        ) from None


def loads_json(
    text: str | bytes | bytearray,
    *,
    max_depth: int = MAX_JSON_DEPTH,
    allow_surrogates: bool = False,
    allow_nan: bool = True,
) -> Any:
    """Parse JSON text (or UTF-8 bytes) nested at most `max_depth` levels deep.

    Deeper text, malformed JSON, bytes that are not UTF-8 and lone surrogates (raw, or
    as ``\\ud800`` escapes) all raise `SerializationError`, whose message never holds the
    input whole. `allow_surrogates=True` keeps escaped lone surrogates, for readers whose
    writer escapes them on purpose (the stores, which are ASCII-only on disk).
    `allow_nan=False` also refuses ``NaN``, ``Infinity`` and numbers too large for a float,
    for readers whose writer refuses them (so that what loads writes back).
    """
    if isinstance(text, bytes | bytearray):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SerializationError(
                f"JSON bytes are not valid UTF-8 (byte {exc.start}: {exc.reason}); "
                "send UTF-8 encoded text"
            ) from None
    elif type(text) is not str:
        raise SerializationError(
            f"JSON text must be str or bytes, got {type(text).__name__}; "
            "pass the text, not the parsed value"
        )
    if not allow_surrogates and not text.isascii():
        _check_str(text)
    try:
        value = (parse_json if allow_nan else _parse_finite)(text)
    except SerializationError:
        raise
    except ValueError as exc:
        raise SerializationError(f"malformed JSON: {short_repr(str(exc), 200)}") from None
    except RecursionError:
        # The C parser checks the interpreter's limit at every level and unwinds cleanly.
        raise _too_deep(max_depth) from None
    check_json_depth(value, max_depth=max_depth)
    if (
        not allow_surrogates
        and "\\u" in text
        and _SURROGATE_ESCAPE.search(text)
        and _has_lone_surrogate(value)
    ):
        raise SerializationError(
            "JSON text holds a lone surrogate escape (such as \\ud800) that is not half of "
            "a pair; it cannot be valid Unicode text"
        )
    return value


_FAST_LEVELS = 16
"""Levels walked breadth-first before the exact walk takes over (real data ends sooner)."""


def check_json_depth(value: Any, *, max_depth: int = MAX_JSON_DEPTH) -> None:
    """Raise `SerializationError` when `value` nests deeper than `max_depth` levels.

    Lists, dicts, tuples and sets count as levels. Iterative, so a value of any depth is
    checked without recursion; a value that contains itself is reported as too deep, and
    containers shared by many parents are measured once each, not once per path.
    """
    level = [value] if type(value) in _CONTAINERS else []
    depth = 0
    while level:
        depth += 1
        if depth > max_depth:
            raise _too_deep(max_depth)
        if depth > _FAST_LEVELS:
            # Deep, shared or cyclic: measure exactly, each container once.
            _check_height(value, max_depth)
            return
        level = _containers_below(level)


def _containers_below(level: list[Any]) -> list[Any]:
    """The containers directly inside the containers of `level` (one step of a walk)."""
    below: list[Any] = []
    for container in level:
        items = container.values() if type(container) is dict else container
        for item in items:
            kind = type(item)
            if kind is dict or kind is list or kind in _CONTAINERS:
                below.append(item)
    return below


def _children(container: Any) -> Any:
    items = container.values() if type(container) is dict else container
    return iter([item for item in items if type(item) in _CONTAINERS])


def _check_height(value: Any, max_depth: int) -> None:
    """Depth-first, with the height of every finished container remembered by id.

    A container met again on the current path is a cycle (infinitely deep); one met
    again elsewhere adds its remembered height, so shared parts cost nothing more.
    """
    heights: dict[int, int] = {}
    on_path = {id(value)}
    # frames: [container, iterator over its child containers, tallest child so far]
    stack: list[list[Any]] = [[value, _children(value), 0]]
    while stack:
        frame = stack[-1]
        child = next(frame[1], None)
        if child is None:
            stack.pop()
            on_path.discard(id(frame[0]))
            heights[id(frame[0])] = height = frame[2] + 1
            if stack:
                stack[-1][2] = max(stack[-1][2], height)
            continue
        key = id(child)
        known = heights.get(key)
        if known is not None:
            if len(stack) + known > max_depth:
                raise _too_deep(max_depth)
            frame[2] = max(frame[2], known)
        elif key in on_path or len(stack) >= max_depth:
            raise _too_deep(max_depth)
        else:
            on_path.add(key)
            stack.append([child, _children(child), 0])


def _has_lone_surrogate(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is str:
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif kind is list:
            stack.extend(item)
        elif kind is dict:
            stack.extend(item)
            stack.extend(item.values())
    return False
