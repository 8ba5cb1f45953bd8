"""`A2AAgent` and a remote task waiting for input, against real servers on 127.0.0.1: a
served agent's approval and a served workflow's request_info surface as they do from the
local agent (approval requests, ``request_info`` calls), the thread waits on the task
(serialized and restored in between), and the next run's answers continue that task; as a
workflow participant the request surfaces where a local agent's would. A ``cantata_input``
part another A2A server sends that cannot be read, or a task that ends in any state but
completed, is a typed error (another server's plain question is answered:
tests/agents/test_remote_a2a_servers.py).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from a2a.helpers import new_data_part, new_task, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandlerV2
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes.jsonrpc_routes import create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    Task,
    TaskState,
    TaskStatus,
)
from a2a.types.a2a_pb2 import Message as A2AMessage
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from cantata.agents import AgentResponse, ChatAgent
from cantata.agents.remote_a2a import A2AAgent, A2AThread
from cantata.core import (
    FunctionApprovalRequestContent,
    FunctionCallContent,
    FunctionResultContent,
    InvalidMessageError,
    Message,
    ModelError,
    ModelOutputError,
    SerializationError,
    TextContent,
)
from cantata.core import (
    FunctionApprovalResponseContent as Approval,
)
from cantata.models import ScriptedChatClient, tool_call
from cantata.serve.a2a_executor import context_thread
from cantata.serve.human_input import INPUT_KEY
from cantata.stores import MemoryStore, SQLiteStore
from cantata.workflows import (
    REQUEST_INFO,
    AgentUpdateEvent,
    Executor,
    WorkflowBuilder,
    WorkflowContext,
    handler,
    response_handler,
)
from cantata.workflows import AgentExecutor as WorkflowAgentExecutor

from ._servers import running, serving
from .test_a2a_input import Ask, _asker, _ops_agent


@asynccontextmanager
async def _served(served: Any, name: str) -> AsyncIterator[tuple[A2AAgent, MemoryStore]]:
    async with (
        MemoryStore() as store,
        serving(served, store=store) as url,
        A2AAgent(f"{url}/a2a/{name}") as remote,
    ):
        yield remote, store


async def _run(remote: A2AAgent, streaming: bool, messages: Any, thread: A2AThread) -> Any:
    """A run, streamed or not; a streamed one also gives its updates."""
    if not streaming:
        return await remote.run(messages, thread=thread), []
    stream = remote.run_stream(messages, thread=thread)
    updates = [u async for u in stream]
    return stream.response, updates


async def _restored(remote: A2AAgent, thread: A2AThread) -> A2AThread:
    return await remote.deserialize_thread(json.dumps(await thread.serialize()))


def _calls(response: AgentResponse) -> list[tuple[str, Any]]:
    return [(r.function_call.name, r.function_call.arguments) for r in response.user_input_requests]


# -- a served agent's approval ----------------------------------------------------------


@pytest.mark.parametrize("streaming", [False, True])
async def test_an_approval_surfaces_like_a_local_one_and_yes_runs_the_tool(
    streaming: bool,
) -> None:
    local_deleted: list[str] = []
    local = await _ops_agent(local_deleted).run("delete /tmp/x")
    deleted: list[str] = []
    async with _served(_ops_agent(deleted), "ops") as (remote, store):
        thread = remote.create_thread()
        asked, updates = await _run(remote, streaming, "delete /tmp/x", thread)
        assert asked.finish_reason == local.finish_reason == "approval_required"
        assert _calls(asked) == _calls(local) == [("delete_file", {"path": "/tmp/x"})]
        (request,) = asked.user_input_requests
        assert request.request_id == request.function_call.call_id  # as a local request
        assert "approve the call of `delete_file`" in asked.text
        assert asked.author_name == "ops" and asked.thread is thread
        assert thread.waiting_task_id == asked.response_id and deleted == []
        if streaming:  # the last update carries the request, as a local stream's does
            assert updates[-1].contents[-1] == request
            assert "".join(u.text for u in updates) == asked.text

        restored = await _restored(remote, thread)
        assert isinstance(restored, A2AThread)
        assert restored.waiting_task_id == thread.waiting_task_id
        done, _ = await _run(
            remote, streaming, Message("user", [request.create_response(True)]), restored
        )
        assert done.text == "done: deleted /tmp/x" and done.finish_reason == "stop"
        assert done.response_id == asked.response_id  # the same task, continued
        assert deleted == ["/tmp/x"] and restored.waiting_task_id is None
        assert restored.id == thread.id
        # the server's context holds one conversation: the question, its approval, the end
        server = await context_thread(store, thread.id or "").get_messages()
        approvals = [c for m in server for c in m.contents if isinstance(c, Approval)]
        assert [(a.request_id, a.approved) for a in approvals] == [(request.request_id, True)]
        assert server[0].text == "delete /tmp/x" and server[-1].text == "done: deleted /tmp/x"

        again, _ = await _run(remote, streaming, "thanks", restored)  # a new task
        assert again.finish_reason == "stop" and again.response_id != asked.response_id


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_denied_approval_completes_without_running_the_tool(streaming: bool) -> None:
    deleted: list[str] = []
    async with _served(_ops_agent(deleted), "ops") as (remote, _):
        thread = remote.create_thread()
        asked, _ = await _run(remote, streaming, "delete /tmp/x", thread)
        (request,) = asked.user_input_requests
        done, _ = await _run(
            remote, streaming, Message("user", [request.create_response(False)]), thread
        )
        assert done.finish_reason == "stop" and done.text.startswith("done:")
        assert "deleted" not in done.text and deleted == []
        assert thread.waiting_task_id is None


async def test_text_alone_answers_a_waiting_task_as_the_server_reads_it() -> None:
    deleted: list[str] = []
    async with _served(_ops_agent(deleted), "ops") as (remote, _):
        thread = remote.create_thread()
        asked = await remote.run("delete /tmp/x", thread=thread)
        with pytest.raises(ModelError, match="must be yes or no"):
            await remote.run("maybe", thread=thread)  # the server refuses; still waiting
        assert thread.waiting_task_id == asked.response_id and deleted == []
        done = await remote.run("yes", thread=thread)
        assert done.text == "done: deleted /tmp/x" and thread.waiting_task_id is None


async def test_a_thread_can_leave_the_waiting_task_unanswered() -> None:
    deleted: list[str] = []
    async with _served(_ops_agent(deleted), "ops") as (remote, _):
        thread = remote.create_thread()
        asked = await remote.run("delete /tmp/x", thread=thread)
        thread.stop_waiting()
        restored = await _restored(remote, thread)
        assert restored.waiting_task_id is None
        again = await remote.run("delete /tmp/y", thread=restored)  # a new task, same context
        assert again.response_id != asked.response_id and restored.id == thread.id
        # the served agent, as a local one, closes the unanswered call with an error result
        assert again.finish_reason == "stop" and "not run" in again.text
        assert restored.waiting_task_id is None and deleted == []


async def test_wrong_answers_are_refused_here_and_the_thread_keeps_waiting() -> None:
    deleted: list[str] = []
    async with _served(_ops_agent(deleted), "ops") as (remote, _):
        thread = remote.create_thread()
        asked = await remote.run("delete /tmp/x", thread=thread)
        (request,) = asked.user_input_requests
        stranger = FunctionApprovalRequestContent("nope", FunctionCallContent("nope", "f", {}))
        with pytest.raises(InvalidMessageError, match="waits for approvals of"):
            await remote.run(Message("user", [stranger.create_response(True)]), thread=thread)
        with pytest.raises(InvalidMessageError, match="waits for approvals of"):
            await thread.on_new_message(Message("user", [stranger.create_response(True)]))
        mixed = Message("user", [TextContent("do it"), request.create_response(True)])
        with pytest.raises(InvalidMessageError, match="message of its own"):
            await remote.run(mixed, thread=thread)
        assert thread.waiting_task_id == asked.response_id and deleted == []
        # an answer written to the thread goes with the next run
        await thread.on_new_message(Message("user", [request.create_response(True)]))
        done = await remote.run(thread=thread)
        assert done.text == "done: deleted /tmp/x" and deleted == ["/tmp/x"]


async def test_messages_beside_the_answers_wait_for_the_next_turn() -> None:
    deleted: list[str] = []
    async with _served(_ops_agent(deleted), "ops") as (remote, store):
        thread = remote.create_thread()
        asked = await remote.run("delete /tmp/x", thread=thread)
        (request,) = asked.user_input_requests
        await thread.on_new_message(Message("user", "a note from the team"))
        await remote.run(
            [Message("user", [request.create_response(True)]), "and a question"], thread=thread
        )
        pending = (await thread.serialize())["pending"]
        assert len(pending) == 2  # kept: the answered task had no place for them
        history = [m.text for m in await thread.get_messages()]
        assert history[-2:] == ["a note from the team", "and a question"]
        await remote.run(thread=thread)  # they go now, on a new task
        assert (await thread.serialize())["pending"] == []
        server = [m.text for m in await context_thread(store, thread.id or "").get_messages()]
        assert "a note from the team" in server and "and a question" in server


# -- a served workflow's request_info ---------------------------------------------------


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_workflow_request_surfaces_like_a_local_workflow_agent_and_its_answer_ends_it(
    streaming: bool,
) -> None:
    local = await _asker().as_agent().run("apples")
    (local_call,) = [c for m in local.messages for c in m.function_calls]
    async with _served(_asker(), "asker") as (remote, _):
        thread = remote.create_thread()
        asked, updates = await _run(remote, streaming, "apples", thread)
        assert asked.finish_reason == "tool_calls" and asked.user_input_requests == []
        (call,) = asked.function_calls
        assert call.name == local_call.name == REQUEST_INFO
        assert call.arguments == local_call.arguments  # {"data": <the request, as JSON>}
        assert thread.waiting_task_id == asked.response_id
        if streaming:
            assert updates[-1].contents[-1] == call

        restored = await _restored(remote, thread)
        answer = Message("tool", [FunctionResultContent(call.call_id, 41)])
        done, _ = await _run(remote, streaming, answer, restored)
        assert done.text == "how many apples? -> 42" and done.finish_reason == "stop"
        assert restored.waiting_task_id is None


async def test_a_request_the_workflow_refuses_leaves_the_thread_waiting() -> None:
    async with _served(_asker(), "asker") as (remote, _):
        thread = remote.create_thread()
        asked = await remote.run("pears", thread=thread)
        (call,) = asked.function_calls
        refused = await remote.run(
            Message("tool", [FunctionResultContent(call.call_id, "several")]), thread=thread
        )
        assert refused.finish_reason == "tool_calls" and "must be a int" in refused.text
        assert refused.function_calls == [call] and thread.waiting_task_id == asked.response_id
        done = await remote.run(
            Message("tool", [FunctionResultContent(call.call_id, 2)]), thread=thread
        )
        assert done.text == "how many pears? -> 3"


class _BrokenAsker(Executor):
    @handler
    async def start(self, text: str, ctx: WorkflowContext[None, str]) -> None:
        await ctx.request_info(Ask(f"how many {text}?"), response_type=int)

    @response_handler
    async def got(self, request: Ask, answer: int, ctx: WorkflowContext[None, str]) -> None:
        raise RuntimeError("this asker cannot take the answer")


async def test_a_task_that_fails_while_waited_on_is_a_model_error_and_waits_no_more(
    tmp_path: Path,
) -> None:
    path = tmp_path / "serve.db"
    async with (
        SQLiteStore(path) as store,
        serving(_asker(), store=store) as url,
        A2AAgent(f"{url}/a2a/asker") as remote,
    ):
        thread = remote.create_thread()
        (call,) = (await remote.run("plums", thread=thread)).function_calls
        data = await thread.serialize()
    # the server comes back with a workflow whose handler of the answer fails: the waiting
    # run is restored from the store and answered, and its failure fails the task
    other = WorkflowBuilder(_BrokenAsker("asker"), name="asker").build()
    async with (
        SQLiteStore(path) as store,
        serving(other, store=store) as url,
        A2AAgent(f"{url}/a2a/asker") as remote,
    ):
        restored = await remote.deserialize_thread(data)
        answer = Message("tool", [FunctionResultContent(call.call_id, 3)])
        with pytest.raises(ModelError, match=r"as failed: .*cannot take the answer"):
            await remote.run(answer, thread=restored)
        assert restored.waiting_task_id is None  # a new message starts again
        asked = await remote.run("plums", thread=restored)
        assert asked.finish_reason == "tool_calls"


# -- as a participant -------------------------------------------------------------------


@pytest.mark.parametrize("streaming", [False, True])
async def test_as_a_workflow_participant_its_requests_surface_where_a_local_agents_would(
    streaming: bool,
) -> None:
    deleted: list[str] = []
    async with _served(_ops_agent(deleted), "ops") as (remote, _):
        for agent in (_ops_agent(deleted), remote):
            workflow = WorkflowBuilder(
                WorkflowAgentExecutor(agent, requests_for_input=True)
            ).build()
            if streaming:
                stream = workflow.run_stream("delete /tmp/x")
                updates = [e.data async for e in stream if isinstance(e, AgentUpdateEvent)]
                first = stream.result
                assert any(
                    isinstance(c, FunctionApprovalRequestContent)
                    for u in updates
                    for c in u.contents
                )
            else:
                first = await workflow.run("delete /tmp/x")
            assert first.status == "idle_with_pending_requests"
            (request,) = first.pending_requests
            assert isinstance(request.data, FunctionApprovalRequestContent)
            assert request.data.function_call.name == "delete_file"
            answers = {request.request_id: request.data.create_response(True)}
            if streaming:
                more = first.send_responses_stream(answers)
                _ = [e async for e in more]
                done = more.result
            else:
                done = await first.send_responses(answers)
            assert done.status == "idle"
            (output,) = [o for o in done.outputs if isinstance(o, AgentResponse)][-1:]
            assert output.text == "done: deleted /tmp/x"
        assert deleted == ["/tmp/x", "/tmp/x"]  # once by the local agent, once remotely

    async with _served(_asker(), "asker") as (remote, _):
        workflow = WorkflowBuilder(WorkflowAgentExecutor(remote, requests_for_input=True)).build()
        first = await workflow.run("figs")
        (request,) = first.pending_requests
        assert isinstance(request.data, FunctionCallContent)
        assert request.data.name == REQUEST_INFO
        done = await first.send_responses(
            {request.request_id: FunctionResultContent(request.data.call_id, 6)}
        )
        outputs = [o for o in done.outputs if isinstance(o, AgentResponse)]
        assert outputs[-1].text == "how many figs? -> 7"


async def test_as_a_tool_it_says_what_it_waits_on_like_a_local_agent() -> None:
    deleted: list[str] = []
    async with _served(_ops_agent(deleted), "ops") as (remote, _):
        for agent in (_ops_agent(deleted), remote):
            caller = ChatAgent(
                ScriptedChatClient([tool_call("ops", {"task": "delete /tmp/x"}), "ok"]),
                name="caller",
                tools=[agent.as_tool(name="ops")],
            )
            answer = await caller.run("clean up")
            (result,) = [c for m in answer.messages for c in m.function_results]
            assert result.error is not None
            assert "stopped before answering" in result.error
            assert "waiting on delete_file" in result.error
        assert deleted == []


# -- another A2A server -----------------------------------------------------------------


class _Plain(AgentExecutor):
    """An A2A agent that is not cantata: the message's text picks how its task ends."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
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
        said = context.get_user_input().rsplit("\n", 1)[-1]  # after what waited to be sent
        odd = {"request_id": "r1", "kind": "telepathy", "name": "x", "arguments": {}}
        endings = {
            "odd": (
                updater.requires_input,
                [new_text_part("read my mind"), new_data_part({INPUT_KEY: [odd]})],
            ),
            "reject": (updater.reject, [new_text_part("not today")]),
            "auth": (updater.requires_auth, [new_text_part("log in first")]),
            "cancel": (updater.cancel, [new_text_part("stopped")]),
        }
        end, parts = endings.get(said, (updater.complete, [new_text_part(f"you said {said}")]))
        await end(updater.new_agent_message(parts))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


