"""The JSON type registry: exact round trips, clear errors, no pickle."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import enum
import json
import uuid
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from cantata.core import (
    MAX_JSON_DEPTH,
    SerializationError,
    TypeRegistry,
    UnknownTypeError,
    dumps,
    from_json,
    loads,
    to_json,
)

json_leaves = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
json_data = st.recursive(
    json_leaves,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)
python_values = st.recursive(
    json_leaves | st.binary() | st.uuids() | st.datetimes() | st.dates(),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner, inner)
        | st.frozensets(st.integers() | st.text(), max_size=3)
        | st.dictionaries(st.text() | st.integers(), inner, max_size=3)
    ),
    max_leaves=15,
)


@given(python_values)
def test_builtin_values_round_trip(value: Any) -> None:
    assert loads(dumps(value)) == value


@given(json_data)
def test_plain_json_is_left_as_is(data: Any) -> None:
    assert to_json(data) == data or "$type" in json.dumps(data)


def test_dict_with_type_key_is_escaped() -> None:
    value = {"$type": "message", "x": 1}
    assert loads(dumps(value)) == value


def test_unknown_type_on_write_names_the_type() -> None:
    class Opaque:
        pass

    with pytest.raises(UnknownTypeError, match="Opaque") as info:
        dumps(Opaque())
    assert info.value.type_name.endswith("Opaque")


def test_unknown_tag_on_read() -> None:
    with pytest.raises(UnknownTypeError) as info:
        loads('{"$type": "no.such.Type"}')
    assert info.value.type_name == "no.such.Type"


def test_unknown_tag_of_a_script_says_to_move_the_type_into_a_module() -> None:
    # a type registered in the script that was run cannot be registered by a Ray worker
    with pytest.raises(UnknownTypeError, match="move it into a module") as info:
        loads('{"$type": "__main__.Increment", "n": 1}')
    assert info.value.type_name == "__main__.Increment"
    with pytest.raises(UnknownTypeError, match="register the type"):
        TypeRegistry().type_named("app.Increment")
    with pytest.raises(UnknownTypeError, match="__main__"):
        TypeRegistry().type_named("__main__.Increment")


@pytest.mark.parametrize("text", ["{", "", "[1,", "nul", b"\xff\xfe"])
def test_malformed_json(text: str | bytes) -> None:
    with pytest.raises(SerializationError):
        loads(text)


@given(st.text())
def test_arbitrary_text_never_escapes_the_hierarchy(text: str) -> None:
    with contextlib.suppress(SerializationError):
        loads(text)


def test_registered_dataclass_pydantic_and_enum() -> None:
    reg = TypeRegistry()

    @reg.register(name="point")
    @dataclasses.dataclass
    class Point:
        x: int
        tags: tuple[str, ...] = ()

    @reg.register
    class Color(enum.Enum):
        RED = "red"

    @reg.register(name="order")
    class Order(BaseModel):
        id: int
        items: list[str]

    value = {"p": Point(1, ("a",)), "c": Color.RED, "o": Order(id=3, items=["x"])}
    assert reg.loads(reg.dumps(value)) == value


def test_malformed_registered_data_is_a_serialization_error() -> None:
    reg = TypeRegistry()

    @reg.register(name="pt")
    @dataclasses.dataclass
    class Pt:
        x: int

    with pytest.raises(SerializationError, match="pt"):
        reg.loads('{"$type": "pt", "y": 1}')


def test_name_clash_is_refused() -> None:
    reg = TypeRegistry()

    @reg.register(name="same")
    @dataclasses.dataclass
    class A:
        x: int

    with pytest.raises(SerializationError, match="already registered"):

        @reg.register(name="same")
        @dataclasses.dataclass
        class B:
            x: int


def test_non_codec_type_needs_encode_and_decode() -> None:
    class Plain:
        pass

    with pytest.raises(SerializationError, match="encode"):
        TypeRegistry().register(Plain)


def test_explicit_codec() -> None:
    reg = TypeRegistry()

    class Celsius:
        def __init__(self, v: float) -> None:
            self.v = v

    reg.register(Celsius, name="c", encode=lambda c: {"v": c.v}, decode=lambda d: Celsius(d["v"]))
    assert reg.loads(reg.dumps(Celsius(3.5))).v == 3.5


def test_special_builtins() -> None:
    value = [b"\x00", uuid.UUID(int=5), dt.datetime(2026, 1, 2, 3, 4, 5), {1: "a"}, {1, 2}]
    assert from_json(json.loads(json.dumps(to_json(value)))) == value


def test_bad_base64_is_refused() -> None:
    with pytest.raises(SerializationError):
        loads('{"$type": "bytes", "base64": "***"}')


# --- depth limit -------------------------------------------------------------------------


def _deep_list(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 300, 5_000])
def test_deep_text_is_refused_by_loads(depth: int) -> None:
    with pytest.raises(SerializationError, match="limit"):
        loads("[" * depth + "]" * depth)


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 5_000])
def test_deep_values_are_refused_by_to_json_and_dumps(depth: int) -> None:
    with pytest.raises(SerializationError, match="limit"):
        to_json(_deep_list(depth))
    with pytest.raises(SerializationError, match="limit"):
        dumps(_deep_list(depth))


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 5_000])
def test_deep_data_is_refused_by_from_json(depth: int) -> None:
    with pytest.raises(SerializationError, match="limit"):
        from_json(_deep_list(depth))


def test_tuples_count_the_levels_they_are_written_with() -> None:
    # A tuple is written as {"$type": "tuple", "items": [...]}: two levels of JSON each.
    value: Any = 0
    for _ in range(MAX_JSON_DEPTH // 2 + 1):
        value = (value,)
    with pytest.raises(SerializationError, match="limit"):
        dumps(value)


def test_a_value_that_contains_itself_is_refused() -> None:
    looped: list[Any] = []
    looped.append(looped)
    with pytest.raises(SerializationError):
        dumps(looped)


def test_what_dumps_writes_loads_back_at_the_limit() -> None:
    value = _deep_list(MAX_JSON_DEPTH)
    assert loads(dumps(value)) == value


def test_lone_surrogates_are_refused_both_ways() -> None:
    with pytest.raises(SerializationError, match="lone surrogate"):
        dumps(["\ud800"])
    with pytest.raises(SerializationError, match="lone surrogate"):
        loads('["\\udfff"]')


def test_an_unknown_huge_tag_is_not_repeated_whole() -> None:
    with pytest.raises(UnknownTypeError) as info:
        loads(json.dumps({"$type": "x" * 100_000}))
    assert len(str(info.value)) < 300


def test_an_int_too_long_for_text_is_a_typed_error() -> None:
    with pytest.raises(SerializationError, match="cannot serialize"):
        dumps(10**5000)
