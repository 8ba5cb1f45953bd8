"""OpenAIChatClient with a server that lacks a feature (a forced tool choice, streamed tool
calls, a ``json_schema`` or ``json_object`` response format): the fallbacks, what they cost,
what is remembered, and the errors without them. The fake server is tests/_chat_server.py."""

from __future__ import annotations

import pytest

from cantata.core import Message, ModelError, ModelHTTPError, Usage
from cantata.models import ChatOptions, ChatResponse, OpenAIChatClient

from .._chat_server import Reply, chat_server, chunk, completion, text_reply
from .test_openai_chat import WEATHER, City, client_for

_CALL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {
            "id": "c1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
        }
    ],
}


@pytest.mark.parametrize("stream", [False, True])
async def test_a_refused_tool_choice_falls_back_to_auto_and_an_instruction_once(
    stream: bool,
) -> None:
    # llama.cpp's server answers tool_choice="required" with a bare HTTP 500
    calls = [_call_reply(stream) for _ in range(2)]
    with chat_server(Reply(500, None), *calls) as server:
        client = OpenAIChatClient("fake-model", base_url=server.url, max_retries=2)
        options = ChatOptions(tools=[WEATHER], tool_choice="required")
        for _ in range(2):
            response = await _ask(
                client, [Message("system", "Be brief."), Message("user", "x")], options, stream
            )
            assert response.function_calls[0].name == "get_weather"
    refused, fallback, later = server.requests
    assert refused["tool_choice"] == "required"
    for body in (fallback, later):
        assert body["tool_choice"] == "auto"
        assert body["messages"][0]["content"].startswith("Be brief.\n\nAnswer only by calling")
        assert "`get_weather`" in body["messages"][0]["content"]
    assert client.refused_features == {"tool_choice"}


@pytest.mark.parametrize("stream", [False, True])
async def test_a_refused_json_schema_falls_back_to_json_object_and_the_prompt(
    stream: bool,
) -> None:
    error = {"detail": "response_format.type: Input should be 'text' or 'json_object'"}
    answer = '{"name": "Lyon", "country": "France"}'
    replies = [Reply(500, error), text_reply(answer, stream), text_reply(answer, stream)]
    with chat_server(*replies) as server:
        client = client_for(server)
        for _ in range(2):
            response = await _ask(
                client, [Message("user", "a city")], ChatOptions(response_format=City), stream
            )
            assert response.value == City(name="Lyon", country="France")
    refused, fallback, later = server.requests
    assert refused["response_format"]["type"] == "json_schema"
    for body in (fallback, later):
        assert body["response_format"] == {
            "type": "json_object",
            "schema": City.model_json_schema(),
        }
        instruction = body["messages"][0]
        assert instruction["role"] == "system" and '"country"' in instruction["content"]
    assert client.refused_features == {"json_schema"}


async def test_a_stream_that_ends_before_its_first_chunk_is_a_refusal_too() -> None:
    # llama.cpp's server fails a streamed tool_choice="required" inside an HTTP 200
    with chat_server(Reply(chunks=[]), _call_reply(True)) as server:
        client = client_for(server)
        options = ChatOptions(tools=[WEATHER], tool_choice="required")
        response = await _ask(client, [Message("user", "x")], options, True)
    assert response.function_calls[0].name == "get_weather"
    assert [r["tool_choice"] for r in server.requests] == ["required", "auto"]
    assert client.refused_features == {"tool_choice"}


async def test_a_server_that_cannot_stream_tool_calls_gets_one_whole_request() -> None:
    # llama.cpp's server: "Automatic streaming tool choice is not supported", in an HTTP 200
    replies = (Reply(chunks=[]), _call_reply(False), _call_reply(False))
    with chat_server(*replies) as server:
        client = client_for(server)
        for _ in range(2):
            response = await _ask(
                client, [Message("user", "x")], ChatOptions(tools=[WEATHER]), True
            )
            assert response.function_calls[0].arguments == {"city": "Oslo"}
            assert response.finish_reason == "tool_calls" and response.usage == Usage(11, 7)
    assert [r.get("stream", False) for r in server.requests] == [True, False, False]
    assert client.refused_features == {"tool_stream"}


async def test_an_empty_stream_without_a_feature_to_give_up_is_a_model_error() -> None:
    with (
        chat_server(Reply(chunks=[])) as server,
        pytest.raises(ModelError, match="ended the stream"),
    ):
        await _ask(client_for(server), [Message("user", "x")], ChatOptions(), True)


