"""LocalChatClient on the embedded SmolLM2 model, for real (marker ``local_model``), plus the
checks that need no model at all."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from cantata.core import (
    CancellationToken,
    CancelledError,
    ConfigurationError,
    DataContent,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    ModelError,
    TextContent,
    UsageContent,
    UsageError,
)
from cantata.models import ChatOptions, ChatResponse, LocalChatClient, ToolSpec

WEATHER = ToolSpec(
    "get_weather",
    "Current weather of a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
TIME = ToolSpec(
    "get_time",
    "Current time in a time zone.",
    {"type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]},
)


class Pet(BaseModel):
    name: str
    legs: int


def short(**kwargs: object) -> ChatOptions:
    return ChatOptions(temperature=0.0, seed=1, **kwargs)  # type: ignore[arg-type]


async def test_guard_blocks_the_local_model_in_unit_tests() -> None:
    with pytest.raises(UsageError, match="LocalChatClient"):
        await LocalChatClient().get_response([Message("user", "hi")])


@pytest.mark.parametrize(
    "settings", [{"parallel": 0}, {"n_ctx": -5}, {"n_threads": 0}, {"parallel": 2.5}]
)
def test_bad_settings_are_configuration_errors(settings: dict[str, object]) -> None:
    name = next(iter(settings))
    with pytest.raises(ConfigurationError, match=name):
        LocalChatClient(**settings)  # type: ignore[arg-type]


@pytest.mark.local_model
async def test_missing_gguf_file_is_a_configuration_error(tmp_path: object) -> None:
    client = LocalChatClient(f"{tmp_path}/nothing.gguf")
    with pytest.raises(ConfigurationError, match=r"nothing\.gguf"):
        await client.get_response([Message("user", "hi")])


@pytest.mark.local_model
async def test_unknown_tool_choice_is_a_configuration_error() -> None:
    options = short(tools=[WEATHER], tool_choice="get_stock_price", max_tokens=4)
    with pytest.raises(ConfigurationError, match="get_stock_price"):
        await LocalChatClient().get_response([Message("user", "hi")], options=options)


@pytest.mark.local_model
async def test_an_unknown_extra_option_is_a_configuration_error() -> None:
    options = short(max_tokens=4, extra={"no_such_knob": 1})
    with pytest.raises(ConfigurationError, match="no_such_knob"):
        await LocalChatClient().get_response([Message("user", "hi")], options=options)


@pytest.mark.local_model
async def test_extra_options_reach_llama_cpp() -> None:
    options = short(max_tokens=4, extra={"top_k": 1, "repeat_penalty": 1.0})
    response = await LocalChatClient().get_response([Message("user", "hi")], options=options)
    assert response.usage is not None and response.usage.output_tokens <= 4


@pytest.mark.local_model
async def test_a_prompt_longer_than_the_context_is_a_model_error() -> None:
    client = LocalChatClient(n_ctx=64)
    with pytest.raises(ModelError, match="n_ctx=64"):
        await client.get_response([Message("user", "word " * 200)], options=short(max_tokens=4))


@pytest.mark.local_model
async def test_images_are_refused_with_a_clear_error() -> None:
    image = Message("user", [DataContent("image/png", data=b"\x89PNG")])
    with pytest.raises(ConfigurationError, match="text only"):
        await LocalChatClient().get_response([image], options=short(max_tokens=4))


@pytest.mark.local_model
async def test_answers_and_counts_usage_like_llama_cpp() -> None:
    client = LocalChatClient()
    messages = [Message("user", "What is the capital of France?")]
    response = await client.get_response(messages, options=short(max_tokens=12))
    assert response.text.strip()
    assert response.finish_reason == "length"
    assert response.model == "SmolLM2-135M-Instruct.Q4_1"
    raw = client._shared().llama.create_chat_completion(
        [{"role": "user", "content": "What is the capital of France?"}],
        max_tokens=12,
        temperature=0.0,
        seed=1,
    )
    assert response.text == raw["choices"][0]["message"]["content"]
    assert response.usage is not None
    assert response.usage.input_tokens == raw["usage"]["prompt_tokens"]
    assert response.usage.output_tokens == raw["usage"]["completion_tokens"]


@pytest.mark.local_model
async def test_a_named_llama_cpp_chat_format_works() -> None:
    client = LocalChatClient(chat_format="chatml")
    response = await client.get_response([Message("user", "Hi!")], options=short(max_tokens=4))
    assert response.text.strip()
    assert client._shared().llama.chat_format == "chatml"


@pytest.mark.local_model
async def test_streams_text_piece_by_piece() -> None:
    updates = [
        u
        async for u in LocalChatClient().get_streaming_response(
            [Message("user", "Write a sentence about the sea.")], options=short(max_tokens=10)
        )
    ]
    pieces = [u.text for u in updates if u.text]
    assert len(pieces) >= 5
    assert isinstance(updates[-1].contents[0], UsageContent)
    assert updates[-1].finish_reason == "length"
    assert len({u.message_id for u in updates}) == 1


@pytest.mark.local_model
@pytest.mark.parametrize("choice", ["required", "get_weather"])
async def test_calls_a_tool_through_the_grammar(choice: str) -> None:
    options = short(tools=[TIME, WEATHER], tool_choice=choice, max_tokens=48)
    response = await LocalChatClient().get_response(
        [Message("user", "What is the weather in Paris?")], options=options
    )
    calls = response.function_calls
    assert len(calls) == 1
    assert calls[0].name in ("get_weather", "get_time")
    if choice == "get_weather":
        assert calls[0].name == "get_weather"
    assert isinstance(calls[0].arguments, dict)
    key = "city" if calls[0].name == "get_weather" else "zone"
    assert isinstance(calls[0].arguments[key], str)
    assert response.finish_reason == "tool_calls"
    assert response.text == ""


@pytest.mark.local_model
async def test_auto_gives_a_call_or_a_streamed_answer() -> None:
    messages = [
        Message("user", "What is the weather in Oslo?"),
        Message("assistant", [FunctionCallContent("call_1", "get_weather", {"city": "Oslo"})]),
        Message("tool", [FunctionResultContent("call_1", "sunny, 21 C")]),
    ]
    updates = [
        u
        async for u in LocalChatClient().get_streaming_response(
            messages, options=short(tools=[WEATHER], max_tokens=40)
        )
    ]
    response = ChatResponse.from_updates(updates)
    if response.function_calls:
        assert response.function_calls[0].name == "get_weather"
    else:
        text_updates = [u for u in updates if u.text]
        assert text_updates and "".join(u.text for u in text_updates) == response.text
        assert not response.text.lstrip().startswith("{")


@pytest.mark.local_model
async def test_none_tool_choice_answers_in_plain_text() -> None:
    response = await LocalChatClient().get_response(
        [Message("user", "Say hello.")],
        options=short(tools=[WEATHER], tool_choice="none", max_tokens=8),
    )
    assert response.function_calls == []
    assert response.text.strip()


@pytest.mark.local_model
async def test_structured_output_is_validated() -> None:
    response = await LocalChatClient().get_response(
        [Message("user", "Describe a dog as JSON.")],
        options=short(response_format=Pet, max_tokens=40),
    )
    assert isinstance(response.value, Pet)
    assert Pet.model_validate_json(response.text) == response.value


@pytest.mark.local_model
async def test_cancellation_stops_generation_between_tokens() -> None:
    token = CancellationToken()
    pieces: list[str] = []
    with pytest.raises(CancelledError):
        async for update in LocalChatClient().get_streaming_response(
            [Message("user", "Tell a long story.")],
            options=short(max_tokens=200),
            cancellation_token=token,
        ):
            if update.text:
                pieces.append(update.text)
                if len(pieces) == 3:
                    token.cancel()
    # A few pieces may already be queued when the token fires, never the whole answer.
    assert 3 <= len(pieces) < 20


@pytest.mark.local_model
async def test_conversation_history_with_tool_results_is_rendered() -> None:
    messages = [
        Message("system", "You are terse."),
        Message("user", "What is the weather in Oslo?"),
        Message("assistant", [FunctionCallContent("call_1", "get_weather", {"city": "Oslo"})]),
        Message("tool", [FunctionResultContent("call_1", {"sky": "clear"})]),
    ]
    response = await LocalChatClient().get_response(messages, options=short(max_tokens=6))
    assert isinstance(response.messages[0].contents[0], TextContent)


@pytest.mark.local_model
async def test_requests_without_a_seed_sample_as_llama_cpp_python_does() -> None:
    from cantata.models._llama_model import default_model_path, import_llama_cpp

    questions = ["Name a fruit.", "Name a river.", "Name a bird."]
    options = ChatOptions(temperature=0.9, max_tokens=12)
    async with LocalChatClient(n_ctx=768) as client:
        ours = [
            (await client.get_response([Message("user", q)], options=options)).text
            for q in questions
        ]
    raw_llama = import_llama_cpp().Llama(
        model_path=default_model_path(), n_ctx=768, seed=0, verbose=False
    )
    try:
        raw = [
            raw_llama.create_chat_completion(
                [{"role": "user", "content": q}], temperature=0.9, max_tokens=12
            )["choices"][0]["message"]["content"]
            for q in questions
        ]
    finally:
        raw_llama.close()
    assert ours == raw
