"""A person's input over A2A, through the official a2a-sdk client against a real uvicorn: a
tool needing approval and a workflow's request_info leave the task input-required with the
requests in its status message; an answer on the same task continues the run to completed;
a bad answer is a typed error and the task keeps waiting."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.helpers import get_data_parts, get_message_text, new_data_part, new_text_message
from a2a.types.a2a_pb2 import GetTaskRequest, Message, Role, SendMessageRequest, Task, TaskState
from a2a.utils.errors import A2AError
from hypothesis import given, settings
from hypothesis import strategies as st

from cantata.agents import ChatAgent
from cantata.core import FunctionCallContent, register
from cantata.models import ScriptedChatClient, tool_call
from cantata.serve import RequestError, a2a_handler
from cantata.serve.human_input import INPUT_KEY, InputRequest, answer_messages, read_answers
from cantata.stores import MemoryStore, SQLiteStore
from cantata.tools import tool
from cantata.workflows import (
    Executor,
    WorkflowBuilder,
    WorkflowContext,
    handler,
    response_handler,
)

from ._servers import serving

INPUT_REQUIRED = TaskState.TASK_STATE_INPUT_REQUIRED
COMPLETED = TaskState.TASK_STATE_COMPLETED


def _ops_agent(deleted: list[str]) -> ChatAgent:
    @tool(approval_mode="always_require")
    def delete_file(path: str) -> str:
        """Delete a file."""
        deleted.append(path)
        return f"deleted {path}"

    def answer(messages: list[Any], options: Any) -> Any:
        results = [c for m in messages for c in m.function_results]
        if results:
            last = results[-1]
            return f"done: {last.error or last.result}"
        return [tool_call("delete_file", {"path": "/tmp/x"})]

    return ChatAgent(ScriptedChatClient(answer), name="ops", tools=[delete_file])


@register(name="tests.serve.human_input.Ask")
@dataclass
class Ask:
    question: str


class Asker(Executor):
    @handler
    async def start(self, text: str, ctx: WorkflowContext[None, str]) -> None:
        await ctx.request_info(Ask(f"how many {text}?"), response_type=int)

    @response_handler
    async def got(self, request: Ask, answer: int, ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output(f"{request.question} -> {answer + 1}")


def _asker() -> Any:
    return WorkflowBuilder(Asker("asker"), name="asker").build()


async def _client(http: httpx.AsyncClient, url: str, *, streaming: bool = False) -> Client:
    card = await A2ACardResolver(http, url).get_agent_card()
    return ClientFactory(ClientConfig(streaming=streaming, httpx_client=http)).create(card)


def _text(text: str, task: Task | None = None) -> SendMessageRequest:
    message = new_text_message(
        text, context_id=task.context_id if task else None, role=Role.ROLE_USER
    )
    if task is not None:
        message.task_id = task.id
    return SendMessageRequest(message=message)


def _data(data: Any, task: Task) -> SendMessageRequest:
    message = Message(
        role=Role.ROLE_USER,
        message_id=f"m-{id(data)}",
        context_id=task.context_id,
        task_id=task.id,
        parts=[new_data_part(data)],
    )
    return SendMessageRequest(message=message)


async def _task(client: Client, request: SendMessageRequest) -> Task:
    task: Task | None = None
    async for event in client.send_message(request):
        if event.HasField("task"):
            task = event.task
        elif event.HasField("status_update"):  # a continued task streams updates only
            update = event.status_update
            task = task or Task(id=update.task_id, context_id=update.context_id)
            task.status.CopyFrom(update.status)
    assert task is not None
    return task


def _requests(task: Task) -> list[dict[str, Any]]:
    (data,) = get_data_parts(task.status.message.parts)
    requests: list[dict[str, Any]] = data[INPUT_KEY]
    return requests


@pytest.fixture
async def store() -> AsyncIterator[MemoryStore]:
    async with MemoryStore() as s:
        yield s


async def test_an_approval_makes_the_task_wait_and_yes_runs_the_tool(store: MemoryStore) -> None:
    deleted: list[str] = []
    async with serving(_ops_agent(deleted), store=store) as url, httpx.AsyncClient() as http:
        client = await _client(http, f"{url}/a2a/ops")
        task = await _task(client, _text("delete /tmp/x"))
        assert task.status.state == INPUT_REQUIRED
        (request,) = _requests(task)
        assert request["kind"] == "approval" and request["name"] == "delete_file"
        assert request["arguments"] == {"path": "/tmp/x"}
        assert "approve the call of `delete_file`" in get_message_text(task.status.message, "")
        assert deleted == []
        got = await client.get_task(GetTaskRequest(id=task.id))
        assert got.status.state == INPUT_REQUIRED  # kept in the store as waiting

        done = await _task(client, _text("yes", task))
        assert done.id == task.id and done.context_id == task.context_id
        assert done.status.state == COMPLETED
        assert get_message_text(done.status.message, "") == "done: deleted /tmp/x"
        assert deleted == ["/tmp/x"]


async def test_a_denied_approval_completes_without_running_the_tool(store: MemoryStore) -> None:
    deleted: list[str] = []
    async with serving(_ops_agent(deleted), store=store) as url, httpx.AsyncClient() as http:
        client = await _client(http, f"{url}/a2a/ops")
        task = await _task(client, _text("delete /tmp/x"))
        (request,) = _requests(task)
        done = await _task(client, _data({"answers": {request["request_id"]: False}}, task))
        assert done.status.state == COMPLETED
        assert "done:" in get_message_text(done.status.message, "")
        assert deleted == []


async def test_a_bad_approval_answer_is_a_typed_error_and_the_task_waits(
    store: MemoryStore,
) -> None:
    deleted: list[str] = []
    async with serving(_ops_agent(deleted), store=store) as url, httpx.AsyncClient() as http:
        client = await _client(http, f"{url}/a2a/ops")
        task = await _task(client, _text("delete /tmp/x"))
        with pytest.raises(A2AError, match="must be yes or no"):
            await _task(client, _text("maybe", task))
        with pytest.raises(A2AError, match="not waiting"):
            await _task(client, _data({"answers": {"no-such-request": True}}, task))
        got = await client.get_task(GetTaskRequest(id=task.id))
        assert got.status.state == INPUT_REQUIRED and deleted == []
        streaming = await _client(http, f"{url}/a2a/ops", streaming=True)
        with pytest.raises(A2AError, match="must be yes or no"):
            await _task(streaming, _text("perhaps", task))
        done = await _task(streaming, _text("approve", task))
        assert done.status.state == COMPLETED and deleted == ["/tmp/x"]


async def test_an_approval_waits_across_a_server_restart(tmp_path: Path) -> None:
    deleted: list[str] = []
    path = tmp_path / "serve.db"
    async with (
        SQLiteStore(path) as store,
        serving(_ops_agent(deleted), store=store) as url,
        httpx.AsyncClient() as http,
    ):
        task = await _task(await _client(http, f"{url}/a2a/ops"), _text("delete /tmp/x"))
    async with (
        SQLiteStore(path) as store,
        serving(_ops_agent(deleted), store=store) as url,
        httpx.AsyncClient() as http,
    ):
        done = await _task(await _client(http, f"{url}/a2a/ops"), _text("yes", task))
    assert done.status.state == COMPLETED and deleted == ["/tmp/x"]


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_workflow_request_waits_and_its_answer_continues_the_run(
    store: MemoryStore, streaming: bool
) -> None:
    async with serving(_asker(), store=store) as url, httpx.AsyncClient() as http:
        client = await _client(http, f"{url}/a2a/asker", streaming=streaming)
        task = await _task(client, _text("apples"))
        assert task.status.state == INPUT_REQUIRED
        (request,) = _requests(task)
        assert request["kind"] == "request_info"
        assert request["arguments"]["data"]["question"] == "how many apples?"
        assert "how many apples?" in get_message_text(task.status.message, "")

        refused = await _task(client, _text("several", task))  # the run wants an int
        assert refused.status.state == INPUT_REQUIRED
        assert "must be a int" in get_message_text(refused.status.message, "")
        assert _requests(refused) == [request]

        done = await _task(client, _data(41, task))
        assert done.status.state == COMPLETED
        assert get_message_text(done.status.message, "") == "how many apples? -> 42"


async def test_an_answer_on_a_finished_task_is_refused(store: MemoryStore) -> None:
    async with serving(_asker(), store=store) as url, httpx.AsyncClient() as http:
        client = await _client(http, f"{url}/a2a/asker")
        task = await _task(client, _text("pears"))
        await _task(client, _data({"answers": {_requests(task)[0]["request_id"]: 1}}, task))
        with pytest.raises(A2AError, match=r"(?i)terminal"):
            await _task(client, _data(2, task))


async def test_a_workflow_answer_after_a_restart_goes_on_from_the_store(tmp_path: Path) -> None:
    path = tmp_path / "serve.db"
    async with (
        SQLiteStore(path) as store,
        serving(_asker(), store=store) as url,
        httpx.AsyncClient() as http,
    ):
        task = await _task(await _client(http, f"{url}/a2a/asker"), _text("plums"))
        assert task.status.state == INPUT_REQUIRED
    async with (
        SQLiteStore(path) as store,
        serving(_asker(), store=store) as url,
        httpx.AsyncClient() as http,
    ):
        done = await _task(await _client(http, f"{url}/a2a/asker"), _data(3, task))
    assert done.status.state == COMPLETED
    assert get_message_text(done.status.message, "") == "how many plums? -> 4"


_REQUESTS = [
    InputRequest("a1", "approval", FunctionCallContent("a1", "delete_file", {"path": "/x"})),
    InputRequest("r1", "request_info", FunctionCallContent("r1", "request_info", {"data": 1})),
]
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(
    requests=st.sampled_from([_REQUESTS[:1], _REQUESTS[1:], _REQUESTS]),
    text=st.text(max_size=20),
    data=st.lists(_JSON | st.fixed_dictionaries({"answers": _JSON}), max_size=3),
)
def test_any_answer_is_taken_whole_or_refused_with_a_request_error(
    requests: list[InputRequest], text: str, data: list[Any]
) -> None:
    try:
        answers = read_answers(requests, text, data)
    except RequestError as exc:
        assert exc.status in (400, 409) and str(exc)
        return
    assert set(answers) == {r.request_id for r in requests}
    assert all(type(answers[r.request_id]) is bool for r in requests if r.kind == "approval")
    messages = answer_messages(requests, answers)
    assert sum(len(m.contents) for m in messages) == len(requests)


async def test_a_task_released_while_it_waits_still_takes_its_answer(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(a2a_handler, "IDLE_RELEASE", 0.2)
    deleted: list[str] = []
    async with serving(_ops_agent(deleted), store=store) as url, httpx.AsyncClient() as http:
        client = await _client(http, f"{url}/a2a/ops")
        task = await _task(client, _text("delete /tmp/x"))
        await asyncio.sleep(0.6)  # past the release: the SDK forgot the task's machinery
        done = await _task(client, _text("yes", task))
        assert done.status.state == COMPLETED and deleted == ["/tmp/x"]
