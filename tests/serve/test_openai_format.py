"""Structured output through the official `openai` client on a real server: the client's
``response_format`` / ``text.format`` reaches the served agent's model call, and the answer
is its JSON alone."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest
from openai import AsyncOpenAI

from cantata.agents import ChatAgent
from cantata.core import FunctionResultContent, Message, TextContent
from cantata.models import ChatOptions, ScriptedChatClient, tool_call
from cantata.stores import MemoryStore
from cantata.teams import GroupChat
from cantata.tools import tool

from ._servers import echo_agent, serving

CITY = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "people": {"type": "integer"}},
    "required": ["city", "people"],
    "additionalProperties": False,
}


@tool
def population(city: str) -> int:
    """How many people live in a city."""
    return 709_000


def _census(messages: list[Message], options: ChatOptions) -> Any:
    """Looks the number up (saying so first), then answers in the format it was given,
    naming it; in prose without one."""
    results = [c.result for m in messages for c in m.contents if type(c) is FunctionResultContent]
    if not results:
        return [TextContent("Let me look that up."), tool_call("population", {"city": "Oslo"})]
    fmt = options.response_format
    if fmt is None:
        return f"Oslo has {results[0]} people."
    assert isinstance(fmt, dict)
    if fmt.get("title") == "json_object":
        return json.dumps({"answer": results[0]})
    return json.dumps({"city": f"Oslo ({fmt['title']})", "people": results[0]})


@pytest.fixture
async def url() -> AsyncIterator[str]:
    agent = ChatAgent(ScriptedChatClient(_census, chunk_size=5), name="census", tools=[population])
    team = GroupChat([echo_agent("first"), echo_agent("second")], name="pair", max_turns=2)
    async with MemoryStore() as store, serving([agent, team], store=store) as base:
        yield base


def _client(url: str) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=30)


SCHEMA_FORMAT: Any = {
    "type": "json_schema",
    "json_schema": {"name": "City", "schema": CITY, "strict": True},
}
ASK = [{"role": "user", "content": "How many people live in Oslo?"}]


async def test_a_json_schema_reaches_the_model_and_the_answer_is_its_json(url: str) -> None:
    async with _client(url) as client:
        answer = await client.chat.completions.create(
            model="census", messages=ASK, response_format=SCHEMA_FORMAT
        )
        # the text said before the tool call is not part of the answer: it would not parse
        assert json.loads(answer.choices[0].message.content or "") == {
            "city": "Oslo (City)",
            "people": 709_000,
        }
        obj = await client.chat.completions.create(
            model="census", messages=ASK, response_format={"type": "json_object"}
        )
        assert json.loads(obj.choices[0].message.content or "") == {"answer": 709_000}
        prose = await client.chat.completions.create(
            model="census", messages=ASK, response_format={"type": "text"}
        )
        assert prose.choices[0].message.content == (
            "Let me look that up.\n\nOslo has 709000 people."
        )


async def test_a_streamed_structured_answer_is_its_json(url: str) -> None:
    async with _client(url) as client:
        stream = await client.chat.completions.create(
            model="census", messages=ASK, response_format=SCHEMA_FORMAT, stream=True
        )
        text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
        assert json.loads(text) == {"city": "Oslo (City)", "people": 709_000}
        events = await client.responses.create(
            model="census",
            input="How many?",
            text={"format": {"type": "json_schema", "name": "Town", "schema": CITY}},
            stream=True,
        )
        deltas = [e.delta async for e in events if e.type == "response.output_text.delta"]
        assert json.loads("".join(deltas)) == {"city": "Oslo (Town)", "people": 709_000}


async def test_text_format_of_the_responses_api(url: str) -> None:
    async with _client(url) as client:
        reply = await client.responses.create(
            model="census",
            input="How many?",
            text={"format": {"type": "json_schema", "name": "Town", "schema": CITY}},
        )
        assert json.loads(reply.output_text) == {"city": "Oslo (Town)", "people": 709_000}
        assert reply.text.format.type == "json_schema"  # type: ignore[union-attr]
        assert reply.text.format.name == "Town"  # type: ignore[union-attr]


async def test_a_format_a_served_kind_cannot_honour_is_a_400(url: str) -> None:
    async with _client(url) as client:
        with pytest.raises(openai.BadRequestError, match="cannot be honoured by 'pair'"):
            await client.chat.completions.create(
                model="pair", messages=ASK, response_format=SCHEMA_FORMAT
            )
        with pytest.raises(openai.BadRequestError, match="cannot be honoured by 'pair'"):
            await client.responses.create(
                model="pair", input="x", text={"format": {"type": "json_object"}}
            )
        for bad, match in (
            ({"type": "yaml"}, "must be text, json_object or json_schema"),
            ({"type": "json_schema", "json_schema": {"name": "X"}}, "schema must be a JSON"),
        ):
            with pytest.raises(openai.BadRequestError, match=match):
                await client.chat.completions.create(
                    model="census",
                    messages=ASK,
                    response_format=bad,  # type: ignore[arg-type]
                )
