"""FunctionTool and @tool: names, descriptions, schemas, validation, sync/async running."""

from __future__ import annotations

import asyncio
import enum
import threading
from collections.abc import Callable
from typing import Annotated, Any, Literal, Optional, Union

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from cantata.core import ConfigurationError, ToolError
from cantata.models import ToolSpec
from cantata.tools import (
    FunctionTool,
    ToolArgumentsError,
    ToolContext,
    ToolMethod,
    ToolSchemaError,
    plugin_tools,
    tool,
)


class Point(BaseModel):
    x: int
    y: int = 0


@tool
def add(
    a: Annotated[int, "the first number"], b: Annotated[int, Field(description="second")] = 2
) -> int:
    """Add two integers.

    The rest of this docstring is not part of the description.
    """
    return a + b


@tool(name="move-point", description="Move a point.", approval_mode="always_require")
async def move(point: Point, dx: int = 1) -> Point:
    return Point(x=point.x + dx, y=point.y)


def test_name_and_description_come_from_the_function() -> None:
    assert add.name == "add"
    assert add.description == "Add two integers."
    assert not add.requires_approval


def test_decorator_options_override_name_description_and_approval() -> None:
    assert move.name == "move-point"
    assert move.description == "Move a point."
    assert move.requires_approval
    assert move.approval_mode == "always_require"


def test_annotated_descriptions_and_defaults_reach_the_schema() -> None:
    schema = add.parameters
    assert schema["type"] == "object"
    assert schema["required"] == ["a"]
    assert schema["properties"]["a"] == {"type": "integer", "description": "the first number"}
    assert schema["properties"]["b"] == {"type": "integer", "description": "second", "default": 2}
    assert schema["additionalProperties"] is False


def test_pydantic_parameters_are_referenced_in_the_schema() -> None:
    schema = move.parameters
    assert schema["properties"]["point"] == {"$ref": "#/$defs/Point"}
    assert schema["$defs"]["Point"]["required"] == ["x"]
    assert "title" not in schema["$defs"]["Point"]


def test_spec_is_a_tool_spec_with_a_private_copy_of_the_schema() -> None:
    spec = add.spec
    assert spec == ToolSpec("add", "Add two integers.", add.parameters)
    spec.parameters["properties"].clear()
    assert add.parameters["properties"]  # the tool itself did not change


def test_a_property_named_title_survives_title_cleaning() -> None:
    @tool
    def publish(title: str, json: str = "{}") -> str:
        """Publish."""
        return title + json

    assert set(publish.parameters["properties"]) == {"title", "json"}


def test_tool_context_parameter_is_not_in_the_schema() -> None:
    @tool
    def whoami(greeting: str, ctx: ToolContext) -> str:
        """Greet."""
        return f"{greeting} {ctx.kwargs['user']}"

    assert set(whoami.parameters["properties"]) == {"greeting"}


async def test_tool_context_is_injected() -> None:
    @tool
    async def whoami(greeting: str, ctx: ToolContext | None = None) -> str:
        """Greet."""
        assert ctx is not None
        return f"{greeting} {ctx.kwargs['user']} {ctx.call_id}"

    context = ToolContext(kwargs={"user": "ada"}, call_id="c1")
    assert await whoami.invoke({"greeting": "hi"}, context=context) == "hi ada c1"


async def test_a_default_tool_context_is_made_when_none_is_given() -> None:
    @tool
    def name_of(ctx: ToolContext) -> str | None:
        """Name."""
        return ctx.tool_name

    assert await name_of.invoke({}) == "name_of"


