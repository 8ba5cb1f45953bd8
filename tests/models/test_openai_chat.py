"""OpenAIChatClient: request mapping, response mapping, stream assembly, fallbacks for
refused features, keys, URLs and errors against a real in-process HTTP server. The tests
against llama.cpp's own server are in test_openai_llama_server.py."""

from __future__ import annotations

import asyncio
import logging
import socket
import subprocess
import sys
import threading
from typing import Any

import pytest
from pydantic import BaseModel

from cantata.agents import ChatAgent
from cantata.core import (
    CancellationToken,
    CancelledError,
    ConfigurationError,
    DataContent,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelOutputError,
    TextContent,
    TimeoutError,
    Usage,
    UsageContent,
    UsageError,
    classify,
)
from cantata.models import (
    ChatOptions,
    ChatResponse,
    OpenAIChatClient,
    ToolSpec,
    allow_model_requests,
)
from cantata.tools import tool

from .._chat_server import ChatServer, Reply, chat_server, chunk, completion, text_reply

# --- helpers ---------------------------------------------------------------------------------


def client_for(server: ChatServer, **kwargs: Any) -> OpenAIChatClient:
    return OpenAIChatClient("fake-model", base_url=server.url, max_retries=0, **kwargs)


WEATHER = ToolSpec(
    "get_weather",
    "Current weather of a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


class City(BaseModel):
    name: str
    country: str


# --- construction ------------------------------------------------------------------------


def test_openai_without_key_is_a_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        OpenAIChatClient("gpt-4o-mini")


async def test_api_key_from_environment_is_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    with chat_server(completion({"role": "assistant", "content": "hi"})) as server:
        await client_for(server).get_response([Message("user", "hello")])
    assert server.auth == ["Bearer sk-from-env"]


async def test_local_server_needs_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with chat_server(completion({"role": "assistant", "content": "hi"})) as server:
        response = await client_for(server).get_response([Message("user", "hello")])
    assert response.text == "hi"


async def test_cantata_api_key_comes_before_openai_api_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CANTATA_API_KEY", "sk-cantata")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    with chat_server(completion({"role": "assistant", "content": "hi"})) as server:
        await client_for(server).get_response([Message("user", "hello")])
    assert server.auth == ["Bearer sk-cantata"]
    OpenAIChatClient("gpt-4o-mini")  # a key from CANTATA_API_KEY is enough for OpenAI too


async def test_without_a_key_no_authorization_header_is_sent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _no_keys(monkeypatch)
    with chat_server(completion({"role": "assistant", "content": "hi"})) as server:
        await client_for(server).get_response([Message("user", "hello")])
    assert server.auth == [""]


async def test_a_401_without_a_key_says_which_variable_to_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _no_keys(monkeypatch)
    reply = Reply(401, {"error": {"message": "Incorrect API key provided: not-needed"}})
    with chat_server(reply) as server, pytest.raises(ModelHTTPError) as caught:
        await client_for(server).get_response([Message("user", "hello")])
    assert "none was set" in str(caught.value) and "CANTATA_API_KEY" in str(caught.value)


async def test_a_401_with_a_key_names_where_the_key_came_from(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _no_keys(monkeypatch)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong")
    reply = Reply(401, {"error": {"message": "bad key"}})
    with chat_server(reply) as server, pytest.raises(ModelHTTPError, match="from OPENAI_API_KEY"):
        await client_for(server).get_response([Message("user", "hello")])


@pytest.mark.parametrize(
    "url", ["", "   ", "http://[::1", "127.0.0.1:8080/v1", "ftp://host/v1", "http://:80/v1"]
)
def test_an_unusable_base_url_is_a_configuration_error(url: str) -> None:
    with pytest.raises(ConfigurationError, match="base_url=") as caught:
        OpenAIChatClient("m", base_url=url)
    assert "http://127.0.0.1:8080/v1" in str(caught.value)


@pytest.mark.parametrize(
    "setting",
    [
        {"timeout": 0},
        {"timeout": float("nan")},
        {"timeout": float("inf")},
        {"max_retries": -1},
        {"structured_output": "json"},
        {"max_tokens_field": "tokens"},
    ],
)
def test_bad_settings_are_configuration_errors(setting: dict[str, Any]) -> None:
    (name,) = setting
    with pytest.raises(ConfigurationError, match=f"{name}="):
        OpenAIChatClient("m", base_url="http://127.0.0.1:9/v1", **setting)


async def test_a_404_from_a_base_url_without_v1_hints_at_it() -> None:
    replies = [Reply(404, {"detail": "Not Found"}) for _ in range(2)]
    with chat_server(*replies) as server:
        bare = server.url.removesuffix("/v1")
        client = OpenAIChatClient("m", base_url=bare + "/", max_retries=0)
        with pytest.raises(ModelHTTPError, match=f"try {bare}/v1"):
            await client.get_response([Message("user", "x")])
        with pytest.raises(ModelHTTPError) as caught:
            await client_for(server).get_response([Message("user", "x")])
    assert "try" not in str(caught.value) and "check the model name" in str(caught.value)


def _no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("CANTATA_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(variable, raising=False)


# --- lifetime and logging ------------------------------------------------------------------


async def test_async_with_closes_the_http_client() -> None:
    with chat_server(completion({"role": "assistant", "content": "hi"})) as server:
        async with client_for(server) as client:
            await client.get_response([Message("user", "hello")])
            sdk = client._sdk()
            assert not sdk.is_closed()
        assert sdk.is_closed()


_UNCLOSED = """
import asyncio, sys
from cantata.models import OpenAIChatClient, allow_model_requests
from cantata.core import Message

async def main():
    client = OpenAIChatClient("fake-model", base_url=sys.argv[1], max_retries=0)
    with allow_model_requests():
        print((await client.get_response([Message("user", "hi")])).text, flush=True)

asyncio.run(main())
"""


def test_an_unclosed_client_does_not_keep_the_interpreter_alive() -> None:
    with chat_server(completion({"role": "assistant", "content": "hi"})) as server:
        done = subprocess.run(
            [sys.executable, "-c", _UNCLOSED, server.url],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "hi"


async def test_requests_are_logged_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="cantata.models")
    with chat_server(completion({"role": "assistant", "content": "hi"})) as server:
        await client_for(server).get_response(
            [Message("user", "hello")], options=ChatOptions(tools=[WEATHER])
        )
    (record,) = [r for r in caplog.records if r.name == "cantata.models"]
    assert record.levelno == logging.DEBUG
    assert "fake-model" in record.getMessage() and "tools=1" in record.getMessage()


async def test_the_guard_blocks_requests_before_any_network() -> None:
    client = OpenAIChatClient("m", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(UsageError, match="OpenAIChatClient"):
        await client.get_response([Message("user", "hello")])
    with pytest.raises(UsageError, match="OpenAIChatClient"):
        async for _ in client.get_streaming_response([Message("user", "hello")]):
            pass


# --- requests and responses ----------------------------------------------------------------


async def test_request_carries_options_tools_and_every_content_kind() -> None:
    history = [
        Message("system", "be brief"),
        Message("user", [TextContent("what is this?"), DataContent("image/png", data=b"\x89PNG")]),
        Message("assistant", [FunctionCallContent("call_1", "get_weather", {"city": "Oslo"})]),
        Message("tool", [FunctionResultContent("call_1", {"temp": 3})]),
        Message("tool", [FunctionResultContent("call_2", error="boom")]),
    ]
    options = ChatOptions(
        temperature=0.5,
        top_p=0.9,
        max_tokens=20,
        stop=["END"],
        seed=7,
        tools=[WEATHER],
        tool_choice="get_weather",
        extra={"frequency_penalty": 0.1},
    )
    with chat_server(completion({"role": "assistant", "content": "ok"})) as server:
        await client_for(server).get_response(history, options=options)
    body = server.requests[0]
    assert body["messages"] == [
        {"role": "system", "content": "be brief"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw=="}},
            ],
        },
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 3}'},
        {"role": "tool", "tool_call_id": "call_2", "content": "Error: boom"},
    ]
    assert body["temperature"] == 0.5
    assert body["top_p"] == 0.9
    assert body["max_tokens"] == 20
    assert body["stop"] == ["END"]
    assert body["seed"] == 7
    assert body["frequency_penalty"] == 0.1
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather of a city.",
                "parameters": WEATHER.parameters,
            },
        }
    ]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert "stream" not in body or body["stream"] is False


