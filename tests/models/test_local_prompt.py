"""The prompts and grammars that make the local model call tools: pure logic, no model."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

from cantata.core import (
    ConfigurationError,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    ModelOutputError,
)
from cantata.models import ChatOptions, ToolSpec
from cantata.models._local_prompt import (
    parse_envelope,
    plan_request,
    render_messages,
    tool_envelope_schema,
)

WEATHER = ToolSpec(
    "get_weather",
    "Weather of a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


class Inner(BaseModel):
    x: int


class Outer(BaseModel):
    inner: Inner
    items: list[Inner]


def test_plain_request_has_no_grammar_and_keeps_messages() -> None:
    plan = plan_request([Message("user", "hi")], ChatOptions())
    assert plan.schema is None and not plan.tools_mode
    assert plan.messages == [{"role": "user", "content": "hi"}]


def test_auto_offers_each_tool_and_an_answer() -> None:
    schema = tool_envelope_schema([WEATHER], must_call=False, fmt=None)
    tool, answer = schema["anyOf"]
    assert tool["properties"]["tool"] == {"const": "get_weather"}
    assert tool["properties"]["arguments"] == WEATHER.parameters
    assert answer["properties"]["answer"] == {"type": "string"}


def test_required_and_named_choices_must_call() -> None:
    other = ToolSpec("other", "d", {"type": "object", "properties": {}})
    required = plan_request(
        [Message("user", "x")], ChatOptions(tools=[WEATHER, other], tool_choice="required")
    )
    assert required.schema is not None
    assert all("tool" in alt["properties"] for alt in required.schema["anyOf"])
    named = plan_request(
        [Message("user", "x")], ChatOptions(tools=[WEATHER, other], tool_choice="other")
    )
    assert named.schema is not None
    assert named.schema["properties"]["tool"] == {"const": "other"}
    assert "get_weather" not in named.messages[0]["content"]


def test_none_choice_means_plain_text() -> None:
    plan = plan_request([Message("user", "x")], ChatOptions(tools=[WEATHER], tool_choice="none"))
    assert plan.schema is None and not plan.tools_mode


def test_unknown_tool_choice_names_the_tools() -> None:
    with pytest.raises(ConfigurationError, match="'get_weather'"):
        plan_request([Message("user", "x")], ChatOptions(tools=[WEATHER], tool_choice="nope"))


def test_tool_prompt_joins_an_existing_system_message() -> None:
    plan = plan_request(
        [Message("system", "Be kind."), Message("user", "x")], ChatOptions(tools=[WEATHER])
    )
    assert plan.messages[0]["role"] == "system"
    assert plan.messages[0]["content"].startswith("Be kind.\n\n")
    assert "get_weather" in plan.messages[0]["content"]
    assert len(plan.messages) == 2


def test_defs_of_pydantic_schemas_are_hoisted_and_refs_rewritten() -> None:
    spec = ToolSpec("put", "d", Outer.model_json_schema())
    schema = tool_envelope_schema([spec], must_call=True, fmt=Outer)
    assert set(schema["$defs"]) == {"t0_Inner"}
    text = json.dumps(schema)
    assert '"#/$defs/t0_Inner"' in text and '"#/$defs/Inner"' not in text
    with_answer = tool_envelope_schema([spec], must_call=False, fmt=Outer)
    assert set(with_answer["$defs"]) == {"t0_Inner", "answer_Inner"}


def test_structured_output_uses_the_format_schema() -> None:
    plan = plan_request([Message("user", "x")], ChatOptions(response_format=Inner))
    assert plan.schema == Inner.model_json_schema()
    assert not plan.tools_mode
    assert "Inner" in plan.messages[0]["content"]


def test_history_renders_calls_as_envelopes_and_results_as_user_turns() -> None:
    rendered = render_messages(
        [
            Message("assistant", [FunctionCallContent("c1", "get_weather", {"city": "Oslo"})]),
            Message("tool", [FunctionResultContent("c1", {"t": 3})]),
            Message("tool", [FunctionResultContent("c2", error="down")]),
        ]
    )
    assert rendered[0] == {
        "role": "assistant",
        "content": '{"tool": "get_weather", "arguments": {"city": "Oslo"}}',
    }
    assert rendered[1] == {
        "role": "user",
        "content": 'Result of get_weather (call c1): {"t": 3}',
    }
    assert rendered[2]["content"] == "Result of the tool (call c2): Error: down"


def test_envelope_parsing() -> None:
    assert parse_envelope('{"tool": "f", "arguments": {"a": 1}}', finish_reason="stop") == (
        "f",
        {"a": 1},
    )
    assert parse_envelope('{"answer": "hi"}', finish_reason="stop") == (None, "hi")
    with pytest.raises(ModelOutputError, match="max_tokens"):
        parse_envelope('{"tool": "f", "argu', finish_reason="length")
    with pytest.raises(ModelOutputError, match="neither"):
        parse_envelope("[1, 2]", finish_reason="stop")