async def test_invoke_validates_and_converts_arguments() -> None:
    assert await add.invoke({"a": "40"}) == 42
    moved = await move.invoke({"point": {"x": 1}, "dx": 2})
    assert moved == Point(x=3, y=0)


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        ({}, "a: Field required"),
        ({"a": "x"}, "a: Input should be a valid integer"),
        ({"a": 1, "c": 3}, "c: Extra inputs are not permitted"),
        ({"a": [1]}, "a: Input should be a valid integer"),
    ],
)
async def test_invalid_arguments_raise_a_tool_arguments_error(
    arguments: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(ToolArgumentsError) as info:
        await add.invoke(arguments)
    assert isinstance(info.value, ToolError)
    assert info.value.tool_name == "add"
    assert fragment in str(info.value)
    assert "'add'" in str(info.value)
    assert any(fragment in problem for problem in info.value.errors)


async def test_arguments_that_are_not_a_mapping_are_refused() -> None:
    with pytest.raises(ToolArgumentsError, match="must be a JSON object"):
        await add.invoke([1, 2])  # type: ignore[arg-type]


async def test_sync_functions_run_in_a_worker_thread() -> None:
    @tool
    def where() -> str:
        """Which thread runs me."""
        return threading.current_thread().name

    assert await where.invoke({}) != threading.current_thread().name


async def test_a_sync_function_does_not_block_the_event_loop() -> None:
    started = threading.Event()
    release = threading.Event()

    @tool
    def blocking() -> str:
        """Wait for the event loop to release me."""
        started.set()
        if not release.wait(timeout=10):
            raise RuntimeError("never released")
        return "done"

    task = asyncio.ensure_future(blocking.invoke({}))
    await asyncio.to_thread(started.wait, 10)
    release.set()  # only possible because the loop kept running while the tool waited
    assert await task == "done"


async def test_the_tool_object_still_calls_the_function_directly() -> None:
    assert add(1, 2) == 3
    assert await move(Point(x=0), 5) == Point(x=5)


async def test_function_tool_built_directly_with_an_explicit_schema() -> None:
    schema = {
        "type": "object",
        "properties": {"query": {"type": "string", "description": "what to look for"}},
        "required": ["query"],
    }

    async def search(**kwargs: Any) -> list[str]:
        return [kwargs["query"].upper()]

    search_tool = FunctionTool("search", "Search the notes.", func=search, parameters=schema)
    assert search_tool.parameters == schema
    assert search_tool.spec.description == "Search the notes."
    assert await search_tool.invoke({"query": "cats"}) == ["CATS"]
    with pytest.raises(ToolArgumentsError, match="query: field required"):
        await search_tool.invoke({})


async def test_function_tool_with_a_pydantic_model_as_schema() -> None:
    def plot(x: int, y: int = 0) -> str:
        return f"{x},{y}"

    plot_tool = FunctionTool("plot", "Plot.", func=plot, parameters=Point)
    assert plot_tool.parameters["required"] == ["x"]
    assert await plot_tool.invoke({"x": 3}) == "3,0"


async def test_positional_only_parameters_are_passed_positionally() -> None:
    def scale(value: float, /, factor: float = 2.0) -> float:
        return value * factor

    scale_tool = FunctionTool("scale", "Scale.", func=scale)
    assert await scale_tool.invoke({"value": 1.5, "factor": 3}) == 4.5

    def tagged(ctx: ToolContext, label: str, /) -> str:
        return f"{ctx.call_id}:{label}"

    tagged_tool = FunctionTool("tagged", func=tagged)
    assert await tagged_tool.invoke({"label": "x"}, context=ToolContext(call_id="c")) == "c:x"


async def test_callable_objects_and_awaitable_results_are_supported() -> None:
    class Counter:
        async def __call__(self, step: int) -> int:
            return step + 1

    def later(n: int) -> Any:
        async def value() -> int:
            return n * 10

        return value()

    assert await FunctionTool("count", func=Counter()).invoke({"step": 1}) == 2
    assert await FunctionTool("later", func=later).invoke({"n": 4}) == 40


@pytest.mark.parametrize("name", ["", "has space", "dots.not.allowed", "x" * 65, "ünïcode"])
def test_invalid_tool_names_are_refused(name: str) -> None:
    with pytest.raises(ConfigurationError, match="invalid tool name"):
        FunctionTool(name, func=lambda: None)


def test_valid_names_up_to_64_characters_are_accepted() -> None:
    assert FunctionTool("a-B_9" + "x" * 59, func=lambda: None).name.endswith("x")


def test_a_lambda_needs_an_explicit_name_to_be_valid() -> None:
    with pytest.raises(ConfigurationError, match="<lambda>"):
        tool(lambda: None)


def test_var_positional_parameters_are_refused() -> None:
    def spread(*values: int) -> int:
        return sum(values)

    with pytest.raises(ConfigurationError, match=r"\*values"):
        tool(spread)


def test_unknown_approval_mode_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="approval_mode"):
        FunctionTool("x", func=lambda: None, approval_mode="sometimes")  # type: ignore[arg-type]


