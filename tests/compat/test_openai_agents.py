"""The OpenAI Agents SDK against ``cantata serve`` (its Responses model, and its chat
completions model): plain, stream, multi-turn, structured output, a function tool round
trip, a failing agent."""

from __future__ import annotations

from typing import Any

import pytest
from openai import AsyncOpenAI
from pydantic import BaseModel

from .conftest import HANDED, need

sdk: Any = need("agents")


class City(BaseModel):
    name: str
    people: int


def _model(v1: str, name: str = "assistant", *, chat: bool = False) -> Any:
    client = AsyncOpenAI(base_url=v1, api_key="unused", max_retries=0, timeout=30)
    kind = sdk.OpenAIChatCompletionsModel if chat else sdk.OpenAIResponsesModel
    return kind(model=name, openai_client=client)


def _agent(v1: str, **kwargs: Any) -> Any:
    return sdk.Agent(name="caller", model=_model(v1), **kwargs)


async def test_plain_stream_and_multi_turn(v1: str) -> None:
    first = await sdk.Runner.run(_agent(v1), "hello")
    assert first.final_output == "turn 1: hello"
    # client-held history: the whole conversation sent again
    again = await sdk.Runner.run(_agent(v1), [*first.to_input_list(), _user("again")])
    assert again.final_output == "turn 2: again"
    # the server's thread: previous_response_id
    kept = await sdk.Runner.run(_agent(v1), "more", previous_response_id=first.last_response_id)
    assert kept.final_output == "turn 2: more"
    streamed = sdk.Runner.run_streamed(_agent(v1), "streamed")
    deltas = [
        e.data.delta
        async for e in streamed.stream_events()
        if e.type == "raw_response_event" and e.data.type == "response.output_text.delta"
    ]
    assert len(deltas) > 2 and "".join(deltas) == "turn 1: streamed"
    assert streamed.final_output == "turn 1: streamed"
    chat = sdk.Agent(name="caller", model=_model(v1, chat=True))
    assert (await sdk.Runner.run(chat, "via chat")).final_output == "turn 1: via chat"


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


async def test_structured_output(v1: str) -> None:
    result = await sdk.Runner.run(_agent(v1, output_type=City), "a city?")
    assert result.final_output == City(name="Oslo", people=3)


async def test_a_function_tool_round_trip(v1: str) -> None:
    ran: list[str] = []

    @sdk.function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        ran.append(city)
        return f"sunny in {city}"

    result = await sdk.Runner.run(_agent(v1, tools=[get_weather]), "weather?")
    assert ran == ["Oslo"]
    assert result.final_output == "the tool said: sunny in Oslo"


async def test_a_failing_agent(v1: str) -> None:
    import openai

    broken = sdk.Agent(name="caller", model=_model(v1, "broken"))
    with pytest.raises(openai.InternalServerError, match="the model server is down"):
        await sdk.Runner.run(broken, "hi")


async def test_a_handoff_team_keeps_who_it_handed_to_over_two_turns(v1: str) -> None:
    desk = sdk.Agent(name="caller", model=_model(v1, "desk"))
    first = await sdk.Runner.run(desk, "Is INV-7 paid?")
    assert first.final_output == HANDED
    held = await sdk.Runner.run(desk, [*first.to_input_list(), _user("And INV-8?")])
    assert held.final_output == "billing: about 'And INV-8?'"
    kept = await sdk.Runner.run(desk, "And INV-9?", previous_response_id=first.last_response_id)
    assert kept.final_output == "billing: about 'And INV-9?'"
