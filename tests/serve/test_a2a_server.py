"""The A2A endpoints of cantata serve, through the official a2a-sdk client against a real
uvicorn: the agent card, SendMessage / message/send, streaming, task retrieval, contexts
as server threads (surviving a restart on SQLite), workflows and teams, typed failures."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.helpers import get_message_text, new_text_message
from a2a.types.a2a_pb2 import (
    AgentCard,
    GetTaskRequest,
    ListTasksRequest,
    Role,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
)
from a2a.utils.constants import PROTOCOL_VERSION_0_3
from a2a.utils.errors import A2AError

from cantata.agents import Agent, AgentInput, AgentResponse, AgentThread, ChatAgent
from cantata.core import Message
from cantata.models import ChatOptions, ScriptedChatClient
from cantata.serve import Limits
from cantata.serve.a2a_executor import context_thread
from cantata.stores import MemoryStore, SQLiteStore
from cantata.teams import GroupChat
from cantata.workflows import WorkflowBuilder

from ._servers import count_turns, echo_agent, serving

WAIT = 10.0  # bound of every wait on the server side


async def _card(http: httpx.AsyncClient, url: str) -> AgentCard:
    return await A2ACardResolver(http, url).get_agent_card()


def _client(http: httpx.AsyncClient, card: AgentCard, *, streaming: bool = False) -> Client:
    return ClientFactory(ClientConfig(streaming=streaming, httpx_client=http)).create(card)


def _message(text: str, context_id: str = "", task_id: str = "") -> SendMessageRequest:
    message = new_text_message(text, context_id=context_id or None, role=Role.ROLE_USER)
    if task_id:
        message.task_id = task_id
    return SendMessageRequest(message=message)


async def _send(client: Client, text: str, context_id: str = "") -> Task:
    events = [e async for e in client.send_message(_message(text, context_id))]
    assert len(events) == 1 and events[0].HasField("task")
    return events[0].task


def _answer(task: Task) -> str:
    return get_message_text(task.status.message, "")


@pytest.fixture
async def a2a_url() -> AsyncIterator[str]:
    async with MemoryStore() as store, serving(echo_agent(), store=store) as url:
        yield url


async def test_agent_card_names_the_endpoint_it_is_read_from(a2a_url: str) -> None:
    async with httpx.AsyncClient() as http:
        card = await _card(http, f"{a2a_url}/a2a/echo")
        assert card.name == "echo" and card.description == "Counts the user's turns."
        assert card.capabilities.streaming
        assert {(i.url, i.protocol_version) for i in card.supported_interfaces} == {
            (f"{a2a_url}/a2a/echo", "1.0"),
            (f"{a2a_url}/a2a/echo", "0.3"),
        }
        assert [s.tags for s in card.skills] == [["agent"]]
        root = await _card(http, a2a_url)  # one entry served: the root card is its card
        assert root.name == "echo"


async def test_several_served_entries_each_have_a_card() -> None:
    async with (
        MemoryStore() as store,
        serving([echo_agent("one"), echo_agent("two")], store=store) as url,
        httpx.AsyncClient() as http,
    ):
        assert (await _card(http, f"{url}/a2a/two")).name == "two"
        answer = await http.get(f"{url}/.well-known/agent-card.json")
        assert answer.status_code == 404
        assert "/a2a/one, /a2a/two" in answer.json()["error"]["message"]
        missing = await http.get(f"{url}/a2a/three/.well-known/agent-card.json")
        assert missing.status_code == 404


async def test_a_context_is_a_thread_kept_on_the_server(a2a_url: str) -> None:
    async with httpx.AsyncClient() as http:
        client = _client(http, await _card(http, f"{a2a_url}/a2a/echo"))
        first = await _send(client, "hello")
        assert first.status.state == TaskState.TASK_STATE_COMPLETED
        assert _answer(first) == "turn 1: hello"
        assert first.context_id
        second = await _send(client, "again", first.context_id)
        assert _answer(second) == "turn 2: again"
        assert second.context_id == first.context_id and second.id != first.id
        other = await _send(client, "elsewhere")  # no context: a new thread
        assert _answer(other) == "turn 1: elsewhere" and other.context_id != first.context_id

        got = await client.get_task(GetTaskRequest(id=second.id))
        assert got.status.state == TaskState.TASK_STATE_COMPLETED
        assert [get_message_text(m, "") for m in got.history][:1] == ["again"]
        assert [a.name for a in got.artifacts] == ["answer"]
        listed = await client.list_tasks(ListTasksRequest(context_id=first.context_id))
        assert sorted(t.id for t in listed.tasks) == sorted([first.id, second.id])
        with pytest.raises(A2AError, match=r"(?i)not found"):
            await client.get_task(GetTaskRequest(id="no-such-task"))
        with pytest.raises(A2AError, match=r"(?i)terminal"):
            events = client.send_message(_message("more", first.context_id, first.id))
            await anext(events)


async def test_streamed_answers_arrive_in_artifact_chunks(a2a_url: str) -> None:
    async with httpx.AsyncClient() as http:
        card = await _card(http, f"{a2a_url}/a2a/echo")
        client = _client(http, card, streaming=True)
        events: list[StreamResponse] = [
            e async for e in client.send_message(_message("streamed please"))
        ]
        chunks = [
            get_message_text(e.artifact_update.artifact, "")  # type: ignore[arg-type]
            for e in events
            if e.HasField("artifact_update")
        ]
        assert len(chunks) > 2 and "".join(chunks) == "turn 1: streamed please"
        last = events[-1]
        assert last.HasField("status_update")
        assert last.status_update.status.state == TaskState.TASK_STATE_COMPLETED
        assert get_message_text(last.status_update.status.message, "") == "turn 1: streamed please"
        task = await client.get_task(GetTaskRequest(id=last.status_update.task_id))
        assert get_message_text(task.artifacts[0], "") == "turn 1: streamed please"  # type: ignore[arg-type]


async def test_protocol_0_3_message_send_stream_and_tasks_get(a2a_url: str) -> None:
    async with httpx.AsyncClient() as http:
        card = await _card(http, f"{a2a_url}/a2a/echo")
        legacy = AgentCard()
        legacy.CopyFrom(card)
        del legacy.supported_interfaces[:]
        legacy.supported_interfaces.extend(
            i for i in card.supported_interfaces if i.protocol_version == PROTOCOL_VERSION_0_3
        )
        sent: list[str] = []

        async def record(request: httpx.Request) -> None:
            sent.append(request.content.decode())

        http.event_hooks["request"].append(record)
        client = _client(http, legacy)  # the SDK's v0.3 transport
        first = await _send(client, "old protocol")
        assert _answer(first) == "turn 1: old protocol"
        streamed = _client(http, legacy, streaming=True)
        events = [e async for e in streamed.send_message(_message("streamed", first.context_id))]
        assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
        assert get_message_text(events[-1].status_update.status.message, "") == "turn 2: streamed"
        got = await client.get_task(GetTaskRequest(id=first.id))
        assert got.context_id == first.context_id
        methods = [
            m for m in ("message/send", "message/stream", "tasks/get") if any(m in s for s in sent)
        ]
        assert methods == ["message/send", "message/stream", "tasks/get"]


async def test_the_thread_and_tasks_survive_a_server_restart(tmp_path: Path) -> None:
    path = tmp_path / "serve.db"
    async with (
        SQLiteStore(path) as store,
        serving(echo_agent(), store=store) as url,
        httpx.AsyncClient() as http,
    ):
        client = _client(http, await _card(http, f"{url}/a2a/echo"))
        first = await _send(client, "one")
        await _send(client, "two", first.context_id)
    async with (
        SQLiteStore(path) as store,
        serving(echo_agent(), store=store) as url,
        httpx.AsyncClient() as http,
    ):
        client = _client(http, await _card(http, f"{url}/a2a/echo"))
        assert _answer(await client.get_task(GetTaskRequest(id=first.id))) == "turn 1: one"
        third = await _send(client, "three", first.context_id)
        assert _answer(third) == "turn 3: three"


async def test_workflows_and_teams_are_served_too() -> None:
    workflow = WorkflowBuilder(echo_agent("step")).build()
    team = GroupChat([echo_agent("a"), echo_agent("b")], name="pair", max_turns=2)
    async with (
        MemoryStore() as store,
        serving({"flow": workflow, "pair": team}, store=store) as url,
        httpx.AsyncClient() as http,
    ):
        flow = await _card(http, f"{url}/a2a/flow")
        assert [s.tags for s in flow.skills] == [["workflow"]]
        task = await _send(_client(http, flow), "go")
        assert _answer(task) == "turn 1: go"
        pair = await _card(http, f"{url}/a2a/pair")
        task = await _send(_client(http, pair), "start")
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        # two speakers, two messages: a blank line between them, as over Responses
        first, second = _answer(task).split("\n\n")
        assert first.startswith("turn ") and second.startswith("turn ")
        streamed = [
            get_message_text(e.artifact_update.artifact, "")  # type: ignore[arg-type]
            async for e in _client(http, pair, streaming=True).send_message(_message("again"))
            if e.HasField("artifact_update")
        ]
        assert "".join(streamed).count("\n\n") == 1
    await team.close()


def _failing(messages: list[Message], options: ChatOptions) -> str:
    raise RuntimeError("the model broke")


async def test_a_failed_run_is_a_failed_task_naming_the_error() -> None:
    broken = ChatAgent(ScriptedChatClient(_failing), name="broken")
    async with (
        MemoryStore() as store,
        serving(broken, store=store) as url,
        httpx.AsyncClient() as http,
    ):
        client = _client(http, await _card(http, f"{url}/a2a/broken"))
        task = await _send(client, "hi")
        assert task.status.state == TaskState.TASK_STATE_FAILED
        assert "the model broke" in _answer(task)


async def test_a_run_past_the_time_limit_fails_its_task() -> None:
    async def slow(messages: list[Message], options: ChatOptions) -> str:
        await asyncio.sleep(60)
        return "late"

    agent = ChatAgent(ScriptedChatClient(slow), name="slow")
    async with (
        MemoryStore() as store,
        serving(agent, store=store, limits=Limits(request_timeout=0.5)) as url,
        httpx.AsyncClient() as http,
    ):
        card = await _card(http, f"{url}/a2a/slow")
        client = ClientFactory(
            ClientConfig(streaming=False, polling=True, httpx_client=http)
        ).create(card)
        events = [e async for e in client.send_message(_message("hi"))]
        task_id = events[0].task.id
        task = await _wait_final(client, task_id)
        assert task.status.state == TaskState.TASK_STATE_FAILED
        assert "longer than the server's limit of 0.5 s" in _answer(task)


async def _wait_final(client: Client, task_id: str) -> Task:
    async with asyncio.timeout(WAIT):
        while True:
            task = await client.get_task(GetTaskRequest(id=task_id))
            if task.status.state not in (
                TaskState.TASK_STATE_SUBMITTED,
                TaskState.TASK_STATE_WORKING,
            ):
                return task
            await asyncio.sleep(0.05)


async def test_a_token_guards_the_a2a_routes_too() -> None:
    async with (
        MemoryStore() as store,
        serving(echo_agent(), store=store, token="s3cret") as url,
        httpx.AsyncClient() as http,
    ):
        refused = await http.get(f"{url}/a2a/echo/.well-known/agent-card.json")
        assert refused.status_code == 401
        http.headers["Authorization"] = "Bearer s3cret"
        task = await _send(_client(http, await _card(http, f"{url}/a2a/echo")), "hi")
        assert _answer(task) == "turn 1: hi"


async def test_bad_json_rpc_is_a_json_rpc_error(a2a_url: str) -> None:
    bodies: list[Any] = [
        {"jsonrpc": "2.0", "id": 1, "method": "NoSuchMethod", "params": {}},
        {"jsonrpc": "2.0", "id": 2, "method": "SendMessage", "params": {"message": 5}},
        [],
    ]
    async with httpx.AsyncClient() as http:
        for body in bodies:
            answer = await http.post(
                f"{a2a_url}/a2a/echo", json=body, headers={"A2A-Version": "1.0"}
            )
            assert answer.status_code == 200 and "error" in answer.json()


class Waiter(Agent):
    """An agent whose run waits until it is cancelled, and says so."""

    def __init__(self) -> None:
        super().__init__(name="waiter")
        self.started = asyncio.Event()
        self.cancelled = asyncio.Event()

    async def run(
        self, messages: AgentInput = None, *, thread: AgentThread | None = None, **_: Any
    ) -> AgentResponse:
        self.started.set()
        try:
            await asyncio.sleep(120)
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        return AgentResponse([Message("assistant", "too late")])


@pytest.mark.parametrize("method", ["SendMessage", "SendStreamingMessage"])
async def test_a_client_that_disconnects_cancels_its_task(method: str) -> None:
    waiter = Waiter()
    async with MemoryStore() as store, serving(waiter, store=store) as url:
        port = int(url.rsplit(":", 1)[1])
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        body = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": method,
                "params": {
                    "message": {"role": "ROLE_USER", "messageId": "m1", "parts": [{"text": "hi"}]}
                },
            }
        ).encode()
        head = (
            f"POST /a2a/waiter HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(body)}\r\n"
            "Content-Type: application/json\r\nA2A-Version: 1.0\r\n\r\n"
        )
        writer.write(head.encode() + body)
        await writer.drain()
        async with asyncio.timeout(WAIT):
            await waiter.started.wait()
        writer.close()  # the client goes away mid-run
        await writer.wait_closed()
        async with asyncio.timeout(WAIT):
            await waiter.cancelled.wait()
        del reader
        async with httpx.AsyncClient() as http:
            client = _client(http, await _card(http, f"{url}/a2a/waiter"))
            listed = await client.list_tasks(ListTasksRequest())
            (task,) = listed.tasks
            task = await _wait_final(client, task.id)
            assert task.status.state == TaskState.TASK_STATE_CANCELED


@pytest.mark.parametrize("bad", ["has spaces", "x" * 129, "ünïcode", "../../etc"])
async def test_context_ids_the_store_cannot_keep_are_invalid_params(a2a_url: str, bad: str) -> None:
    async with httpx.AsyncClient() as http:
        client = _client(http, await _card(http, f"{a2a_url}/a2a/echo"))
        with pytest.raises(A2AError, match=r"contextId .* is not valid here"):
            await _send(client, "hi", bad)


async def test_messages_on_one_context_take_turns() -> None:
    # a slow model: without a turn per context, both runs would read the same history
    slow = ChatAgent(ScriptedChatClient(count_turns, latency=0.3), name="slow")
    async with (
        MemoryStore() as store,
        serving(slow, store=store) as url,
        httpx.AsyncClient() as http,
    ):
        client = _client(http, await _card(http, f"{url}/a2a/slow"))
        first = await _send(client, "first")
        answers = await asyncio.gather(
            _send(client, "a", first.context_id), _send(client, "b", first.context_id)
        )
        assert sorted(_answer(t)[:6] for t in answers) == ["turn 2", "turn 3"]
        thread = context_thread(store, first.context_id)
        roles = [m.role for m in await thread.get_messages()]
        assert roles == ["user", "assistant"] * 3