def _plain_app() -> Starlette:
    card = AgentCard(
        name="plain",
        description="an A2A agent of another make",
        version="1",
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
    )
    handler = DefaultRequestHandlerV2(_Plain(), InMemoryTaskStore(), card)

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


@pytest.mark.parametrize("streaming", [False, True])
async def test_another_servers_unreadable_or_unfinished_tasks_are_typed_errors(
    streaming: bool,
) -> None:
    async with running(_plain_app()) as url, A2AAgent(url, name="plain") as remote:
        thread = remote.create_thread()
        assert (await _run(remote, streaming, "hi", thread))[0].text == "you said hi"
        await thread.on_new_message(Message("user", "kept for later"))
        for said, error, match in [
            ("odd", ModelOutputError, r"cannot read.*telepathy.*read my mind"),
            ("reject", ModelError, "as rejected: not today"),
            ("auth", ModelError, "as auth_required: log in first"),
            ("cancel", ModelError, "as canceled"),
        ]:
            with pytest.raises(error, match=match) as caught:
                await _run(remote, streaming, said, thread)
            assert url in str(caught.value)
            if error is ModelOutputError:
                assert "`plain`" in str(caught.value)
            assert thread.waiting_task_id is None
            assert len((await thread.serialize())["pending"]) == 1  # nothing taken