async def test_author_names_are_sent_as_wire_names_unless_disabled() -> None:
    history = [
        Message("user", "hi", author_name="Ann Lee"),
        Message("assistant", "hello", author_name="bot"),
        Message("tool", [FunctionResultContent("c1", "r")], author_name="bot"),
    ]
    replies = [completion({"role": "assistant", "content": "ok"}) for _ in range(2)]
    with chat_server(*replies) as server:
        await client_for(server).get_response(history)
        await client_for(server, author_names=False).get_response(history)
    named, plain = (r["messages"] for r in server.requests)
    assert [m.get("name") for m in named] == ["Ann_Lee", "bot", None]
    assert all("name" not in m for m in plain)


async def test_max_tokens_can_go_in_max_completion_tokens() -> None:
    with chat_server(completion({"role": "assistant", "content": "ok"})) as server:
        client = client_for(server, max_tokens_field="max_completion_tokens")
        await client.get_response([Message("user", "x")], options=ChatOptions(max_tokens=9))
    body = server.requests[0]
    assert body["max_completion_tokens"] == 9 and "max_tokens" not in body


async def test_default_options_are_merged_under_request_options() -> None:
    defaults = ChatOptions(temperature=0.1, max_tokens=5, model="other-model")
    with chat_server(completion({"role": "assistant", "content": "ok"})) as server:
        client = client_for(server, default_options=defaults)
        await client.get_response([Message("user", "x")], options=ChatOptions(max_tokens=9))
    body = server.requests[0]
    assert (body["model"], body["temperature"], body["max_tokens"]) == ("other-model", 0.1, 9)


