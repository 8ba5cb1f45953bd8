"""What the model reads back: JSON-able results and error texts."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import json
import threading
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict

from cantata.core import RetryTool, ToolError, dumps, loads
from cantata.tools._results import error_text, jsonable, unknown_tool_text


class City(BaseModel):
    name: str
    founded: dt.date


@dataclasses.dataclass
class Trip:
    cities: list[City]
    days: tuple[int, ...]


class Color(enum.Enum):
    RED = "red"


class Opaque:
    def __str__(self) -> str:
        return "an opaque thing"


def test_primitives_pass_through() -> None:
    for value in (None, True, 3, 2.5, "text"):
        assert jsonable(value) == value


def test_pydantic_models_are_dumped_as_json_data() -> None:
    assert jsonable(City(name="Rome", founded=dt.date(753, 4, 21))) == {
        "name": "Rome",
        "founded": "0753-04-21",
    }


def test_dataclasses_become_dicts_with_nested_values_converted() -> None:
    trip = Trip([City(name="Oslo", founded=dt.date(1040, 1, 1))], (1, 2))
    assert jsonable(trip) == {"cities": [{"name": "Oslo", "founded": "1040-01-01"}], "days": [1, 2]}


def test_enums_become_their_values() -> None:
    assert jsonable([Color.RED]) == ["red"]


def test_other_values_go_through_the_type_registry_and_round_trip() -> None:
    when = dt.datetime(2024, 5, 1, 12, 30)
    data = jsonable({"at": when, "tags": {"a"}})
    assert loads(dumps(data)) == data
    assert data["at"]["iso"] == when.isoformat()


def test_unknown_types_become_their_text() -> None:
    assert jsonable({"thing": Opaque()}) == {"thing": "an opaque thing"}


def test_error_text_for_signals_and_tool_errors_is_their_message() -> None:
    assert error_text(RetryTool("use metric units"), "convert") == "use metric units"
    assert error_text(ToolError("quota exceeded"), "search") == "quota exceeded"
    assert error_text(ToolError(), "search") == "tool 'search' failed (ToolError)"


def test_error_text_for_other_exceptions_names_the_tool_and_the_exception() -> None:
    assert error_text(ZeroDivisionError("division by zero"), "div") == (
        "tool 'div' failed: ZeroDivisionError: division by zero"
    )
    assert error_text(RuntimeError(), "div") == "tool 'div' failed: RuntimeError"


def test_unknown_tool_text_lists_the_tools_sorted() -> None:
    assert unknown_tool_text("x", ["b", "a"]) == (
        "there is no tool named 'x'; the available tools are: 'a', 'b'"
    )
    assert unknown_tool_text("x", []).endswith("the available tools are: none")


@dataclasses.dataclass
class Holder:
    name: str
    lock: object


class Unknown:
    def __str__(self) -> str:
        return "unknown"


class Loose(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)
    thing: Unknown


class Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no text either")


def test_a_dataclass_with_an_uncopyable_field_keeps_its_other_fields() -> None:
    # dataclasses.asdict deep-copies fields, which fails on a lock
    data = jsonable(Holder("db", threading.Lock()))
    assert data["name"] == "db"
    assert isinstance(data["lock"], str)


def test_a_pydantic_model_that_cannot_dump_becomes_text() -> None:
    data = jsonable(Loose(thing=Unknown()))
    assert data == {"thing": "unknown"} or isinstance(data, str)


def test_a_self_referencing_container_does_not_recurse_forever() -> None:
    cycle: list[Any] = [1]
    cycle.append(cycle)
    data = jsonable(cycle)
    assert data[0] == 1
    assert isinstance(data[1], str)
    assert loads(dumps(data)) == data


def test_a_value_without_text_still_becomes_something_the_model_can_read() -> None:
    assert "Unprintable" in jsonable(Unprintable())


def test_non_string_dict_keys_become_strings_as_json_writes_them() -> None:
    assert jsonable({1: "a", 2.5: "b", False: "c", None: "d"}) == {
        "1": "a",
        "2.5": "b",
        "false": "c",
        "null": "d",
    }


keys = st.text(max_size=3) | st.integers() | st.booleans() | st.none() | st.tuples(st.integers())
leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=5)
    | st.binary(max_size=4)
    | st.datetimes()
    | st.sampled_from(list(Color))
    | st.builds(Opaque)
    | st.builds(Unprintable)
    | st.builds(lambda: Holder("h", threading.Lock()))
    | st.builds(City, name=st.text(max_size=3), founded=st.dates())
)
python_values = st.recursive(
    leaves,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner, inner)
        | st.dictionaries(keys, inner, max_size=3)
        | st.frozensets(st.integers(), max_size=3)
        | st.builds(
            Trip,
            st.lists(st.builds(City, name=st.just("x"), founded=st.dates()), max_size=2),
            st.tuples(st.integers()),
        )
    ),
    max_leaves=10,
)


@settings(max_examples=200, deadline=None)
@given(value=python_values)
def test_any_return_value_becomes_json_text_can_hold(value: Any) -> None:
    data = jsonable(value)
    json.dumps(data)  # plain JSON data: no exception, whatever the tool returned
    assert dumps(loads(dumps(data))) == dumps(data)  # and it survives being stored
