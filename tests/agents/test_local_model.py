"""A real conversation on the embedded model (SmolLM2-135M through llama.cpp): the second
turn depends on the first, and the thread is serialized to JSON and restored in between."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence

import pytest

from cantata.agents import ChatAgent
from cantata.core import CancellationToken, Message
from cantata.models import ChatClient, ChatOptions, ChatResponse, ChatResponseUpdate

pytestmark = pytest.mark.local_model

CODE_WORD = "PELICAN"
INSTRUCTIONS = "You are a helpful assistant. Answer briefly."


class RecordingClient:
    """Passes every request to the real client and keeps a copy of what it was sent."""

    def __init__(self, inner: ChatClient) -> None:
        self.inner = inner
        self.requests: list[list[Message]] = []

    async def get_response(
        self,
        messages: Sequence[Message],
        *,
        options: ChatOptions | None = None,
        cancellation_token: CancellationToken | None = None,
    ) -> ChatResponse:
        self.requests.append(list(messages))
        return await self.inner.get_response(
            messages, options=options, cancellation_token=cancellation_token
        )

    async def get_streaming_response(
        self,
        messages: Sequence[Message],
        *,
        options: ChatOptions | None = None,
        cancellation_token: CancellationToken | None = None,
    ) -> AsyncIterator[ChatResponseUpdate]:
        self.requests.append(list(messages))
        async for update in self.inner.get_streaming_response(
            messages, options=options, cancellation_token=cancellation_token
        ):
            yield update


@pytest.fixture(scope="module")
def local_client() -> ChatClient:
    from cantata.models import LocalChatClient

    return LocalChatClient()


def _agent(client: ChatClient) -> ChatAgent:
    return ChatAgent(
        client,
        name="memo",
        instructions=INSTRUCTIONS,
        options=ChatOptions(temperature=0.0, max_tokens=40),
    )


async def test_second_turn_uses_the_first_across_a_json_round_trip(
    local_client: ChatClient,
) -> None:
    recorder = RecordingClient(local_client)
    first = await _agent(recorder).run(
        f"Remember this code word: {CODE_WORD}. Reply with the code word."
    )
    assert first.thread is not None
    text = json.dumps(await first.thread.serialize())

    resumed_agent = _agent(recorder)  # a new definition, as in another process
    thread = await resumed_agent.deserialize_thread(json.loads(text))
    second = await resumed_agent.run(
        "What was the code word I gave you? Answer with the word only.", thread=thread
    )

    turn_two = recorder.requests[-1]
    assert turn_two[0].role == "system" and turn_two[0].text == INSTRUCTIONS
    assert [m.role for m in turn_two[1:]] == ["user", "assistant", "user"]
    assert CODE_WORD in turn_two[1].text
    assert turn_two[2].text == first.text
    assert CODE_WORD.lower() in second.text.lower()
    assert [m.role for m in await thread.get_messages()] == ["user", "assistant"] * 2


async def test_without_the_first_turn_the_model_does_not_know_the_word(
    local_client: ChatClient,
) -> None:
    answer = await _agent(local_client).run(
        "What was the code word I gave you? Answer with the word only."
    )
    assert CODE_WORD.lower() not in answer.text.lower()


async def test_streaming_on_the_local_model_stores_what_it_streamed(
    local_client: ChatClient,
) -> None:
    agent = _agent(local_client)
    stream = agent.run_stream(f"Say the word {CODE_WORD}.")
    pieces = [update.text async for update in stream]
    response = stream.response
    assert "".join(pieces) == response.text != ""
    stored = await response.thread.get_messages()  # type: ignore[union-attr]
    assert stored[-1].text == response.text
