"""OpenAIChatClient against llama.cpp's own OpenAI-compatible server, for real (marker
``openai_server``): chat, stream, tool calls, structured output, and whole `ChatAgent` runs
through the fallbacks for what that server lacks (forced tool choice, ``json_schema``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pydantic import BaseModel

from cantata.agents import ChatAgent
from cantata.core import Message
from cantata.models import ChatOptions, ChatResponse, OpenAIChatClient, ToolSpec
from cantata.tools import tool

from ._llama_server import llama_server as run_llama_server

WEATHER = ToolSpec(
    "get_weather",
    "Current weather of a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


class City(BaseModel):
    name: str
    country: str


# --- llama.cpp's OpenAI-compatible server, for real ------------------------------------------


@pytest.fixture(scope="session")
def llama_server() -> Iterator[str]:
    """llama_cpp.server on the default SmolLM2 model, on a free port of 127.0.0.1."""
    with run_llama_server("--chat_format", "chatml-function-calling", "--n_ctx", "2048") as url:
        yield url


def _server_client(url: str) -> OpenAIChatClient:
    return OpenAIChatClient(
        "smollm2", base_url=url, max_retries=0, structured_output="json_object", timeout=120
    )


@pytest.mark.openai_server
async def test_llama_server_chat(llama_server: str) -> None:
    response = await _server_client(llama_server).get_response(
        [Message("system", "Be brief."), Message("user", "Name a color.", author_name="Ann")],
        options=ChatOptions(max_tokens=12, temperature=0),
    )
    assert response.text.strip()
    assert response.usage is not None and response.usage.output_tokens > 0
    assert response.finish_reason in ("stop", "length")


@pytest.mark.openai_server
async def test_llama_server_stream(llama_server: str) -> None:
    client = _server_client(llama_server)
    updates = [
        u
        async for u in client.get_streaming_response(
            [Message("user", "Count to five.")], options=ChatOptions(max_tokens=16, temperature=0)
        )
    ]
    texts = [u.text for u in updates if u.text]
    assert len(texts) > 1
    assert ChatResponse.from_updates(updates).text == "".join(texts)


@pytest.mark.openai_server
@pytest.mark.parametrize("stream", [False, True])
async def test_llama_server_tool_call(llama_server: str, stream: bool) -> None:
    client = _server_client(llama_server)
    messages = [Message("user", "What is the weather in Paris?")]
    options = ChatOptions(tools=[WEATHER], tool_choice="get_weather", max_tokens=40, temperature=0)
    if stream:
        updates = [u async for u in client.get_streaming_response(messages, options=options)]
        response = ChatResponse.from_updates(updates)
    else:
        response = await client.get_response(messages, options=options)
    calls = response.function_calls
    assert len(calls) == 1
    assert calls[0].name == "get_weather"
    assert isinstance(calls[0].arguments, dict) and isinstance(calls[0].arguments["city"], str)
    assert response.finish_reason == "tool_calls"


@pytest.mark.openai_server
async def test_llama_server_structured_output(llama_server: str) -> None:
    response = await _server_client(llama_server).get_response(
        [Message("user", "Name a city in France.")],
        options=ChatOptions(response_format=City, max_tokens=40, temperature=0),
    )
    assert isinstance(response.value, City)


# --- whole agent runs on the server's defaults: the fallbacks at work ---------------------------


def _weather_agent(client: OpenAIChatClient) -> ChatAgent:
    @tool
    def get_weather(city: str) -> str:
        """Today's weather in a city."""
        return "snow, -4 C"

    # "required" is an HTTP 500 on this server: the client falls back to "auto" plus an
    # instruction. One iteration: this server's chat template drops tool results from the
    # prompt, so the small model would only call the tool again.
    return ChatAgent(
        client,
        name="forecaster",
        instructions="You are a weather assistant.",
        tools=[get_weather],
        options=ChatOptions(tool_choice="required", max_tokens=48, temperature=0),
        max_iterations=1,
    )


@pytest.mark.openai_server
@pytest.mark.parametrize("stream", [False, True])
async def test_llama_server_agent_run_with_a_tool_call(llama_server: str, stream: bool) -> None:
    async with OpenAIChatClient("smollm2", base_url=llama_server, timeout=120) as client:
        agent = _weather_agent(client)
        if stream:
            response = await agent.run_stream("Weather in Oslo?").get_response()
        else:
            response = await agent.run("Weather in Oslo?")
    call, result, answer = response.messages
    assert call.role == "assistant" and call.function_calls[0].name == "get_weather"
    assert result.function_results[0].result == "snow, -4 C"
    assert result.function_results[0].call_id == call.function_calls[0].call_id
    assert answer.role == "assistant" and answer.text.strip()
    # and a stream that may call tools is "not supported" there: one whole request instead
    assert client.refused_features == (
        {"tool_choice", "tool_stream"} if stream else {"tool_choice"}
    )


@pytest.mark.openai_server
@pytest.mark.parametrize("stream", [False, True])
async def test_llama_server_structured_output_on_the_default_mode(
    llama_server: str, stream: bool
) -> None:
    # json_schema is an HTTP 500 there: json_object plus the schema in the prompt instead
    options = ChatOptions(response_format=City, max_tokens=40, temperature=0)
    async with OpenAIChatClient("smollm2", base_url=llama_server, timeout=120) as client:
        agent = ChatAgent(client, name="geographer", options=options)
        for _ in range(2):
            if stream:
                response = await agent.run_stream("Name a city in France.").get_response()
            else:
                response = await agent.run("Name a city in France.")
            assert isinstance(response.value, City)
        assert client.refused_features == {"json_schema"}