async def test_response_maps_text_tool_calls_usage_and_ids() -> None:
    message = {
        "role": "assistant",
        "content": "checking",
        "tool_calls": [
            {
                "id": "call_a",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'},
            },
            {"id": "call_b", "type": "function", "function": {"name": "f", "arguments": "{oops"}},
        ],
    }
    with chat_server(completion(message, finish="tool_calls")) as server:
        response = await client_for(server).get_response([Message("user", "x")])
    assert response.text == "checking"
    assert response.function_calls == [
        FunctionCallContent("call_a", "get_weather", {"city": "Rome"}),
        FunctionCallContent("call_b", "f", "{oops"),
    ]
    assert response.usage == Usage(11, 7)
    assert (response.finish_reason, response.model, response.response_id) == (
        "tool_calls",
        "fake-model",
        "chatcmpl-1",
    )


@pytest.mark.parametrize("mode", ["json_schema", "json_object"])
async def test_structured_output_sends_the_schema_and_validates(mode: str) -> None:
    answer = {"role": "assistant", "content": '{"name": "Lyon", "country": "France"}'}
    with chat_server(completion(answer)) as server:
        client = client_for(server, structured_output=mode)
        response = await client.get_response(
            [Message("user", "a city")], options=ChatOptions(response_format=City)
        )
    assert response.value == City(name="Lyon", country="France")
    sent = server.requests[0]["response_format"]
    if mode == "json_schema":
        assert sent == {
            "type": "json_schema",
            "json_schema": {"name": "City", "schema": City.model_json_schema()},
        }
    else:
        assert sent == {"type": "json_object", "schema": City.model_json_schema()}


async def test_structured_output_that_does_not_fit_is_a_model_output_error() -> None:
    reply = completion({"role": "assistant", "content": '{"name": 1}'})
    with chat_server(reply) as server, pytest.raises(ModelOutputError, match="City"):
        await client_for(server).get_response(
            [Message("user", "a city")], options=ChatOptions(response_format=City)
        )


async def test_unsupported_data_is_refused_before_sending() -> None:
    pdf = Message("user", [DataContent("application/pdf", data=b"%PDF")])
    with chat_server() as server, pytest.raises(UsageError, match="application/pdf"):
        await client_for(server).get_response([pdf])
    assert server.requests == []


