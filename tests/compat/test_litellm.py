"""litellm's ``openai/`` provider against ``cantata serve``: plain, stream, multi-turn,
structured output, a tool round trip, a failing agent (its stream too: it ends with the
error, not a dropped connection)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from .conftest import HANDED, need

litellm: Any = need("litellm")

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


async def _ask(v1: str, messages: list[dict[str, Any]], model: str = "assistant", **kw: Any) -> Any:
    return await litellm.acompletion(
        model=f"openai/{model}", api_base=v1, api_key="unused", messages=messages, **kw
    )


async def test_plain_stream_and_multi_turn(v1: str) -> None:
    ask = [{"role": "user", "content": "hello"}]
    first = await _ask(v1, ask)
    said = first.choices[0].message.content
    assert said == "turn 1: hello"
    again = await _ask(v1, [*ask, {"role": "assistant", "content": said}, _user("again")])
    assert again.choices[0].message.content == "turn 2: again"
    stream = await _ask(v1, [_user("streamed")], stream=True)
    pieces = [c.choices[0].delta.content or "" async for c in stream]
    assert "".join(pieces) == "turn 1: streamed"


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


async def test_structured_output(v1: str) -> None:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "people": {"type": "integer"}},
        "required": ["name", "people"],
    }
    answer = await _ask(
        v1,
        [_user("a city?")],
        response_format={"type": "json_schema", "json_schema": {"name": "City", "schema": schema}},
    )
    assert json.loads(answer.choices[0].message.content) == {"name": "Oslo", "people": 3}


async def test_a_tool_round_trip(v1: str) -> None:
    ask = [_user("weather?")]
    asked = await _ask(v1, ask, tools=[WEATHER])
    assert asked.choices[0].finish_reason == "tool_calls"
    (call,) = asked.choices[0].message.tool_calls
    assert (call.function.name, json.loads(call.function.arguments)) == (
        "get_weather",
        {"city": "Oslo"},
    )
    history = [
        *ask,
        asked.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "sunny"},
    ]
    answer = await _ask(v1, history, tools=[WEATHER])
    assert answer.choices[0].message.content == "the tool said: sunny"


async def test_a_failing_agent(v1: str) -> None:
    with pytest.raises(litellm.InternalServerError, match="the model server is down"):
        await _ask(v1, [_user("hi")], model="broken")
    stream = await _ask(v1, [_user("hi")], model="broken", stream=True)
    # litellm files any error in a stream as a mid-stream one, with the server's message
    with pytest.raises(litellm.exceptions.MidStreamFallbackError, match="the model server is"):
        async for _ in stream:
            pass


async def test_a_handoff_team_keeps_who_it_handed_to_over_two_turns(v1: str) -> None:
    ask = {"role": "user", "content": "Is INV-7 paid?"}
    first = await _ask(v1, [ask], "desk")
    said = first.choices[0].message.content
    assert said == HANDED
    follow = [
        ask,
        {"role": "assistant", "content": said},
        {"role": "user", "content": "And INV-8?"},
    ]
    again = await _ask(v1, follow, "desk")
    assert again.choices[0].message.content == "billing: about 'And INV-8?'"
