"""LangChain's `ChatOpenAI` against ``cantata serve``: plain, stream, multi-turn, structured
output, a client tool round trip, a failing agent; a handoff team over two turns (chat
completions and Responses) and a tool approval answered ``yes`` (Responses)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from .conftest import HANDED, need

lc = need("langchain_openai")
messages: Any = need("langchain_core.messages")


class City(BaseModel):
    name: str
    people: int


def _chat(v1: str, model: str = "assistant", **kwargs: Any) -> Any:
    # a client of this test's event loop (LangChain's default one is shared by all loops)
    return lc.ChatOpenAI(
        model=model,
        base_url=v1,
        api_key="unused",
        max_retries=0,
        timeout=30,
        http_async_client=httpx.AsyncClient(timeout=30),
        **kwargs,
    )


async def test_plain_stream_and_multi_turn(v1: str) -> None:
    chat = _chat(v1)
    first = await chat.ainvoke("hello")
    assert first.content == "turn 1: hello"
    pieces = [chunk.content async for chunk in chat.astream("streamed")]
    assert len(pieces) > 2 and "".join(pieces) == "turn 1: streamed"
    history = [messages.HumanMessage("hello"), first, messages.HumanMessage("again")]
    assert (await chat.ainvoke(history)).content == "turn 2: again"


async def test_structured_output(v1: str) -> None:
    city = await _chat(v1).with_structured_output(City).ainvoke("a city?")
    assert city == City(name="Oslo", people=3)


async def test_a_client_tool_round_trip(v1: str) -> None:
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    chat = _chat(v1).bind_tools([get_weather])
    asked = await chat.ainvoke("weather?")
    (call,) = asked.tool_calls
    assert (call["name"], call["args"]) == ("get_weather", {"city": "Oslo"})
    result = messages.ToolMessage(get_weather(**call["args"]), tool_call_id=call["id"])
    answer = await chat.ainvoke([messages.HumanMessage("weather?"), asked, result])
    assert answer.content == "the tool said: sunny in Oslo"


async def test_a_failing_agent(v1: str) -> None:
    import openai

    with pytest.raises(openai.InternalServerError, match="the model server is down"):
        await _chat(v1, "broken").ainvoke("hi")


@pytest.mark.parametrize("responses", [False, True], ids=["chat", "responses"])
async def test_a_handoff_team_keeps_who_it_handed_to_over_two_turns(
    v1: str, responses: bool
) -> None:
    chat = _chat(v1, "desk", use_responses_api=responses)
    first = await chat.ainvoke("Is INV-7 paid?")
    assert first.text == HANDED
    history = [messages.HumanMessage("Is INV-7 paid?"), first, messages.HumanMessage("And INV-8?")]
    assert (await chat.ainvoke(history)).text == "billing: about 'And INV-8?'"


async def test_an_approval_asked_as_text_is_answered_yes_in_the_message_list(v1: str) -> None:
    chat = _chat(v1, "support", use_responses_api=True)
    asked = await chat.ainvoke("refund order 1001")
    assert asked.text.startswith('approve the call of `refund` with {"order": 1001}?')
    assert "(waiting in resp_" in asked.text
    history = [messages.HumanMessage("refund order 1001"), asked, messages.HumanMessage("yes")]
    assert (await chat.ainvoke(history)).text == "Done: refunded order 1001"