async def test_tools_without_a_choice_send_auto() -> None:
    # llama.cpp's server ignores the tools unless tool_choice is given
    with chat_server(completion({"role": "assistant", "content": "ok"})) as server:
        await client_for(server).get_response(
            [Message("user", "x")], options=ChatOptions(tools=[WEATHER])
        )
    assert server.requests[0]["tool_choice"] == "auto"


_DEEP = '{"a": ' * 1000 + "1" + "}" * 1000


@pytest.mark.parametrize("stream", [False, True])
async def test_arguments_nested_too_deep_get_an_error_result_and_the_run_goes_on(
    stream: bool,
) -> None:
    ran: list[object] = []

    @tool
    def get_weather(city: str) -> str:
        """Today's weather in a city."""
        ran.append(city)
        return "snow"

    call = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": _DEEP}}
    if stream:
        first = Reply(chunks=[chunk({"tool_calls": [dict(call, index=0)]}, finish="tool_calls")])
    else:
        first = completion({"role": "assistant", "tool_calls": [call]}, finish="tool_calls")
    replies = [first, text_reply("sorry", stream)]
    with chat_server(*replies) as server:
        agent = ChatAgent(client_for(server, fallbacks=False), tools=[get_weather])
        if stream:
            response = await agent.run_stream("weather?").get_response()
        else:
            response = await agent.run("weather?")
    call, result, answer = response.messages
    assert call.function_calls[0].arguments == _DEEP
    (error,) = result.function_results
    assert error.call_id == "c1" and error.error is not None and "100 levels" in error.error
    assert answer.text == "sorry" and ran == []
    assert "100 levels" in server.requests[1]["messages"][-1]["content"]


# --- streaming -------------------------------------------------------------------------------


def _call_delta(index: int, *, cid: str | None, name: str | None, args: str) -> dict[str, Any]:
    fn: dict[str, Any] = {"arguments": args}
    if name is not None:
        fn["name"] = name
    call: dict[str, Any] = {"index": index, "function": fn}
    if cid is not None:
        call["id"], call["type"] = cid, "function"
    return {"tool_calls": [call]}


async def test_stream_yields_text_pieces_and_whole_tool_calls_then_usage() -> None:
    chunks = [
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "Let me "}),
        chunk({"content": "check."}),
        chunk(_call_delta(0, cid="call_a", name="get_weather", args='{"ci')),
        chunk(_call_delta(0, cid=None, name=None, args='ty": "Oslo"}')),
        chunk(_call_delta(1, cid="call_b", name="get_weather", args='{"city": ')),
        chunk(_call_delta(1, cid=None, name=None, args='"Bergen"}')),
        chunk({}, finish="tool_calls"),
        chunk(None, usage={"prompt_tokens": 5, "completion_tokens": 9, "total_tokens": 14}),
    ]
    with chat_server(Reply(chunks=chunks)) as server:
        updates = [
            u
            async for u in client_for(server).get_streaming_response(
                [Message("user", "weather?")], options=ChatOptions(tools=[WEATHER])
            )
        ]
    assert server.requests[0]["stream"] is True
    assert server.requests[0]["stream_options"] == {"include_usage": True}
    calls = [c for u in updates for c in u.contents if type(c) is FunctionCallContent]
    # The first call is emitted whole as soon as the second one starts.
    positions = [i for i, u in enumerate(updates) if calls[0] in u.contents]
    assert updates[positions[0]].contents == [calls[0]]
    assert calls == [
        FunctionCallContent("call_a", "get_weather", {"city": "Oslo"}),
        FunctionCallContent("call_b", "get_weather", {"city": "Bergen"}),
    ]
    assert [u.text for u in updates if u.text] == ["Let me ", "check."]
    usage = [c.usage for u in updates for c in u.contents if type(c) is UsageContent]
    assert usage == [Usage(5, 9)]
    response = ChatResponse.from_updates(updates)
    assert response.text == "Let me check."
    assert response.finish_reason == "tool_calls"
    assert len(response.messages) == 1
    assert response.usage == Usage(5, 9)


