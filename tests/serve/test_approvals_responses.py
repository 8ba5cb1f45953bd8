"""The claim on a Responses answer, in process: streamed answers are claimed as plain ones,
an answer whose run failed stays spent, and a claim left by a process that died mid-run
is taken over after its lease."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import openai
import pytest
from openai import AsyncOpenAI

from cantata.agents import ChatAgent
from cantata.core import Message
from cantata.models import ChatOptions, ScriptedChatClient, ScriptedTurn, tool_call
from cantata.stores import MemoryStore

from ._refunds import make_support, refund
from ._servers import serving


@pytest.fixture
def effects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("REFUND_LOG", str(tmp_path / "effects.log"))
    monkeypatch.setenv("REFUND_SECONDS", "0.2")
    return tmp_path / "effects.log"


def _count(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def _approve(response: Any) -> list[dict[str, Any]]:
    (item,) = [o for o in response.output if o.type == "mcp_approval_request"]
    return [{"type": "mcp_approval_response", "approval_request_id": item.id, "approve": True}]


@pytest.fixture
async def served(effects: Path) -> AsyncIterator[tuple[AsyncOpenAI, MemoryStore]]:
    def breaks_after(messages: list[Message], options: ChatOptions) -> ScriptedTurn:
        if messages[-1].role == "tool":
            raise RuntimeError("the model broke after the tool ran")
        return [tool_call("refund", {"order": 1001})]

    fragile = ChatAgent(ScriptedChatClient(breaks_after), name="fragile", tools=[refund])
    async with (
        MemoryStore() as store,
        serving({"support": make_support(), "fragile": fragile}, store=store) as url,
    ):
        client = AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=30)
        async with client:
            yield client, store


async def _streamed(client: AsyncOpenAI, previous: str, answer: Any) -> str:
    stream = await client.responses.create(
        model="support", previous_response_id=previous, input=answer, stream=True
    )
    events = [e async for e in stream]
    (done,) = [e for e in events if e.type == "response.completed"]
    return str(done.response.output_text)


async def test_streamed_answers_at_once_run_the_tool_once(
    served: tuple[AsyncOpenAI, MemoryStore], effects: Path
) -> None:
    client, _ = served
    asked = await client.responses.create(model="support", input="refund 1001")
    results = await asyncio.gather(
        *(_streamed(client, asked.id, _approve(asked)) for _ in range(4)), return_exceptions=True
    )
    assert [r for r in results if isinstance(r, str)] == ["Done: refunded order 1001"], results
    for error in (r for r in results if not isinstance(r, str)):
        assert isinstance(error, openai.ConflictError) and error.code == "already_answered"
    assert _count(effects) == 1


async def test_an_answer_whose_run_failed_is_spent(
    served: tuple[AsyncOpenAI, MemoryStore], effects: Path
) -> None:
    client, _ = served
    asked = await client.responses.create(model="fragile", input="refund 1001")
    with pytest.raises(openai.InternalServerError):
        await client.responses.create(
            model="fragile", previous_response_id=asked.id, input=_approve(asked)
        )
    assert _count(effects) == 1  # the tool ran before the model broke
    with pytest.raises(openai.ConflictError) as again:
        await client.responses.create(
            model="fragile", previous_response_id=asked.id, input=_approve(asked)
        )
    assert again.value.code == "already_answered"
    assert "whose run failed" in again.value.message
    assert _count(effects) == 1


async def test_a_claim_left_by_a_process_that_died_is_taken_over_after_its_lease(
    served: tuple[AsyncOpenAI, MemoryStore], effects: Path
) -> None:
    client, store = served
    asked = await client.responses.create(model="support", input="refund 1001")
    key = f"answer:resp:{asked.id}"
    await store.put(key, {"answering": True, "until": time.time() + 600})  # a live holder
    with pytest.raises(openai.ConflictError) as held:
        await client.responses.create(
            model="support", previous_response_id=asked.id, input=_approve(asked)
        )
    assert "still going" in held.value.message
    await store.put(key, {"answering": True, "until": time.time() - 1})  # its holder died
    done = await client.responses.create(
        model="support", previous_response_id=asked.id, input=_approve(asked)
    )
    assert done.output_text == "Done: refunded order 1001" and _count(effects) == 1
    assert await store.get(key) == {"answered": done.id}
