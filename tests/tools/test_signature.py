"""Reading a function's signature into an arguments model and a clean JSON schema."""

from __future__ import annotations

import dataclasses
import functools
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field

from cantata.core import ConfigurationError
from cantata.tools import ToolContext
from cantata.tools._signature import (
    build_signature,
    clean_schema,
    first_paragraph,
    parameter_docs,
)


def test_fields_use_parameter_names_as_aliases() -> None:
    def f(schema: str, model_config: int = 1) -> None: ...

    sig = build_signature(f, "f")
    assert [param for _, param in sig.fields] == ["schema", "model_config"]
    instance = sig.model.model_validate({"schema": "s"})
    assert [getattr(instance, internal) for internal, _ in sig.fields] == ["s", 1]


def test_string_metadata_becomes_the_description_and_other_metadata_is_kept() -> None:
    def f(n: Annotated[int, "how many", Field(ge=1)]) -> None: ...

    schema = build_signature(f, "f").model.model_json_schema(by_alias=True)
    assert schema["properties"]["n"]["description"] == "how many"
    assert schema["properties"]["n"]["minimum"] == 1


@pytest.mark.parametrize(
    "annotation", [ToolContext, ToolContext | None, Annotated[ToolContext, "ctx"]]
)
def test_tool_context_is_recognized_in_its_forms(annotation: Any) -> None:
    def f(x: int, ctx: Any = None) -> None: ...

    f.__annotations__["ctx"] = annotation
    sig = build_signature(f, "f")
    assert sig.context_param == "ctx"
    assert [param for _, param in sig.fields] == ["x"]


def test_var_keyword_allows_extra_arguments() -> None:
    def f(x: int, **rest: Any) -> None: ...

    sig = build_signature(f, "f")
    assert sig.accepts_extra
    assert sig.model.model_validate({"x": 1, "y": 2}).model_extra == {"y": 2}


def test_unannotated_parameters_accept_anything() -> None:
    def f(x, y=3):  # type: ignore[no-untyped-def]
        return None

    instance = build_signature(f, "f").model.model_validate({"x": [1]})
    assert instance.model_dump() == {"f0": [1], "f1": 3}


def test_a_signature_that_cannot_be_read_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="'builtin'"):
        build_signature(print, "builtin")  # print has no readable signature here


def test_clean_schema_drops_titles_but_not_properties_named_title() -> None:
    schema = {
        "title": "Args",
        "type": "object",
        "properties": {"title": {"title": "Title", "type": "string"}},
        "$defs": {"P": {"title": "P", "anyOf": [{"title": "X", "type": "integer"}]}},
        "items": {"title": "I"},
    }
    assert clean_schema(schema) == {
        "type": "object",
        "properties": {"title": {"type": "string"}},
        "$defs": {"P": {"anyOf": [{"type": "integer"}]}},
        "items": {},
    }


def test_first_paragraph_joins_its_lines() -> None:
    doc = """
        Look a word up
        in the dictionary.

        Args:
            word: the word.
    """
    assert first_paragraph(doc) == "Look a word up in the dictionary."
    assert first_paragraph(None) == ""


def test_a_section_header_ends_the_first_paragraph() -> None:
    assert first_paragraph("Convert units.\nArgs:\n    x: value") == "Convert units."


def test_google_style_args_describe_parameters() -> None:
    doc = """Book a table.

    Args:
        people (int): how many guests,
            children included.
        when: the time, ISO 8601.
        **extra: ignored.

    Returns:
        the booking id.
    """
    assert parameter_docs(doc) == {
        "people": "how many guests, children included.",
        "when": "the time, ISO 8601.",
        "extra": "ignored.",
    }
    assert parameter_docs("No sections here.") == {}
    assert parameter_docs(None) == {}


def test_docstring_descriptions_fill_in_but_annotations_win() -> None:
    def book(
        people: int,
        when: Annotated[str, "from the annotation"],
        note: Annotated[str, Field(description="field")] = "",
    ) -> None:
        """Book a table.

        Args:
            people: how many guests.
            when: from the docstring.
            note: from the docstring too.
        """

    properties = build_signature(book, "book").model.model_json_schema(by_alias=True)["properties"]
    assert properties["people"]["description"] == "how many guests."
    assert properties["when"]["description"] == "from the annotation"
    assert properties["note"]["description"] == "field"


def test_a_return_annotation_that_cannot_be_resolved_does_not_matter() -> None:
    # Under `from __future__ import annotations` every annotation is a string; the return
    # type is not part of the schema, so a name only importable under TYPE_CHECKING (or a
    # local class) there must not stop the tool from being built.
    def f(x: int) -> OnlyForTypeCheckers:  # type: ignore[name-defined]  # noqa: F821
        return None

    sig = build_signature(f, "f")
    assert sig.model.model_json_schema()["properties"]["x"]["type"] == "integer"


def test_an_unresolvable_parameter_annotation_names_the_parameter() -> None:
    def f(ok: int, broken: Nowhere) -> None:  # type: ignore[name-defined]  # noqa: F821
        return None

    with pytest.raises(ConfigurationError, match=r"'broken'.*Nowhere"):
        build_signature(f, "f")


def test_a_partial_keeps_the_annotations_of_its_function() -> None:
    def scale(value: float, factor: Annotated[int, "how much"], unit: str = "m") -> str:
        return f"{value * factor}{unit}"

    sig = build_signature(functools.partial(scale, unit="cm"), "scale")
    schema = sig.model.model_json_schema(by_alias=True)
    assert schema["properties"]["value"]["type"] == "number"
    assert schema["properties"]["factor"] == {
        "type": "integer",
        "description": "how much",
        "title": "Factor",
    }
    assert schema["properties"]["unit"]["default"] == "cm"


def test_a_decorated_function_resolves_names_in_its_own_module() -> None:
    def wrapped(point: Annotated[ToolContext | None, "ctx"], n: int) -> None:
        return None

    @functools.wraps(wrapped)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        return wrapped(*args, **kwargs)

    sig = build_signature(wrapper, "w")
    assert sig.context_param == "point"
    assert [param for _, param in sig.fields] == ["n"]


def test_args_whose_types_hold_parentheses_are_still_read() -> None:
    doc = """Plot points.

    Args:
        points (list(tuple(int, int))): where to draw.
        style (str): how.
    """
    assert parameter_docs(doc) == {"points": "where to draw.", "style": "how."}


class Size(BaseModel):
    width: int
    height: int = 1


@dataclasses.dataclass
class Box:
    depth: float
    label: str = "box"


@pytest.mark.parametrize(
    ("cls", "types"), [(Size, ["integer", "integer"]), (Box, ["number", "string"])]
)
def test_a_class_used_as_the_function_keeps_its_field_types(cls: Any, types: list[str]) -> None:
    schema = build_signature(cls, "make").model.model_json_schema(by_alias=True)
    assert [p["type"] for p in schema["properties"].values()] == types