def test_unresolvable_annotations_are_a_configuration_error() -> None:
    def broken(value: NotDefinedAnywhere) -> None:  # type: ignore[name-defined]  # noqa: F821
        return None

    with pytest.raises(ConfigurationError, match="cannot resolve"):
        tool(broken)


def test_a_bad_required_list_in_an_explicit_schema_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="required"):
        FunctionTool("x", func=lambda: None, parameters={"type": "object", "required": "a"})


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=150, deadline=None)
@given(
    arguments=st.dictionaries(
        st.sampled_from(["a", "b", "c", "point", "dx"]) | st.text(max_size=6),
        json_values,
        max_size=4,
    )
)
async def test_fuzzed_arguments_either_run_or_raise_a_typed_error(
    arguments: dict[str, Any],
) -> None:
    for target in (add, move):
        try:
            await target.invoke(arguments)
        except ToolArgumentsError as exc:
            assert exc.errors
            assert target.name in str(exc)


def test_generator_functions_are_refused_with_what_to_do() -> None:
    # called, a generator function returns a generator without running its body: the
    # model would read "<generator object ...>" and the tool would never have run
    def numbers(n: int) -> Any:
        yield from range(n)

    async def stream(n: int) -> Any:
        yield n

    for func in (numbers, stream):
        with pytest.raises(ConfigurationError, match=r"generator.*return a list"):
            tool(func)


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Address(BaseModel):
    """Where someone lives."""

    city: str
    zip: str | None = None


class Person(BaseModel):
    name: str
    addresses: list[Address] = []


@tool
def register(
    person: Person,
    color: Color = Color.RED,
    mode: Literal["fast", "safe"] = "safe",
    limit: Optional[int] = None,  # noqa: UP045 - the spelling under test
    key: Union[int, str] = 0,  # noqa: UP007 - the spelling under test
    tags: list[str] | None = None,
    scores: dict[str, float] | None = None,
) -> str:
    """Register a person.

    Args:
        person: who.
        color: favourite colour.
    """
    return f"{person.name} {color.value} {mode} {limit} {key!r} {tags} {scores}"


def test_schemas_of_common_annotation_forms() -> None:
    schema = register.parameters
    props = schema["properties"]
    assert schema["required"] == ["person"]
    assert props["person"] == {"$ref": "#/$defs/Person", "description": "who."}
    assert schema["$defs"]["Address"]["description"] == "Where someone lives."
    assert props["color"]["default"] == "red"
    assert schema["$defs"]["Color"] == {"enum": ["red", "blue"], "type": "string"}
    assert props["mode"] == {"default": "safe", "enum": ["fast", "safe"], "type": "string"}
    assert props["limit"] == {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None}
    assert props["key"]["anyOf"] == [{"type": "integer"}, {"type": "string"}]
    assert props["tags"]["anyOf"][0] == {"items": {"type": "string"}, "type": "array"}
    assert props["scores"]["anyOf"][0] == {
        "additionalProperties": {"type": "number"},
        "type": "object",
    }


async def test_arguments_of_common_annotation_forms_are_converted() -> None:
    arguments = {
        "person": {"name": "Ada", "addresses": [{"city": "London"}]},
        "color": "blue",
        "limit": 3,
        "key": "k",
        "scores": {"x": 1},
    }
    assert await register.invoke(arguments) == "Ada blue safe 3 'k' None {'x': 1.0}"
    with pytest.raises(ToolArgumentsError, match="mode"):
        await register.invoke({"person": {"name": "Ada"}, "mode": "reckless"})


