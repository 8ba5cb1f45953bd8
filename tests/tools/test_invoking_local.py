"""The function loop on the embedded local model, for real (marker ``local_model``): the
model calls a real `@tool` through grammar-constrained JSON, the tool runs, and the model
answers in text."""

from __future__ import annotations

from typing import Annotated

import pytest

from cantata.core import Message
from cantata.models import ChatOptions, ChatResponse, LocalChatClient
from cantata.tools import FunctionInvokingChatClient, tool

asked: list[str] = []


@tool
def get_weather(city: Annotated[str, "the city to look up"]) -> dict[str, str]:
    """Current weather of a city."""
    asked.append(city)
    return {"city": city, "sky": "sunny", "temperature": "21 C"}


@pytest.mark.local_model
async def test_the_local_model_calls_a_tool_and_answers_streaming() -> None:
    asked.clear()
    client = FunctionInvokingChatClient(LocalChatClient(), tools=[get_weather], max_iterations=1)
    messages = [Message("user", "What is the weather in Paris?")]
    options = ChatOptions(temperature=0.0, seed=1, max_tokens=32, tool_choice="required")
    updates = [u async for u in client.get_streaming_response(messages, options=options)]
    response = ChatResponse.from_updates(updates)

    assert len(asked) == 1  # the tool really ran, once
    roles = [m.role for m in response.messages]
    assert roles == ["assistant", "tool", "assistant"]
    [call] = response.messages[0].function_calls
    assert call.name == "get_weather"
    [result] = response.messages[1].function_results
    assert result.call_id == call.call_id and result.error is None
    assert result.result["sky"] == "sunny"
    assert response.messages[-1].function_calls == []  # the last answer is text