async def test_both_refused_cost_one_failed_request_each() -> None:
    bad_format = Reply(500, {"detail": "response_format: json_schema not supported"})
    bad_choice = Reply(500, None)
    with chat_server(bad_format, bad_choice, _call_reply(False)) as server:
        client = client_for(server)
        options = ChatOptions(tools=[WEATHER], tool_choice="get_weather", response_format=City)
        await client.get_response([Message("user", "x")], options=options)
    assert len(server.requests) == 3
    assert client.refused_features == {"json_schema", "tool_choice"}


async def test_a_failure_the_fallbacks_do_not_cure_is_raised_and_not_remembered() -> None:
    replies = [Reply(400, {"error": {"message": "context too long"}}) for _ in range(2)]
    with chat_server(*replies) as server:
        client = client_for(server)
        options = ChatOptions(tools=[WEATHER], tool_choice="required")
        with pytest.raises(ModelHTTPError, match="context too long") as caught:
            await client.get_response([Message("user", "x")], options=options)
    assert "fallbacks for tool_choice too" in str(caught.value)
    assert len(server.requests) == 2
    assert client.refused_features == set()


async def test_without_fallbacks_the_error_names_the_feature_and_the_setting() -> None:
    with chat_server(Reply(500, {"detail": "response_format"})) as server:
        client = client_for(server, fallbacks=False)
        with pytest.raises(ModelHTTPError) as caught:
            await client.get_response(
                [Message("user", "x")], options=ChatOptions(response_format=City)
            )
    assert "lacks json_schema" in str(caught.value)
    assert "structured_output='json_object'" in str(caught.value)
    assert len(server.requests) == 1


async def test_a_feature_that_worked_once_is_not_given_up_for_a_passing_error() -> None:
    replies = (
        _call_reply(False),
        Reply(500, {"error": {"message": "overloaded"}}, headers={"retry-after-ms": "1"}),
        _call_reply(False),
    )
    with chat_server(*replies) as server:
        client = OpenAIChatClient("fake-model", base_url=server.url, max_retries=1)
        options = ChatOptions(tools=[WEATHER], tool_choice="required")
        for _ in range(2):
            await client.get_response([Message("user", "x")], options=options)
    assert [r["tool_choice"] for r in server.requests] == ["required"] * 3
    assert client.refused_features == set()


async def test_a_rate_limit_on_a_first_forced_call_is_still_retried() -> None:
    replies = (
        Reply(429, {"error": {"message": "slow down"}}, headers={"retry-after-ms": "1"}),
        _call_reply(False),
    )
    with chat_server(*replies) as server:
        client = OpenAIChatClient("fake-model", base_url=server.url, max_retries=1)
        options = ChatOptions(tools=[WEATHER], tool_choice="required")
        await client.get_response([Message("user", "x")], options=options)
    assert [r["tool_choice"] for r in server.requests] == ["required"] * 2
    assert client.refused_features == set()


async def test_a_server_without_any_response_format_gets_the_schema_in_the_prompt() -> None:
    replies = (
        Reply(400, {"error": {"message": "response_format json_schema: unknown"}}),
        Reply(400, {"error": {"message": "response_format json_object: unknown"}}),
        completion({"role": "assistant", "content": '{"name": "Lyon", "country": "France"}'}),
    )
    with chat_server(*replies) as server:
        client = client_for(server)
        response = await client.get_response(
            [Message("system", "Be brief."), Message("user", "a city")],
            options=ChatOptions(response_format=City),
        )
    assert response.value == City(name="Lyon", country="France")
    last = server.requests[-1]
    assert "response_format" not in last
    assert last["messages"][0]["content"].startswith("Be brief.\n\nAnswer with one JSON object")
    assert client.refused_features == {"json_schema", "json_object"}


def _call_reply(stream: bool) -> Reply:
    if not stream:
        return completion(_CALL, finish="tool_calls")
    call = dict(_CALL["tool_calls"][0], index=0)
    return Reply(
        chunks=[chunk({"role": "assistant", "tool_calls": [call]}), chunk({}, finish="tool_calls")]
    )


async def _ask(
    client: OpenAIChatClient, messages: list[Message], options: ChatOptions, stream: bool
) -> ChatResponse:
    if not stream:
        return await client.get_response(messages, options=options)
    updates = [u async for u in client.get_streaming_response(messages, options=options)]
    return ChatResponse.from_updates(updates, response_format=options.response_format)