def test_a_method_decorated_in_its_class_is_a_tool_of_each_instance() -> None:
    class Directory:
        def __init__(self, prefix: str) -> None:
            self.prefix = prefix

        @tool
        def lookup(self, name: str) -> str:
            """Find a name."""
            return self.prefix + name

    assert isinstance(Directory.lookup, ToolMethod)
    first, second = Directory("a:"), Directory("b:")
    bound = first.lookup
    assert isinstance(bound, FunctionTool) and not isinstance(bound, ToolMethod)
    assert first.lookup is bound  # made once per instance
    assert set(bound.parameters["properties"]) == {"name"}  # no "self"
    assert bound.description == "Find a name."
    assert bound("x") == "a:x" and second.lookup("x") == "b:x"
    assert Directory.lookup(first, "y") == "a:y"  # the plain method still works


async def test_bound_tool_methods_run_on_their_instance() -> None:
    class Counter:
        def __init__(self) -> None:
            self.count = 0

        @tool(name="bump", approval_mode="always_require")
        async def increase(self, by: int = 1) -> int:
            self.count += by
            return self.count

    counter = Counter()
    assert counter.increase.requires_approval and counter.increase.name == "bump"
    assert await counter.increase.invoke({"by": 2}) == 2
    assert counter.count == 2


def test_plugin_tools_lists_bound_methods_static_and_class_tools_subclass_first() -> None:
    @tool
    def shared(x: int) -> int:
        """A module tool kept on the class."""
        return x

    class Base:
        helper = shared

        @tool
        def soup(self) -> str:
            """Soup of the day."""
            return "base soup"

        @staticmethod
        @tool
        def hours() -> str:
            """Opening hours."""
            return "9-5"

    class Menu(Base):
        @tool
        def soup(self) -> str:
            """Soup of the day."""
            return "menu soup"

        def not_a_tool(self) -> None:
            pass

    menu = Menu()
    found = {t.name: t for t in plugin_tools(menu)}
    assert set(found) == {"soup", "shared", "hours"}
    assert found["soup"]() == "menu soup"  # the subclass's method hides the base's
    assert found["hours"]() == "9-5" and found["shared"] is shared
    assert plugin_tools(Menu) == [] and plugin_tools(object()) == []


def test_a_tool_method_read_from_its_class_is_refused_by_the_loop() -> None:
    class Menu:
        @tool
        def soup(self) -> str:
            """Soup of the day."""
            return "soup"

    from cantata.models import ScriptedChatClient
    from cantata.tools import FunctionInvokingChatClient

    with pytest.raises(ConfigurationError, match="pass the instance"):
        FunctionInvokingChatClient(ScriptedChatClient([]), tools=[Menu.soup])


def test_a_classmethod_style_tool_is_still_refused_with_what_to_do() -> None:
    with pytest.raises(ConfigurationError, match="method"):

        class Directory:
            @tool
            def lookup(cls, name: str) -> str:
                """Find a name."""
                return name


class _Plain:
    """A class pydantic can check by isinstance but not describe as JSON."""


@pytest.mark.parametrize(
    ("annotation", "shown"),
    [
        (_Plain, "_Plain"),
        (asyncio.Queue, "asyncio.queues.Queue"),
        (Callable[[int], int], "Callable"),
    ],
)
def test_a_parameter_type_without_json_schema_names_the_tool_and_parameter(
    annotation: Any, shown: str
) -> None:
    def handle(count: int, thing: Any) -> int:
        return count

    handle.__annotations__["thing"] = annotation
    with pytest.raises(ToolSchemaError) as caught:
        tool(handle)
    error = caught.value
    assert isinstance(error, ConfigurationError)
    assert (error.tool_name, error.parameter) == ("handle", "thing")
    text = str(error)
    assert "tool 'handle'" in text and "parameter 'thing'" in text and shown in text
    assert "str, int, float, bool" in text and "ToolContext" in text


def test_a_type_without_json_schema_is_fine_with_an_explicit_schema() -> None:
    def handle(thing: _Plain) -> str:
        return "ok"

    made = FunctionTool("handle", func=handle, parameters={"type": "object", "properties": {}})
    assert made.parameters == {"type": "object", "properties": {}}
