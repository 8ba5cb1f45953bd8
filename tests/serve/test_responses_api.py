"""``/v1/responses`` through the official `openai` client: conversations kept on the server
under rolling ids, branches, ``store: false``, streaming, and a restart of the server."""

from __future__ import annotations

from pathlib import Path

import openai
import pytest
from openai import AsyncOpenAI

from cantata.stores import MemoryStore
from cantata.workflows import WorkflowBuilder

from ._servers import echo_agent, serving


def _client(url: str) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=30)


async def test_previous_response_id_continues_the_thread_kept_on_the_server(echo_url: str) -> None:
    async with _client(echo_url) as client:
        first = await client.responses.create(model="echo", input="hello")
        assert first.output_text == "turn 1: hello"
        assert first.id.startswith("resp_")
        second = await client.responses.create(
            model="echo", input="again", previous_response_id=first.id
        )
        assert second.output_text == "turn 2: again"  # the server had the first turn
        assert second.id != first.id and second.previous_response_id == first.id
        third = await client.responses.create(
            model="echo",
            input=[{"role": "user", "content": [{"type": "input_text", "text": "more"}]}],
            previous_response_id=second.id,
        )
        assert third.output_text == "turn 3: more"
        # each id names the thread up to it: going back to the first branches from there
        branch = await client.responses.create(
            model="echo", input="other way", previous_response_id=first.id
        )
        assert branch.output_text == "turn 2: other way"
        after_branch = await client.responses.create(
            model="echo", input="on", previous_response_id=branch.id
        )
        assert after_branch.output_text == "turn 3: on"
        again = await client.responses.create(
            model="echo", input="still", previous_response_id=third.id
        )
        assert again.output_text == "turn 4: still"  # the main line was not disturbed


async def test_stored_responses_can_be_read_and_deleted(echo_url: str) -> None:
    async with _client(echo_url) as client:
        made = await client.responses.create(model="echo", input="keep me")
        read = await client.responses.retrieve(made.id)
        assert read.output_text == "turn 1: keep me"
        await client.responses.delete(made.id)
        with pytest.raises(openai.NotFoundError, match="no response"):
            await client.responses.retrieve(made.id)
        with pytest.raises(openai.NotFoundError, match="no response"):
            await client.responses.create(model="echo", input="x", previous_response_id=made.id)


async def test_store_false_answers_without_keeping_anything(echo_url: str) -> None:
    async with _client(echo_url) as client:
        kept = await client.responses.create(model="echo", input="one")
        loose = await client.responses.create(
            model="echo", input="two", previous_response_id=kept.id, store=False
        )
        assert loose.output_text == "turn 2: two"  # it reads the stored thread
        with pytest.raises(openai.NotFoundError):
            await client.responses.retrieve(loose.id)
        assert (
            await client.responses.create(model="echo", input="3", previous_response_id=kept.id)
        ).output_text == "turn 2: 3"


async def test_a_streamed_response_sends_text_deltas_then_completes(echo_url: str) -> None:
    async with _client(echo_url) as client:
        first = await client.responses.create(model="echo", input="start")
        stream = await client.responses.create(
            model="echo", input="streamed words", previous_response_id=first.id, stream=True
        )
        events = [e async for e in stream]
        kinds = [e.type for e in events]
        assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
        deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
        assert len(deltas) > 1 and "".join(deltas) == "turn 2: streamed words"
        done = events[-1].response  # type: ignore[union-attr]
        following = await client.responses.create(
            model="echo", input="next", previous_response_id=done.id
        )
        assert following.output_text == "turn 3: next"


async def test_bad_requests_are_typed_4xx(echo_url: str) -> None:
    async with _client(echo_url) as client:
        with pytest.raises(openai.NotFoundError, match="no response"):
            await client.responses.create(
                model="echo", input="x", previous_response_id="resp_doesnotexist"
            )
        with pytest.raises(openai.NotFoundError, match="not one this server gives out"):
            await client.responses.create(model="echo", input="x", previous_response_id="abc")
        with pytest.raises(openai.BadRequestError, match="'input'"):
            await client.responses.create(model="echo", input=[])
        with pytest.raises(openai.NotFoundError, match="not served here"):
            await client.responses.create(model="nobody", input="x")


async def test_instructions_go_to_agents_only() -> None:
    flow = WorkflowBuilder(echo_agent("inner")).build()
    async with (
        MemoryStore() as store,
        serving({"flow": flow}, store=store) as url,
        _client(url) as client,
    ):
        with pytest.raises(openai.BadRequestError, match="'instructions' apply to agents"):
            await client.responses.create(model="flow", input="x", instructions="be nice")
        answer = await client.responses.create(model="flow", input="x")
        assert answer.output_text == "turn 1: x"


async def test_conversations_survive_a_restart_of_the_server(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/serve.db"
    async with serving(echo_agent(), store=url) as base, _client(base) as client:
        first = await client.responses.create(model="echo", input="before")
    async with serving(echo_agent(), store=url) as base, _client(base) as client:
        after = await client.responses.create(
            model="echo", input="after", previous_response_id=first.id
        )
    assert after.output_text == "turn 2: after"


async def test_a_damaged_stored_conversation_is_a_server_error_naming_it() -> None:
    async with (
        MemoryStore() as store,
        serving(echo_agent(), store=store) as url,
        _client(url) as client,
    ):
        first = await client.responses.create(model="echo", input="one")
        record = await store.get(f"resp:{first.id}")
        await store.put(f"resp:{first.id}", {**record, "length": "two"})
        with pytest.raises(openai.InternalServerError, match="damaged"):
            await client.responses.create(model="echo", input="x", previous_response_id=first.id)
        await store.put(f"resp:{first.id}", {**record, "length": 5})  # past the log's end
        with pytest.raises(openai.InternalServerError, match="lost messages"):
            await client.responses.create(model="echo", input="x", previous_response_id=first.id)
