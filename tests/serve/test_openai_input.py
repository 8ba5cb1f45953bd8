"""A person's input over the OpenAI-compatible routes, through the official `openai` client
on a real server: the Responses API returns approval requests and a workflow's request_info
call and takes their answers on the next request (the mechanism A2A uses); chat completions,
which cannot carry an answer, refuse a waiting run with a 409 naming what it waits for."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest
from openai import AsyncOpenAI

from cantata.stores import MemoryStore
from cantata.workflows import Executor, WorkflowBuilder, WorkflowContext, handler, response_handler

from ._servers import serving
from .test_a2a_input import Ask, _ops_agent


class StrAsker(Executor):
    @handler
    async def start(self, text: str, ctx: WorkflowContext[None, str]) -> None:
        await ctx.request_info(Ask(f"colour of {text}?"), response_type=str)

    @response_handler
    async def got(self, request: Ask, answer: str, ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output(f"{request.question} -> {answer}")


@pytest.fixture
async def served() -> AsyncIterator[tuple[str, list[str]]]:
    deleted: list[str] = []
    asker = WorkflowBuilder(StrAsker("asker"), name="asker").build()
    async with MemoryStore() as store, serving([_ops_agent(deleted), asker], store=store) as url:
        yield url, deleted


def _client(url: str) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=30)


def _items(response: Any, kind: str) -> list[Any]:
    return [item for item in response.output if item.type == kind]


async def test_an_approval_is_an_output_item_answered_on_the_next_request(
    served: tuple[str, list[str]],
) -> None:
    url, deleted = served
    async with _client(url) as client:
        first = await client.responses.create(model="ops", input="delete /tmp/x")
        (request,) = _items(first, "mcp_approval_request")
        assert request.name == "delete_file" and request.server_label == "ops"
        assert json.loads(request.arguments) == {"path": "/tmp/x"}
        assert deleted == []
        with pytest.raises(openai.BadRequestError, match="not waiting"):
            await client.responses.create(
                model="ops",
                previous_response_id=first.id,
                input=[
                    {"type": "mcp_approval_response", "approval_request_id": "zz", "approve": True}
                ],
            )
        assert deleted == []
        done = await client.responses.create(
            model="ops",
            previous_response_id=first.id,
            input=[
                {
                    "type": "mcp_approval_response",
                    "approval_request_id": request.id,
                    "approve": True,
                }
            ],
        )
        assert done.output_text == "done: deleted /tmp/x" and deleted == ["/tmp/x"]
        assert _items(done, "mcp_approval_request") == []


async def test_a_streamed_answer_carries_the_approval_request(
    served: tuple[str, list[str]],
) -> None:
    url, deleted = served
    async with _client(url) as client:
        stream = await client.responses.create(model="ops", input="delete /tmp/x", stream=True)
        events = [e async for e in stream]
        (completed,) = [e for e in events if e.type == "response.completed"]
        (request,) = _items(completed.response, "mcp_approval_request")
        added = [e.item.type for e in events if e.type == "response.output_item.added"]
        assert added == ["message", "mcp_approval_request"]
        denied = await client.responses.create(
            model="ops",
            previous_response_id=completed.response.id,
            input=[
                {
                    "type": "mcp_approval_response",
                    "approval_request_id": request.id,
                    "approve": False,
                }
            ],
        )
        assert denied.output_text.startswith("done:") and deleted == []


async def test_a_workflow_request_is_a_function_call_answered_by_its_output(
    served: tuple[str, list[str]],
) -> None:
    url, _ = served
    async with _client(url) as client:
        first = await client.responses.create(model="asker", input="sky")
        (call,) = _items(first, "function_call")
        assert call.name == "request_info"
        assert json.loads(call.arguments)["data"]["question"] == "colour of sky?"
        done = await client.responses.create(
            model="asker",
            previous_response_id=first.id,
            input=[{"type": "function_call_output", "call_id": call.call_id, "output": "blue"}],
        )
        assert done.output_text == "colour of sky? -> blue"


async def test_chat_completions_refuse_a_run_that_waits_for_a_person(
    served: tuple[str, list[str]],
) -> None:
    url, deleted = served
    async with _client(url) as client:
        with pytest.raises(openai.ConflictError, match="approve the call of `delete_file`"):
            await client.chat.completions.create(
                model="ops", messages=[{"role": "user", "content": "delete /tmp/x"}]
            )
        stream = await client.chat.completions.create(
            model="ops", messages=[{"role": "user", "content": "delete /tmp/x"}], stream=True
        )
        with pytest.raises(openai.APIError, match="waits for a person"):
            async for _ in stream:
                pass
    assert deleted == []
