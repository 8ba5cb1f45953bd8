"""The grammar checked on the likeliest tokens first (marker ``local_model``).

`SequenceSampler` checks a grammar on the likeliest candidates and checks the whole
vocabulary only when too few of them pass. These tests run real requests both ways (the
whole vocabulary every token is `_FIRST_LOOK = 0`, llama.cpp's own chain) and compare them
token for token; the DEBUG log of each response says which check each token needed.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re

import pytest

from cantata.core import CancellationToken, CancelledError, Message
from cantata.models import ChatOptions, ChatResponse, LocalChatClient, ToolSpec, _batch_sampling

pytestmark = pytest.mark.local_model

PET = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "legs": {"type": "integer"}},
    "required": ["name", "legs"],
}
WEATHER = ToolSpec(
    "get_weather",
    "Current weather of a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
ANIMALS = ["dog", "spider", "bird", "snake"]
CITIES = ["Oslo", "Lima", "Rome", "Pune"]


def checks(caplog: pytest.LogCaptureFixture) -> list[tuple[int, int]]:
    """(top, full) grammar checks of every logged response, in the order they ended."""
    found = []
    for record in caplog.records:
        match = re.search(r"grammar_top=(\d+) grammar_full=(\d+)", record.getMessage())
        if match:
            found.append((int(match[1]), int(match[2])))
    caplog.clear()
    return found


async def shaped_and_called(options: list[ChatOptions]) -> list[str]:
    """Structured answers and tool calls for each options, run concurrently on one client."""
    async with LocalChatClient(n_ctx=512, parallel=4) as client:
        shaped = [
            client.get_response(
                [Message("user", f"Describe a {ANIMALS[k % 4]} as JSON.")],
                options=o.merge(ChatOptions(response_format=PET)),
            )
            for k, o in enumerate(options)
        ]
        called = [
            client.get_response(
                [Message("user", f"What is the weather in {CITIES[k % 4]}?")],
                options=o.merge(ChatOptions(tools=[WEATHER], tool_choice="required")),
            )
            for k, o in enumerate(options)
        ]
        answers = await asyncio.gather(*shaped, *called)
    texts = []
    for r in answers[: len(options)]:
        assert isinstance(r.value, dict)
        assert isinstance(r.value["name"], str) and isinstance(r.value["legs"], int)
        texts.append(r.text)
    for r in answers[len(options) :]:
        (call,) = r.function_calls
        assert call.name == "get_weather" and isinstance(call.arguments["city"], str)
        texts.append(json.dumps(call.arguments))
    return texts


@pytest.mark.parametrize("temperature", [0.0, None, 0.9])
async def test_likeliest_first_answers_as_the_whole_vocabulary_does(
    temperature: float | None,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caplog.set_level(logging.DEBUG, logger="cantata.models")
    options = [ChatOptions(temperature=temperature, seed=k, max_tokens=64) for k in range(2)]
    fast = await shaped_and_called(options)
    fast_checks = checks(caplog)
    monkeypatch.setattr(_batch_sampling, "_FIRST_LOOK", 0)
    whole = await shaped_and_called(options)
    whole_checks = checks(caplog)
    assert fast == whole
    assert len(fast_checks) == len(whole_checks) == 4
    assert all(top == 0 for top, _ in whole_checks)
    top, full = sum(c[0] for c in fast_checks), sum(c[1] for c in fast_checks)
    # Greedy needs one valid token among the likeliest; a draw needs top_k (40) of them, so
    # where the grammar allows few tokens (between the fields) the whole vocabulary is checked.
    assert top > full if temperature == 0.0 else top > 0
    assert sum(map(sum, fast_checks)) == sum(map(sum, whole_checks))  # every token checked


@pytest.mark.parametrize(
    "extra",
    [{"mirostat_mode": 2}, {"top_k": 0}, {"top_k": 400}],
    ids=["mirostat", "no top_k", "top_k above the first look"],
)
async def test_a_choice_over_more_tokens_checks_the_whole_vocabulary(
    extra: dict[str, int], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="cantata.models")
    options = ChatOptions(response_format=PET, max_tokens=64, seed=3, extra=extra)
    async with LocalChatClient(n_ctx=512, parallel=1) as client:
        response = await client.get_response(
            [Message("user", "Describe a cat as JSON.")], options=options
        )
    assert isinstance(response.value, dict) and isinstance(response.value["legs"], int)
    ((top, full),) = checks(caplog)
    assert response.usage is not None
    assert top == 0 and full in (response.usage.output_tokens, response.usage.output_tokens + 1)


async def test_stop_strings_and_max_tokens_end_a_grammar_sequence(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="cantata.models")
    greedy = ChatOptions(response_format=PET, temperature=0.0, seed=1, max_tokens=64)
    question = [Message("user", "Describe a dog as JSON.")]
    async with LocalChatClient(n_ctx=512, parallel=2) as client:
        full = await client.get_response(question, options=greedy)
        (stopped, why_stopped), (cut, why_cut) = await asyncio.gather(
            _text(client, question, greedy.merge(ChatOptions(stop=['"name"']))),
            _text(client, question, greedy.merge(ChatOptions(max_tokens=5))),
        )
    assert isinstance(full.value, dict) and '"name"' in full.text
    assert (stopped, why_stopped) == (full.text[: full.text.index('"name"')], "stop")
    assert full.text.startswith(cut) and len(cut) < len(full.text) and why_cut == "length"
    assert all(top > 0 for top, _ in checks(caplog))


async def _text(
    client: LocalChatClient, question: list[Message], options: ChatOptions
) -> tuple[str, str | None]:
    """The streamed text (not parsed: it is cut short) and why it ended."""
    updates = [u async for u in client.get_streaming_response(question, options=options)]
    return "".join(u.text for u in updates), ChatResponse.from_updates(updates).finish_reason


async def test_cancelling_one_grammar_sequence_leaves_the_others_valid() -> None:
    token = CancellationToken()
    pieces: list[str] = []
    shaped = ChatOptions(response_format=PET, temperature=0.0, seed=1, max_tokens=64)

    async def cancelled(client: LocalChatClient) -> None:
        async for update in client.get_streaming_response(
            [Message("user", "Describe a horse as JSON.")],
            options=shaped,
            cancellation_token=token,
        ):
            pieces.append(update.text)
            if len(pieces) == 2:
                token.cancel()

    async with LocalChatClient(n_ctx=512, parallel=4) as client:
        results = await asyncio.gather(
            cancelled(client),
            *(
                client.get_response([Message("user", f"Describe a {a} as JSON.")], options=shaped)
                for a in ANIMALS[:3]
            ),
            return_exceptions=True,
        )
    assert isinstance(results[0], CancelledError) and len(pieces) < 10
    for r in results[1:]:
        assert isinstance(r, ChatResponse) and isinstance(r.value, dict)
        assert isinstance(r.value["legs"], int)


async def test_greedy_on_raw_logits_takes_the_token_llama_cpp_greedy_takes() -> None:
    """Plain greedy picks the largest logit itself; a zero bias sends the same request
    through llama.cpp's chain instead, and the answers agree token for token."""
    plain = ChatOptions(temperature=0.0, seed=1, max_tokens=48)
    through_chain = plain.merge(ChatOptions(extra={"logit_bias": {7: 0.0}}))
    questions = [Message("user", "Tell a short story about a fox.")]
    async with LocalChatClient(n_ctx=512, parallel=2) as client:
        fast, chained = await asyncio.gather(
            client.get_response(questions, options=plain),
            client.get_response(questions, options=through_chain),
        )
    assert fast.text == chained.text and fast.usage == chained.usage
    assert fast.text.strip()