async def test_a_damaged_waiting_field_is_refused() -> None:
    data = {
        "schema_version": 1,
        "kind": "a2a",
        "id": "ctx",
        "state": "created",
        "pending": [],
        "waiting": {"task_id": "t1", "requests": {"r1": "telepathy"}},
    }
    with pytest.raises(SerializationError, match="'waiting'"):
        await A2AThread.deserialize(data)
    with pytest.raises(SerializationError, match="cannot wait"):
        await A2AThread.deserialize({**data, "id": None, "state": "new", "waiting": {}})
    good = {**data, "waiting": {"task_id": "t1", "requests": {"r1": "approval"}}}
    assert (await A2AThread.deserialize(good)).waiting_task_id == "t1"
    old = {k: v for k, v in data.items() if k != "waiting"}  # written before waiting existed
    assert (await A2AThread.deserialize(old)).waiting_task_id is None


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=10,
)
_REQUEST = st.fixed_dictionaries(
    {},
    optional={
        "request_id": st.sampled_from(["r1", "r2", ""]) | _JSON,
        "kind": st.sampled_from(["approval", "request_info", "other"]) | _JSON,
        "name": st.sampled_from(["delete_file", REQUEST_INFO, ""]) | _JSON,
        "arguments": _JSON,
    },
)


