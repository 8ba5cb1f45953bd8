"""`A2AAgent` against A2A servers that are not cantata: small a2a-sdk agents written here,
served by the SDK's own request handler on 127.0.0.1. An echo that answers with a plain
message, one that streams its answer as artifact chunks (``append``) and completes without
a status message, and one that asks a question (``input-required``, no ``cantata_input``
part) and answers on the same task. Also what other A2A clients read in the waiting
task of a cantata server: each request's arguments as exact JSON text.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from a2a.helpers import new_task, new_text_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandlerV2
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes.jsonrpc_routes import create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import AgentCapabilities, AgentCard, AgentInterface, TaskState
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from cantata.agents import AgentResponse, AgentResponseUpdate, ChatAgent
from cantata.agents.remote_a2a import A2AAgent, A2AThread, a2a_parts
from cantata.core import (
    DataContent,
    FunctionApprovalRequestContent,
    FunctionResultContent,
    Message,
)
from cantata.models import ScriptedChatClient, tool_call
from cantata.serve.human_input import INPUT_KEY
from cantata.stores import MemoryStore
from cantata.tools import tool

from ..serve._servers import running, serving

CHUNKS = ["The answer ", "comes ", "in three parts."]


class _Echo(AgentExecutor):
    """Answers with a message, no task (the SDK's simplest agent)."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        said = context.get_user_input()
        await event_queue.enqueue_event(
            new_text_message(f"echo: {said}", context_id=context.context_id)
        )

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


async def _started(context: RequestContext, event_queue: EventQueue) -> TaskUpdater:
    assert context.task_id and context.context_id and context.message is not None
    if context.current_task is None:
        await event_queue.enqueue_event(
            new_task(
                context.task_id,
                context.context_id,
                TaskState.TASK_STATE_SUBMITTED,
                [],
                [context.message],
            )
        )
    updater = TaskUpdater(event_queue, context.task_id, context.context_id)
    await updater.start_work()
    return updater


class _Parts(AgentExecutor):
    """Streams its answer as chunks of one artifact, then completes with no message."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = await _started(context, event_queue)
        for i, chunk in enumerate(CHUNKS):
            await updater.add_artifact(
                [new_text_part(chunk)],
                artifact_id="answer",
                name="answer",
                append=i > 0,
                last_chunk=i == len(CHUNKS) - 1,
            )
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


class _Weather(AgentExecutor):
    """Asks for the city (input-required, the question in its status message), then
    answers on the same task; records the ids each message came with."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str]] = []  # (task id, context id, text)

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        said = context.get_user_input()
        self.seen.append((context.task_id or "", context.context_id or "", said))
        asked = context.current_task is not None and (
            context.current_task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        )
        updater = await _started(context, event_queue)
        if not asked:
            await updater.requires_input(updater.new_agent_message([new_text_part("Which city?")]))
            return
        await updater.complete(updater.new_agent_message([new_text_part(f"{said}: sunny")]))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


def _app(executor: AgentExecutor, name: str) -> Starlette:
    card = AgentCard(
        name=name,
        description="an A2A agent of another make",
        version="1",
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
    )
    handler = DefaultRequestHandlerV2(executor, InMemoryTaskStore(), card)

    async def card_of(request: Request) -> JSONResponse:
        served = AgentCard()
        served.CopyFrom(card)
        url = str(request.base_url).rstrip("/") + "/rpc"
        served.supported_interfaces.append(
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")
        )
        return JSONResponse(agent_card_to_dict(served))

    routes = [
        Route("/.well-known/agent-card.json", card_of, methods=["GET"]),
        *create_jsonrpc_routes(handler, "/rpc"),
    ]
    return Starlette(routes=routes)


@asynccontextmanager
async def _remote(executor: AgentExecutor, name: str) -> AsyncIterator[A2AAgent]:
    async with running(_app(executor, name)) as url, A2AAgent(url, name=name) as remote:
        yield remote


async def _run(
    remote: A2AAgent, streaming: bool, text: str, thread: A2AThread
) -> tuple[AgentResponse, list[AgentResponseUpdate]]:
    if not streaming:
        return await remote.run(text, thread=thread), []
    stream = remote.run_stream(text, thread=thread)
    updates = [u async for u in stream]
    return stream.response, updates


async def _said(thread: A2AThread) -> list[tuple[str, str]]:
    return [(m.role, m.text) for m in await thread.get_messages()]


@pytest.mark.parametrize("streaming", [False, True])
async def test_an_echo_that_answers_with_a_message_keeps_the_context(streaming: bool) -> None:
    async with _remote(_Echo(), "echo") as remote:
        thread = remote.create_thread()
        first, _ = await _run(remote, streaming, "hello", thread)
        assert first.text == "echo: hello"
        context = thread.id
        assert context
        second, _ = await _run(remote, streaming, "again", thread)
        assert second.text == "echo: again"
        assert thread.id == context
        assert await _said(thread) == [
            ("user", "hello"),
            ("assistant", "echo: hello"),
            ("user", "again"),
            ("assistant", "echo: again"),
        ]


@pytest.mark.parametrize("streaming", [False, True])
async def test_an_answer_streamed_as_artifact_chunks_is_whole(streaming: bool) -> None:
    async with _remote(_Parts(), "parts") as remote:
        thread = remote.create_thread()
        response, updates = await _run(remote, streaming, "tell me", thread)
        assert response.text == "".join(CHUNKS)
        assert response.finish_reason == "stop"
        if streaming:
            assert [u.text for u in updates] == CHUNKS
            assert {u.message_id for u in updates} == {response.messages[0].message_id}
        assert await _said(thread) == [("user", "tell me"), ("assistant", "".join(CHUNKS))]


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_question_of_another_server_is_answered_on_its_task(streaming: bool) -> None:
    weather = _Weather()
    async with _remote(weather, "weather") as remote:
        thread = remote.create_thread()
        asked, updates = await _run(remote, streaming, "weather please", thread)
        assert asked.text == "Which city?"
        assert asked.finish_reason == "stop"
        assert asked.user_input_requests == []
        if streaming:
            assert "".join(u.text for u in updates) == "Which city?"
        task_id, context = asked.response_id, thread.id
        assert thread.waiting_task_id == task_id
        # the waiting task survives serialization
        restored = await remote.deserialize_thread(json.dumps(await thread.serialize()))
        assert isinstance(restored, A2AThread)
        assert restored.waiting_task_id == task_id
        answered, _ = await _run(remote, streaming, "Paris", restored)
        assert answered.text == "Paris: sunny"
        assert answered.response_id == task_id  # the same task, not a new one
        assert restored.waiting_task_id is None
        assert restored.id == context
        assert weather.seen == [(task_id, context, "weather please"), (task_id, context, "Paris")]
        # the next run starts a new task on the same context, which asks again
        again, _ = await _run(remote, streaming, "and tomorrow?", restored)
        assert again.text == "Which city?"
        assert again.response_id != task_id
        assert weather.seen[-1] == (again.response_id, context, "and tomorrow?")


async def test_a_thread_that_stops_waiting_starts_a_new_task() -> None:
    weather = _Weather()
    async with _remote(weather, "weather") as remote:
        thread = remote.create_thread()
        asked = await remote.run("weather please", thread=thread)
        thread.stop_waiting()
        again = await remote.run("weather please", thread=thread)
        assert again.text == "Which city?"
        assert again.response_id != asked.response_id
        assert weather.seen[-1] == (again.response_id, thread.id, "weather please")


# -- what other A2A clients read in a cantata server's waiting task ----------------------


def _payer() -> ChatAgent:
    @tool(approval_mode="always_require")
    def pay(cents: int, account: int) -> str:
        """Pay an amount."""
        return f"paid {cents} to {account}"

    def answer(messages: list[Any], options: Any) -> Any:
        results = [c for m in messages for c in m.function_results]
        if results:
            return f"done: {results[-1].error or results[-1].result}"
        return [tool_call("pay", {"cents": 1250, "account": 2**60 + 1})]

    return ChatAgent(ScriptedChatClient(answer), name="payer", tools=[pay])


async def test_a_waiting_tasks_arguments_keep_their_integers() -> None:
    account = 2**60 + 1  # a double cannot hold it
    async with (
        MemoryStore() as store,
        serving(_payer(), store=store) as url,
        httpx.AsyncClient(timeout=30) as http,
    ):
        # a JSON-RPC client of its own, as any other language's would be
        sent = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {
                "message": {
                    "messageId": "m1",
                    "role": "ROLE_USER",
                    "parts": [{"text": "pay the bill"}],
                }
            },
        }
        reply = await http.post(f"{url}/a2a/payer", json=sent, headers={"A2A-Version": "1.0"})
        assert reply.status_code == 200, reply.text
        task = reply.json()["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        (data,) = [p["data"] for p in task["status"]["message"]["parts"] if "data" in p]
        (listed,) = data[INPUT_KEY]
        exact = json.loads(listed["arguments_json"])
        assert exact == {"cents": 1250, "account": account}
        assert type(exact["cents"]) is int
        # the object form is a protobuf Struct's: its numbers are doubles
        assert listed["arguments"]["cents"] == 1250.0

        # cantata's own client reads the exact form
        async with A2AAgent(f"{url}/a2a/payer") as remote:
            thread = remote.create_thread()
            response = await remote.run("pay the bill", thread=thread)
            (request,) = response.user_input_requests
            assert isinstance(request, FunctionApprovalRequestContent)
            arguments = request.function_call.arguments
            assert arguments == {"cents": 1250, "account": account}
            assert isinstance(arguments, dict)
            assert type(arguments["cents"]) is int
            done = await remote.run(Message("user", [request.create_response(True)]), thread=thread)
            assert done.text == f"done: paid 1250 to {account}"


def _photographer() -> ChatAgent:
    @tool
    def photo() -> list[Any]:
        """Take a photo."""
        return ["a dark room", DataContent("image/png", data=b"\x89PNG\r\n\x1a\n")]

    def answer(messages: list[Any], options: Any) -> Any:
        if any(m.role == "tool" for m in messages):
            return "it is dark"
        return [tool_call("photo")]

    return ChatAgent(ScriptedChatClient(answer), name="photographer", tools=[photo])


async def test_an_image_a_served_tool_returned_stays_with_the_run() -> None:
    async with (
        MemoryStore() as store,
        serving(_photographer(), store=store) as url,
        httpx.AsyncClient(timeout=30) as http,
    ):
        sent = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {
                "message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "look"}]}
            },
        }
        reply = await http.post(
            f"{url}/a2a/photographer", json=sent, headers={"A2A-Version": "1.0"}
        )
        task = reply.json()["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        parts = [p for a in task["artifacts"] for p in a["parts"]]
        assert parts == [{"text": "it is dark"}]  # the answer, not the tool's image


def test_a_tool_message_stays_local() -> None:
    image = DataContent("image/png", data=b"\x89PNG")
    assert a2a_parts(Message("tool", [FunctionResultContent("c1", "x"), image])) == []
    assert len(a2a_parts(Message("user", [image]))) == 1
