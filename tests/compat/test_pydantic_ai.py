"""pydantic-ai's OpenAI chat model against ``cantata serve``: plain, stream, multi-turn,
structured output (its default: an output tool), a tool round trip, a failing agent."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from .conftest import HANDED, need

pai: Any = need("pydantic_ai")
models: Any = need("pydantic_ai.models.openai")
providers: Any = need("pydantic_ai.providers.openai")


class City(BaseModel):
    name: str
    people: int


def _agent(v1: str, name: str = "assistant", **kwargs: Any) -> Any:
    provider = providers.OpenAIProvider(base_url=v1, api_key="unused")
    return pai.Agent(models.OpenAIChatModel(name, provider=provider), **kwargs)


async def test_plain_stream_and_multi_turn(v1: str) -> None:
    agent = _agent(v1)
    first = await agent.run("hello")
    assert first.output == "turn 1: hello"
    again = await agent.run("again", message_history=first.all_messages())
    assert again.output == "turn 2: again"
    async with agent.run_stream("streamed") as streamed:
        pieces = [p async for p in streamed.stream_text(delta=True, debounce_by=None)]
    assert len(pieces) > 2 and "".join(pieces) == "turn 1: streamed"


async def test_structured_output(v1: str) -> None:
    result = await _agent(v1, output_type=City).run("a city?")
    assert result.output == City(name="Oslo", people=3)


async def test_a_tool_round_trip(v1: str) -> None:
    agent = _agent(v1)
    ran: list[str] = []

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """The weather in a city."""
        ran.append(city)
        return f"sunny in {city}"

    result = await agent.run("weather?")
    assert ran == ["Oslo"]
    assert result.output == "the tool said: sunny in Oslo"


async def test_a_failing_agent(v1: str) -> None:
    with pytest.raises(Exception, match="the model server is down") as info:
        await _agent(v1, "broken").run("hi")
    assert "500" in str(info.value) or getattr(info.value, "status_code", None) == 500


async def test_a_handoff_team_keeps_who_it_handed_to_over_two_turns(v1: str) -> None:
    agent = _agent(v1, "desk")
    first = await agent.run("Is INV-7 paid?")
    assert first.output == HANDED
    again = await agent.run("And INV-8?", message_history=first.all_messages())
    assert again.output == "billing: about 'And INV-8?'"