@settings(max_examples=300, deadline=None)
@given(listed=st.lists(_REQUEST, max_size=3) | _JSON)
def test_any_request_data_is_read_whole_or_refused_with_a_model_output_error(
    listed: Any,
) -> None:
    status = TaskStatus(
        state=TaskState.TASK_STATE_INPUT_REQUIRED,
        message=A2AMessage(parts=[new_text_part("asks"), new_data_part({INPUT_KEY: listed})]),
    )
    task = Task(id="t1", context_id="c1", status=status)
    remote = A2AAgent("http://127.0.0.1:9/a2a/ops")
    thread = remote.create_thread()
    turn = remote._request(thread, [Message("user", "hi")])
    try:
        response = remote._finish(thread, turn, task, "m1")
    except ModelOutputError as exc:
        assert "http://127.0.0.1:9/a2a/ops" in str(exc) and "asks" in str(exc)
        assert thread.waiting_task_id is None and thread.id is None
        return
    assert thread.waiting_task_id == "t1"
    assert response.finish_reason in ("approval_required", "tool_calls")
    ids = [r.request_id for r in response.user_input_requests]
    ids += [c.call_id for c in response.function_calls]
    assert len(listed) > 0 and sorted(ids) == sorted(r["request_id"] for r in listed)


@settings(max_examples=200, deadline=None)
@given(waiting=_JSON)
async def test_any_waiting_field_loads_or_is_a_serialization_error(waiting: Any) -> None:
    data = {"schema_version": 1, "kind": "a2a", "id": "ctx", "state": "created"}
    try:
        thread = await A2AThread.deserialize({**data, "pending": [], "waiting": waiting})
    except SerializationError:
        return
    assert waiting is None or thread.waiting_task_id == waiting["task_id"]
