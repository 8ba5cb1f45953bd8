"""The bounded JSON reader: one depth limit, typed errors only, messages never whole."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cantata.core import (
    MAX_JSON_DEPTH,
    SerializationError,
    check_json_depth,
    compact_json,
    loads_json,
    parse_json,
    short_repr,
)


def nested_text(depth: int, open_: str = "[", close: str = "]") -> str:
    return open_ * depth + close * depth


def nested_value(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def test_the_limit_is_far_below_the_recursion_limit() -> None:
    assert 32 <= MAX_JSON_DEPTH <= 200


@pytest.mark.parametrize("depth", [1, 10, MAX_JSON_DEPTH])
def test_text_up_to_the_limit_parses(depth: int) -> None:
    assert loads_json(nested_text(depth)) == json.loads(nested_text(depth))
    assert loads_json(nested_text(depth, '{"a":', "}")[:-depth] + "1" + "}" * depth)


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 500, 100_000])
def test_deeper_text_is_a_typed_error_naming_the_limit(depth: int) -> None:
    with pytest.raises(SerializationError, match=f"limit of {MAX_JSON_DEPTH} levels") as info:
        loads_json(nested_text(depth))
    assert len(str(info.value)) < 300


def test_deep_objects_count_like_lists() -> None:
    text = '{"a":' * 300 + "1" + "}" * 300
    with pytest.raises(SerializationError, match="limit"):
        loads_json(text)


def test_max_depth_is_a_parameter() -> None:
    assert loads_json("[[1]]", max_depth=2) == [[1]]
    with pytest.raises(SerializationError, match="limit of 2 levels"):
        loads_json("[[[1]]]", max_depth=2)


def test_brackets_inside_strings_do_not_count() -> None:
    text = json.dumps(["[" * 1000, "{" * 1000, "]" * 5])
    assert loads_json(text) == ["[" * 1000, "{" * 1000, "]" * 5]


@pytest.mark.parametrize(
    "text", ["", "[1,", "{'a': 1}", "nul", "[1]]", "[" * 5000 + "}" * 5000, '"\\x"']
)
def test_malformed_text_is_a_typed_error(text: str) -> None:
    with pytest.raises(SerializationError):
        loads_json(text)


def test_the_message_never_holds_a_huge_input_whole() -> None:
    text = '{"a": "' + "x" * 1_000_000 + '", }'
    with pytest.raises(SerializationError) as info:
        loads_json(text)
    assert len(str(info.value)) < 400


def test_bytes_must_be_utf8() -> None:
    assert loads_json('["é"]'.encode()) == ["é"]
    assert loads_json(bytearray(b"[1]")) == [1]
    with pytest.raises(SerializationError, match="not valid UTF-8"):
        loads_json(b'["\xff"]')


def test_lone_surrogates_are_refused_raw_and_escaped() -> None:
    with pytest.raises(SerializationError, match="lone surrogate"):
        loads_json('["\ud800"]')
    with pytest.raises(SerializationError, match="lone surrogate"):
        loads_json('["\\ud800"]')
    with pytest.raises(SerializationError, match="lone surrogate"):
        loads_json('{"\\udc00": 1}')
    # A pair written as two escapes is one proper character.
    assert loads_json('["\\ud83d\\ude00"]') == ["\U0001f600"]
    # An escaped backslash followed by 'ud800' is plain text.
    assert loads_json('["\\\\ud800"]') == ["\\ud800"]


def test_surrogates_may_be_allowed_for_writers_that_escape_them() -> None:
    assert loads_json('["\\ud800"]', allow_surrogates=True) == ["\ud800"]


def test_not_text_is_a_typed_error() -> None:
    with pytest.raises(SerializationError, match="must be str or bytes"):
        loads_json([1])  # type: ignore[arg-type]


def test_check_json_depth_on_values() -> None:
    check_json_depth(nested_value(MAX_JSON_DEPTH))
    check_json_depth({"a": ({"b": [1]},)}, max_depth=4)
    check_json_depth("scalar", max_depth=0)
    with pytest.raises(SerializationError, match="limit"):
        check_json_depth(nested_value(MAX_JSON_DEPTH + 1))
    with pytest.raises(SerializationError, match="limit of 3"):
        check_json_depth({"a": ({"b": [1]},)}, max_depth=3)


def test_check_json_depth_is_iterative() -> None:
    with pytest.raises(SerializationError):
        check_json_depth(nested_value(200_000))


def test_check_json_depth_reports_a_value_that_contains_itself() -> None:
    looped: list[Any] = []
    looped.append(looped)
    with pytest.raises(SerializationError, match="limit"):
        check_json_depth(looped)


def test_short_repr_is_short_for_huge_and_deep_values() -> None:
    assert short_repr("abc") == "'abc'"
    assert len(short_repr("x" * 1_000_000)) <= 80
    assert len(short_repr(nested_value(100_000))) <= 80
    assert len(short_repr(list(range(100_000)), 30)) <= 30

    class Broken:
        def __repr__(self) -> str:
            raise RuntimeError("no")

    assert "Broken" in short_repr(Broken())


@pytest.mark.parametrize("text", ["[NaN]", "[Infinity]", "[-Infinity]", "[1e400]", "-1e999"])
def test_non_finite_numbers_may_be_refused(text: str) -> None:
    loads_json(text)
    with pytest.raises(SerializationError):
        loads_json(text, allow_nan=False)


def test_finite_floats_pass_when_nan_is_refused() -> None:
    assert loads_json("[1.5, -0.0, 1e300, 3]", allow_nan=False) == [1.5, -0.0, 1e300, 3]


def test_integers_too_long_to_convert_are_a_typed_error() -> None:
    with pytest.raises(SerializationError, match="malformed"):
        loads_json("1" * 5000)


def test_a_value_that_contains_itself_twice_is_refused_at_once() -> None:
    # Breadth-first, each level would double: 2**100 entries before the limit.
    looped: list[Any] = []
    looped.extend([looped, looped])
    with pytest.raises(SerializationError, match="limit"):
        check_json_depth(looped)


def test_shared_parts_are_measured_once_and_exactly() -> None:
    shared: Any = 1
    for _ in range(60):
        shared = [shared, shared]  # 2**60 paths, 61 containers
    check_json_depth(shared)
    check_json_depth({"a": [[shared]], "b": shared})
    with pytest.raises(SerializationError, match="limit of 61"):
        check_json_depth([[shared]], max_depth=61)
    check_json_depth([[shared]], max_depth=62)


@pytest.mark.parametrize("depth", [16, 17, 18, 40, 99, 100, 101])
def test_the_exact_walk_agrees_with_the_depth(depth: int) -> None:
    value = nested_value(depth)
    mixed = {"wide": [nested_value(3)] * 50, "deep": ({"x": value},)}
    check_json_depth(value, max_depth=depth)
    check_json_depth(mixed, max_depth=depth + 3)
    with pytest.raises(SerializationError):
        check_json_depth(value, max_depth=depth - 1)
    with pytest.raises(SerializationError):
        check_json_depth(mixed, max_depth=depth + 2)


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=16,
)


@given(_JSON_VALUES)
def test_compact_json_writes_what_json_dumps_writes(value: Any) -> None:
    """The cached C encoder gives json.dumps's compact, non-ASCII text exactly, and the
    scanner's parse reads back what json.loads reads."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    assert compact_json(value) == text
    assert json.dumps(parse_json(text)) == json.dumps(json.loads(text))


@pytest.mark.parametrize("text", ["", " ", "{", "[1,]", "1 2", "nul", '"a', "[1]x", "\ud800"])
def test_parse_json_fails_as_json_loads_does(text: str) -> None:
    with pytest.raises(ValueError) as theirs:
        json.loads(text)
    with pytest.raises(ValueError) as ours:
        parse_json(text)
    assert (type(ours.value), str(ours.value)) == (type(theirs.value), str(theirs.value))


def test_compact_json_refuses_what_json_dumps_refuses() -> None:
    looped: list[Any] = []
    looped.append(looped)
    with pytest.raises(ValueError, match="Circular reference"):
        compact_json(looped)
    with pytest.raises(TypeError, match="not JSON serializable"):
        compact_json({"x": object()})
    assert parse_json(" 1 ") == 1  # whitespace around a value, as json.loads takes it