async def test_stream_with_repeated_names_and_ids_like_llama_cpp() -> None:
    chunks = [
        chunk(_call_delta(0, cid="call_x", name="get_weather", args="{")),
        chunk(_call_delta(0, cid="call_x", name="get_weather", args='"city": "Nice"')),
        chunk(_call_delta(0, cid="call_x", name="get_weather", args="}")),
        chunk({}, finish="tool_calls"),
    ]
    with chat_server(Reply(chunks=chunks)) as server:
        client = client_for(server, stream_usage=False)
        updates = [u async for u in client.get_streaming_response([Message("user", "w")])]
    assert "stream_options" not in server.requests[0]
    assert ChatResponse.from_updates(updates).function_calls == [
        FunctionCallContent("call_x", "get_weather", {"city": "Nice"})
    ]


async def test_stream_cancellation_raises_cancelled_error() -> None:
    token = CancellationToken()
    chunks = [chunk({"content": "one "}), chunk({"content": "two "}), chunk({"content": "three"})]
    seen: list[str] = []
    with chat_server(Reply(chunks=chunks)) as server, pytest.raises(CancelledError):
        async for update in client_for(server).get_streaming_response(
            [Message("user", "count")], cancellation_token=token
        ):
            seen.append(update.text)
            token.cancel()
    assert seen == ["one "]


async def test_cancelling_a_pending_request_raises_cancelled_error() -> None:
    token = CancellationToken()
    release = threading.Event()
    reply = completion({"role": "assistant", "content": "late"})
    reply.hold = release
    with chat_server(reply) as server:
        client = client_for(server)
        task = asyncio.ensure_future(
            client.get_response([Message("user", "x")], cancellation_token=token)
        )
        assert await asyncio.to_thread(server.arrived.wait, 10)
        token.cancel()
        with pytest.raises(CancelledError):
            await task
        release.set()


# --- errors ------------------------------------------------------------------------------------


async def test_http_429_maps_to_model_http_error_with_retry_after() -> None:
    body = {"error": {"message": "slow down", "type": "rate_limit"}}
    reply = Reply(429, body, headers={"Retry-After": "7"})
    with chat_server(reply) as server, pytest.raises(ModelHTTPError) as caught:
        await client_for(server).get_response([Message("user", "x")])
    err = caught.value
    assert err.status_code == 429
    assert err.retry_after == 7.0
    assert err.body == body["error"] or err.body == body
    assert "fake-model" in str(err) and "429" in str(err)


async def test_http_error_during_stream_setup_maps_too() -> None:
    reply = Reply(404, {"error": {"message": "no such model"}})
    with chat_server(reply) as server, pytest.raises(ModelHTTPError) as caught:
        async for _ in client_for(server).get_streaming_response([Message("user", "x")]):
            pass
    assert caught.value.status_code == 404
    assert "check the model name" in str(caught.value)


async def test_sdk_retries_then_succeeds() -> None:
    replies = (
        Reply(503, {"error": {"message": "busy"}}, headers={"retry-after-ms": "1"}),
        completion({"role": "assistant", "content": "second try"}),
    )
    with chat_server(*replies) as server:
        client = OpenAIChatClient("fake-model", base_url=server.url, max_retries=1)
        response = await client.get_response([Message("user", "x")])
    assert response.text == "second try"
    assert len(server.requests) == 2


async def test_connection_refused_is_a_model_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = OpenAIChatClient("m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=0)
    with allow_model_requests(), pytest.raises(ModelError, match="could not connect") as caught:
        await client.get_response([Message("user", "x")])
    assert isinstance(caught.value, ModelConnectionError)  # typed, and a ConnectionError
    assert classify(caught.value) == "retryable"


async def test_timeout_is_cantata_timeout_error() -> None:
    release = threading.Event()
    reply = completion({"role": "assistant", "content": "late"})
    reply.hold = release
    with chat_server(reply) as server:
        client = client_for(server, timeout=0.2)
        try:
            with pytest.raises(TimeoutError, match="timed out"):
                await client.get_response([Message("user", "x")])
        finally:
            release.set()
