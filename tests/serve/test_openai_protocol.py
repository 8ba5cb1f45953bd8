"""Protocol details as OpenAI sends them, on a real server: a cut answer's finish reason,
how failed streams end, error messages a person reads, usage in the last chunk."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
import openai
import pytest
from openai import AsyncOpenAI

from cantata.agents import ChatAgent
from cantata.core import Message, ModelError, Usage
from cantata.models import ChatOptions, ChatResponse, ScriptedChatClient
from cantata.stores import MemoryStore

from ._servers import serving


def _cut(messages: list[Message], options: ChatOptions) -> ChatResponse:
    """Stops after `max_tokens` words, as a model does."""
    words = ["one", "two", "three", "four", "five"][: options.max_tokens or 5]
    return ChatResponse(
        [Message("assistant", " ".join(words))],
        usage=Usage(input_tokens=3, output_tokens=len(words)),
        finish_reason="length" if len(words) < 5 else "stop",
    )


def _fails(messages: list[Message], options: ChatOptions) -> str:
    raise ModelError("the model server is down (502 from http://model:8000)")


@pytest.fixture
async def url() -> AsyncIterator[str]:
    cut = ChatAgent(ScriptedChatClient(_cut, chunk_size=4), name="cut")
    broken = ChatAgent(ScriptedChatClient(_fails), name="broken")
    async with MemoryStore() as store, serving([cut, broken], store=store) as base:
        yield base


def _client(url: str) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=30)


ASK = [{"role": "user", "content": "count"}]


async def test_an_answer_cut_by_max_tokens_finishes_with_length(url: str) -> None:
    async with _client(url) as client:
        cut = await client.chat.completions.create(model="cut", messages=ASK, max_tokens=2)
        assert (cut.choices[0].message.content, cut.choices[0].finish_reason) == (
            "one two",
            "length",
        )
        whole = await client.chat.completions.create(model="cut", messages=ASK)
        assert whole.choices[0].finish_reason == "stop"
        stream = await client.chat.completions.create(
            model="cut", messages=ASK, max_tokens=2, stream=True
        )
        finishes = [c.choices[0].finish_reason async for c in stream if c.choices]
        assert finishes[-1] == "length"
        reply = await client.responses.create(model="cut", input="count", max_output_tokens=2)
        assert reply.status == "incomplete"
        assert reply.incomplete_details.reason == "max_output_tokens"  # type: ignore[union-attr]
        assert reply.output_text == "one two"
        events = await client.responses.create(
            model="cut", input="count", max_output_tokens=2, stream=True
        )
        kinds = [e.type async for e in events]
        assert kinds[-1] == "response.incomplete"


async def test_usage_comes_in_the_last_chunk_only_when_asked(url: str) -> None:
    async with _client(url) as client:
        asked = await client.chat.completions.create(
            model="cut", messages=ASK, stream=True, stream_options={"include_usage": True}
        )
        chunks = [c async for c in asked]
        assert [c.usage is not None for c in chunks].count(True) == 1
        last = chunks[-1]
        assert last.choices == [] and last.usage is not None
        assert (last.usage.prompt_tokens, last.usage.completion_tokens) == (3, 5)
        plain = await client.chat.completions.create(model="cut", messages=ASK, stream=True)
        assert all([c.usage is None async for c in plain])


async def test_a_failed_run_reads_as_a_sentence_with_the_error_class_in_code(url: str) -> None:
    async with _client(url) as client:
        with pytest.raises(openai.InternalServerError) as info:
            await client.chat.completions.create(model="broken", messages=ASK)
    error = info.value.body
    assert error["message"] == "the model server is down (502 from http://model:8000)"  # type: ignore[index]
    assert (error["code"], error["type"]) == ("ModelError", "server_error")  # type: ignore[index]
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        refused = await http.post("/v1/chat/completions", json={"model": "cut", "messages": []})
        assert refused.status_code == 400
        assert refused.json()["error"]["message"].startswith("'messages' must be")


async def test_a_failed_chat_stream_ends_with_an_error_then_done(url: str) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        body = {"model": "broken", "messages": ASK, "stream": True}
        reply = await http.post("/v1/chat/completions", json=body)
    events = [line[6:] for line in reply.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    error = json.loads(events[-2])["error"]
    assert error["code"] == "ModelError" and error["message"].startswith("the model server")
    async with _client(url) as client:
        stream = await client.chat.completions.create(model="broken", messages=ASK, stream=True)
        with pytest.raises(openai.APIError, match="the model server is down"):
            async for _ in stream:
                pass


async def test_a_failed_responses_stream_ends_with_response_failed(url: str) -> None:
    async with _client(url) as client:
        stream = await client.responses.create(model="broken", input="hi", stream=True)
        events = [e async for e in stream]
    assert events[-1].type == "response.failed"
    failed = events[-1].response  # type: ignore[union-attr]
    assert failed.status == "failed"
    assert failed.error.code == "ModelError"  # type: ignore[union-attr]
    assert failed.error.message.startswith("the model server is down")  # type: ignore[union-attr]


async def test_a_chat_stream_past_the_time_limit_ends_with_an_error_then_done() -> None:
    from cantata.serve import Limits

    from .test_app import SlowStreamer

    slow = SlowStreamer()
    async with (
        MemoryStore() as store,
        serving(slow, store=store, limits=Limits(request_timeout=0.5)) as base,
        httpx.AsyncClient(base_url=base, timeout=30) as http,
    ):
        body = {"model": "slow", "messages": ASK, "stream": True}
        reply = await http.post("/v1/chat/completions", json=body)
    events = [line[6:] for line in reply.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    assert "longer than the server's limit" in json.loads(events[-2])["error"]["message"]


async def test_a_responses_stream_past_the_time_limit_ends_with_response_failed() -> None:
    """The official client sees the run fail as the protocol says, with the events before
    numbered in order, not a stray ``error`` event."""
    from cantata.serve import Limits

    from .test_app import SlowStreamer

    async with (
        MemoryStore() as store,
        serving(SlowStreamer(), store=store, limits=Limits(request_timeout=0.5)) as base,
        _client(base) as client,
    ):
        stream = await client.responses.create(model="slow", input="hi", stream=True)
        events = [e async for e in stream]
    assert events[0].type == "response.created" and events[-1].type == "response.failed"
    failed = events[-1].response  # type: ignore[union-attr]
    assert failed.id == events[0].response.id  # type: ignore[union-attr]
    assert failed.status == "failed" and failed.error.code == "TimeoutError"  # type: ignore[union-attr]
    assert "longer than the server's limit" in failed.error.message  # type: ignore[union-attr]
    numbers = [e.sequence_number for e in events]
    assert numbers == list(range(len(events)))
