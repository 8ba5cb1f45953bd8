"""Tools a client sends, through the official `openai` client on a real server: declared to
the served agent's model, their calls answered by the client on its next request, while
the agent's own tools run on the server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import openai
import pytest
from openai import AsyncOpenAI

from cantata.agents import ChatAgent
from cantata.core import FunctionResultContent, Message
from cantata.models import ChatOptions, ScriptedChatClient, tool_call
from cantata.stores import MemoryStore
from cantata.teams import GroupChat
from cantata.tools import tool

from ._servers import echo_agent, serving

WEATHER = {
    "type": "function",
    "function": {
        "name": "weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


@tool
def population(city: str) -> int:
    """How many people live in a city."""
    return {"Oslo": 709_000}.get(city, 0)


def _forecaster(messages: list[Message], options: ChatOptions) -> Any:
    """Asks its own tool first, then the client's ``weather`` (when offered and allowed),
    then answers with both results; says what it was offered when it cannot call."""
    offered = sorted(t.name for t in options.tools or ())
    results = {
        c.call_id: c.result
        for m in messages
        for c in m.contents
        if type(c) is FunctionResultContent
    }
    if "weather" not in offered or options.tool_choice == "none":
        return f"no weather tool (offered {offered}, choice {options.tool_choice})"
    if "pop" not in results and not any(k.startswith("call_w") for k in results):
        return tool_call("population", {"city": "Oslo"}, call_id="pop")
    weather = next((v for k, v in results.items() if k.startswith("call_w")), None)
    if weather is None:
        return tool_call("weather", {"city": "Oslo"}, call_id="call_w1")
    return f"Oslo ({results.get('pop', '?')} people): {weather}"


def _roles(messages: list[Message], options: ChatOptions) -> str:
    return " | ".join(f"{m.role}:{m.text}" for m in messages)


@pytest.fixture
async def url() -> AsyncIterator[str]:
    agent = ChatAgent(ScriptedChatClient(_forecaster), name="forecaster", tools=[population])
    team = GroupChat([echo_agent("first"), echo_agent("second")], name="pair", max_turns=2)
    roles = ChatAgent(ScriptedChatClient(_roles), name="roles")
    async with (
        MemoryStore() as store,
        serving([agent, roles, echo_agent("plain"), team], store=store) as base,
    ):
        yield base


def _client(url: str) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=30)


async def test_a_client_tool_call_is_answered_by_the_client_on_the_next_request(url: str) -> None:
    ask = [{"role": "user", "content": "weather in Oslo?"}]
    async with _client(url) as client:
        first = await client.chat.completions.create(
            model="forecaster", messages=ask, tools=[WEATHER]
        )
        choice = first.choices[0]
        assert choice.finish_reason == "tool_calls"
        calls = choice.message.tool_calls or []
        # only the client's call: the agent's own tool (population) ran on the server
        assert [(c.id, c.function.name) for c in calls] == [("call_w1", "weather")]  # type: ignore[union-attr]
        assert json.loads(calls[0].function.arguments) == {"city": "Oslo"}  # type: ignore[union-attr]
        assert choice.message.content is None
        history: list[Any] = [
            *ask,
            choice.message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": "call_w1", "content": "sunny, 21 C"},
        ]
        second = await client.chat.completions.create(
            model="forecaster", messages=history, tools=[WEATHER]
        )
    assert second.choices[0].finish_reason == "stop"
    # the history the client holds has what it was shown: the weather call, not the
    # server's own population call (its result stays with the server's first run)
    assert second.choices[0].message.content == "Oslo (? people): sunny, 21 C"


async def test_a_streamed_answer_carries_the_tool_calls(url: str) -> None:
    async with _client(url) as client:
        stream = await client.chat.completions.create(
            model="forecaster",
            messages=[{"role": "user", "content": "weather in Oslo?"}],
            tools=[WEATHER],
            stream=True,
        )
        chunks = [c async for c in stream]
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    calls = [call for d in deltas for call in d.tool_calls or []]
    assert [(c.index, c.id, c.function.name) for c in calls] == [(0, "call_w1", "weather")]  # type: ignore[union-attr]
    assert json.loads(calls[0].function.arguments or "") == {"city": "Oslo"}  # type: ignore[union-attr]
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


async def test_tool_choice_reaches_the_model_and_is_checked(url: str) -> None:
    ask = [{"role": "user", "content": "weather?"}]
    async with _client(url) as client:
        none = await client.chat.completions.create(
            model="forecaster", messages=ask, tools=[WEATHER], tool_choice="none"
        )
        assert none.choices[0].message.content == (
            "no weather tool (offered ['population', 'weather'], choice none)"
        )
        named = await client.chat.completions.create(
            model="forecaster",
            messages=ask,
            tools=[WEATHER],
            tool_choice={"type": "function", "function": {"name": "weather"}},
        )
        assert named.choices[0].finish_reason == "tool_calls"
        with pytest.raises(openai.BadRequestError, match="'required' needs tools"):
            await client.chat.completions.create(
                model="plain", messages=ask, tool_choice="required"
            )
        with pytest.raises(openai.BadRequestError, match="cannot apply to 'pair', which is a"):
            await client.chat.completions.create(model="pair", messages=ask, tool_choice="required")
        with pytest.raises(openai.BadRequestError, match="'nope', which is not offered"):
            await client.chat.completions.create(
                model="forecaster",
                messages=ask,
                tools=[WEATHER],
                tool_choice={"type": "function", "function": {"name": "nope"}},
            )
        taken = {**WEATHER, "function": {**WEATHER["function"], "name": "population"}}  # type: ignore[dict-item]
        with pytest.raises(openai.BadRequestError, match="'population' is taken"):
            await client.chat.completions.create(
                model="forecaster",
                messages=ask,
                tools=[taken],  # type: ignore[list-item]
            )


async def test_a_team_refuses_client_tools_saying_why(url: str) -> None:
    async with _client(url) as client:
        with pytest.raises(openai.BadRequestError) as info:
            await client.chat.completions.create(
                model="pair", messages=[{"role": "user", "content": "hi"}], tools=[WEATHER]
            )
    assert "'pair' is a team, which cannot take tools from the client" in str(info.value)
    assert info.value.body["param"] == "tools"  # type: ignore[index]


async def test_bad_tools_are_400s_naming_the_field(url: str) -> None:
    async with _client(url) as client:
        for tools, match in (
            ([{"type": "web_search"}], r"tools\[0\]\.type 'web_search' is not supported"),
            ([{"type": "function", "function": {"name": "a b"}}], r"tools\[0\] needs a name"),
            ([WEATHER, WEATHER], "two tools are named 'weather'"),
        ):
            with pytest.raises(openai.BadRequestError, match=match):
                await client.chat.completions.create(
                    model="forecaster",
                    messages=[{"role": "user", "content": "hi"}],
                    tools=tools,  # type: ignore[arg-type]
                )


RESPONSES_WEATHER = {"type": "function", **WEATHER["function"]}  # type: ignore[dict-item]


def _forecast_server(store: object) -> Any:
    agent = ChatAgent(ScriptedChatClient(_forecaster), name="forecaster", tools=[population])
    return serving(agent, store=store)


async def test_a_function_call_item_is_answered_after_previous_response_id_after_a_restart(
    tmp_path: Path,
) -> None:
    store = f"sqlite:///{tmp_path}/serve.db"
    async with _forecast_server(store) as base, _client(base) as client:
        first = await client.responses.create(
            model="forecaster", input="weather in Oslo?", tools=[RESPONSES_WEATHER]
        )
    calls = [item for item in first.output if item.type == "function_call"]
    assert [(c.call_id, c.name, json.loads(c.arguments)) for c in calls] == [
        ("call_w1", "weather", {"city": "Oslo"})
    ]
    assert [item.type for item in first.output] == ["function_call"]  # no empty message
    assert first.tools[0].name == "weather"  # type: ignore[union-attr]
    # another server process over the same store takes the answer
    async with _forecast_server(store) as base, _client(base) as client:
        second = await client.responses.create(
            model="forecaster",
            previous_response_id=first.id,
            input=[{"type": "function_call_output", "call_id": "call_w1", "output": "rain"}],
            tools=[RESPONSES_WEATHER],
        )
    # the server kept its own population call and result in the thread
    assert second.output_text == "Oslo (709000 people): rain"


async def test_a_streamed_response_ends_with_the_function_call(url: str) -> None:
    async with _client(url) as client:
        stream = await client.responses.create(
            model="forecaster", input="weather?", tools=[RESPONSES_WEATHER], stream=True
        )
        events = [e async for e in stream]
    kinds = [e.type for e in events]
    assert kinds == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.output_item.done",
        "response.completed",
    ]
    done = events[-1].response  # type: ignore[union-attr]
    assert [(i.type, i.name) for i in done.output] == [("function_call", "weather")]  # type: ignore[union-attr]


async def test_client_held_history_with_items_and_references(url: str) -> None:
    async with _client(url) as client:
        first = await client.responses.create(
            model="forecaster", input="weather?", tools=[RESPONSES_WEATHER]
        )
        call = first.output[0]
        # the whole history sent back (store or not), as the Agents SDK does
        echoed = await client.responses.create(
            model="forecaster",
            input=[
                {"role": "user", "content": "weather?"},
                {"type": "reasoning", "id": "rs_1", "summary": []},
                call.model_dump(exclude_none=True),  # type: ignore[arg-type]
                {"type": "function_call_output", "call_id": "call_w1", "output": "fog"},
            ],
            tools=[RESPONSES_WEATHER],
        )
        assert echoed.output_text == "Oslo (? people): fog"
        # earlier items by reference, as the Vercel AI SDK sends them
        referenced = await client.responses.create(
            model="forecaster",
            input=[
                {"role": "user", "content": "weather?"},
                {"type": "item_reference", "id": call.id},  # type: ignore[union-attr,typeddict-item]
                {"type": "function_call_output", "call_id": "call_w1", "output": "snow"},
            ],
            tools=[RESPONSES_WEATHER],
        )
        assert referenced.output_text == "Oslo (? people): snow"
        said = await client.responses.create(model="roles", input="one")
        again = await client.responses.create(
            model="roles",
            input=[
                {"role": "user", "content": "one"},
                {"type": "item_reference", "id": said.output[0].id},  # type: ignore[typeddict-item]
                {"role": "user", "content": "two"},
            ],
        )
        assert again.output_text == "user:one | assistant:user:one | user:two"
        with pytest.raises(openai.BadRequestError, match=r"input\[0\] refers to item 'msg_x'"):
            await client.responses.create(
                model="forecaster", input=[{"type": "item_reference", "id": "msg_x"}]
            )
        with pytest.raises(openai.BadRequestError, match=r"input\[1\]\.type 'computer_call'"):
            await client.responses.create(
                model="forecaster",
                input=[{"role": "user", "content": "hi"}, {"type": "computer_call"}],  # type: ignore[list-item]
            )


def _both_at_once(messages: list[Message], options: ChatOptions) -> Any:
    """Calls its own tool and the client's in one answer, then answers with both results."""
    results = {
        c.call_id: c.result
        for m in messages
        for c in m.contents
        if type(c) is FunctionResultContent
    }
    if "call_w1" not in results:
        return [
            tool_call("population", {"city": "Oslo"}, call_id="pop"),
            tool_call("weather", {"city": "Oslo"}, call_id="call_w1"),
        ]
    return f"Oslo ({results.get('pop', '?')} people): {results['call_w1']}"


async def test_the_agents_own_call_beside_the_clients_runs_on_the_server() -> None:
    agent = ChatAgent(ScriptedChatClient(_both_at_once), name="both", tools=[population])
    async with MemoryStore() as store, serving(agent, store=store) as base, _client(base) as client:
        first = await client.responses.create(
            model="both", input="weather?", tools=[RESPONSES_WEATHER]
        )
        assert [(i.type, i.name) for i in first.output] == [("function_call", "weather")]  # type: ignore[union-attr]
        second = await client.responses.create(
            model="both",
            previous_response_id=first.id,
            input=[{"type": "function_call_output", "call_id": "call_w1", "output": "hail"}],
            tools=[RESPONSES_WEATHER],
        )
    assert second.output_text == "Oslo (709000 people): hail"
