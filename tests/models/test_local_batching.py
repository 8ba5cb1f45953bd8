"""Concurrent requests on one embedded model, decoded together (marker ``local_model``).

A request's answer does not depend on what else is decoding, with one caveat these tests
avoid on purpose: llama.cpp's CPU kernels round differently for batches of different sizes,
so a prompt evaluated whole and the same prompt evaluated after a cached prefix can give
slightly different logits (raw llama-cpp-python shows the same with its prompt cache).
References are therefore computed on a cold cache, by a client that is closed after each.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest

from cantata.core import CancellationToken, CancelledError, Message
from cantata.models import ChatOptions, ChatResponse, LocalChatClient, ToolSpec

pytestmark = pytest.mark.local_model

WEATHER = ToolSpec(
    "get_weather",
    "Current weather of a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
PET = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "legs": {"type": "integer"}},
    "required": ["name", "legs"],
}
NO_END = {"logit_bias": {0: -100.0, 2: -100.0}}
"""Bans SmolLM2's end tokens, so a request surely runs to its max_tokens."""
QUESTIONS = ["Name a fruit.", "Name a river.", "Name a colour.", "Name a bird."]


@pytest.fixture
async def client() -> AsyncIterator[LocalChatClient]:
    async with LocalChatClient(n_ctx=1024, parallel=4) as c:
        yield c


async def alone(question: str, options: ChatOptions) -> str:
    """The answer of a request run by itself on a freshly loaded model (a cold cache)."""
    async with LocalChatClient(n_ctx=1000, parallel=1) as c:
        return (await c.get_response(ask(question), options=options)).text


def ask(q: str) -> list[Message]:
    return [Message("user", q)]


async def test_concurrent_requests_answer_as_they_do_alone() -> None:
    greedy = ChatOptions(temperature=0.0, seed=1, max_tokens=16)
    sampled = [ChatOptions(temperature=0.9, seed=s, max_tokens=16) for s in (3, 4, 5, 6)]
    requests = [(q, greedy) for q in QUESTIONS] + list(zip(QUESTIONS, sampled, strict=True))
    async with LocalChatClient(n_ctx=512, parallel=8) as client:
        together = await asyncio.gather(
            *(client.get_response(ask(q), options=o) for q, o in requests)
        )
        raw = client._shared().llama.create_chat_completion(
            [{"role": "user", "content": QUESTIONS[1]}], max_tokens=16, temperature=0.0, seed=1
        )
    expected = [await alone(q, o) for q, o in requests]
    assert [r.text for r in together] == expected
    assert together[1].text == raw["choices"][0]["message"]["content"]


async def test_more_requests_than_slots_each_get_their_own_answer() -> None:
    def tagged(k: int) -> ChatOptions:
        schema = {"type": "object", "properties": {"id": {"const": k}}, "required": ["id"]}
        return ChatOptions(response_format=schema, max_tokens=16, seed=k)

    async with LocalChatClient(n_ctx=512, parallel=2) as small:
        answers = await asyncio.gather(
            *(
                small.get_response(ask(f"Give request {k} its id."), options=tagged(k))
                for k in range(7)
            )
        )
    assert [a.value for a in answers] == [{"id": k} for k in range(7)]


async def test_tool_calls_and_structured_output_stay_valid_under_concurrency(
    client: LocalChatClient,
) -> None:
    calls = [
        client.get_response(
            ask(f"What is the weather in {city}?"),
            options=ChatOptions(tools=[WEATHER], tool_choice="required", max_tokens=48, seed=i),
        )
        for i, city in enumerate(["Oslo", "Lima", "Rome", "Pune"])
    ]
    shaped = [
        client.get_response(
            ask(f"Describe a {animal} as JSON."),
            options=ChatOptions(response_format=PET, max_tokens=48, seed=i, temperature=0.7),
        )
        for i, animal in enumerate(["dog", "spider", "bird"])
    ]
    plain = client.get_response(ask("Say hello."), options=ChatOptions(max_tokens=8))
    *answers, hello = await asyncio.gather(*calls, *shaped, plain)
    for response in answers[:4]:
        (call,) = response.function_calls
        assert call.name == "get_weather" and isinstance(call.arguments["city"], str)
    for response in answers[4:]:
        assert isinstance(response.value, dict)
        assert isinstance(response.value["name"], str) and isinstance(response.value["legs"], int)
        assert json.loads(response.text) == response.value
    assert hello.text.strip()


async def test_cancelling_one_stream_leaves_the_others_running(client: LocalChatClient) -> None:
    options = ChatOptions(temperature=0.0, seed=1, max_tokens=24, extra=NO_END)
    token = CancellationToken()
    pieces: list[str] = []

    async def cancelled() -> None:
        async for update in client.get_streaming_response(
            ask("Tell a long story."), options=options, cancellation_token=token
        ):
            pieces.append(update.text)
            if len(pieces) == 3:
                token.cancel()

    results = await asyncio.gather(
        cancelled(),
        *(client.get_response(ask(q), options=options) for q in QUESTIONS[:2]),
        return_exceptions=True,
    )
    assert isinstance(results[0], CancelledError)
    assert len(pieces) < 24
    others = results[1:]
    assert all(isinstance(r, ChatResponse) for r in others)
    expected = [await alone(q, options) for q in QUESTIONS[:2]]
    assert [r.text for r in others if isinstance(r, ChatResponse)] == expected
    assert all(r.finish_reason == "length" for r in others if isinstance(r, ChatResponse))


async def test_a_request_joins_a_batch_that_is_already_decoding(client: LocalChatClient) -> None:
    long = ChatOptions(temperature=0.0, seed=1, max_tokens=120, extra=NO_END)
    short = ChatOptions(temperature=0.0, seed=1, max_tokens=8)
    story = ask("Tell a long story about the sea.")
    long_pieces: list[str] = []
    joined = asyncio.Event()
    short_done_at: list[int] = []

    async def long_stream() -> str:
        async for update in client.get_streaming_response(story, options=long):
            long_pieces.append(update.text)
            if len(long_pieces) == 3:
                joined.set()
        return "".join(long_pieces)

    async def late_short() -> str:
        await joined.wait()
        response = await client.get_response(ask(QUESTIONS[0]), options=short)
        short_done_at.append(len(long_pieces))
        return response.text

    long_text, short_text = await asyncio.gather(long_stream(), late_short())
    long_alone = await alone("Tell a long story about the sea.", long)
    assert (long_text, short_text) == (long_alone, await alone(QUESTIONS[0], short))
    # The late request ended while the long one was still streaming: it did not wait its turn.
    assert 3 <= short_done_at[0] < 100
