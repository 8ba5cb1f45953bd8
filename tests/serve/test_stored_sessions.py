"""Waiting sessions live in the server's store: a served team's pending approval (and a
served workflow's request) is answered by a server restarted after kill -9, or by another
server process over the same store, and the run goes on as if it had never stopped."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.helpers import get_data_parts, get_message_text, new_data_part, new_text_message
from a2a.types.a2a_pb2 import GetTaskRequest, Message, Role, SendMessageRequest, Task, TaskState
from a2a.utils.errors import A2AError
from openai import AsyncOpenAI

from cantata.agents import AgentResponse, LocalThread
from cantata.core import (
    FunctionApprovalRequestContent,
    FunctionApprovalResponseContent,
    FunctionCallContent,
    FunctionResultContent,
)
from cantata.core import Message as CantataMessage
from cantata.serve.a2a_executor import ServedAgentExecutor
from cantata.serve.human_input import INPUT_KEY, input_requests
from cantata.serve.served import Served
from cantata.stores import MemoryStore, SQLiteStore
from cantata.teams import TeamAgent
from cantata.workflows import (
    Executor,
    StateStoreCheckpointStore,
    WorkflowAgent,
    WorkflowBuilder,
    WorkflowContext,
    handler,
    response_handler,
)

from ._paying_team import make_team
from ._servers import cli_server

TEAM = "tests/serve/_paying_team.py:team"


def _asked(response: AgentResponse) -> FunctionApprovalRequestContent:
    (request,) = [
        c
        for m in response.messages
        for c in m.contents
        if type(c) is FunctionApprovalRequestContent
    ]
    return request


def _said(text: str) -> list[str]:
    """The transcript in a served answer's text: one line per message."""
    return [line for line in text.splitlines() if line]


async def _reference() -> tuple[str, list[str]]:
    """What the team says asking, and the transcript after the approval (one text per
    message), run in one process with no restart."""
    agent = TeamAgent(make_team())
    thread = LocalThread()
    asked = await agent.run("pay 5", thread=thread)
    (request,) = [
        c for m in asked.messages for c in m.contents if type(c) is FunctionApprovalRequestContent
    ]
    answer = FunctionApprovalResponseContent(request.request_id, request.function_call, True)
    done = await agent.run(CantataMessage("user", [answer]), thread=thread)
    return asked.text, [m.text for m in done.messages if m.text]


async def test_a_fresh_team_agent_answers_a_session_another_left_in_the_store(
    tmp_path: Path,
) -> None:
    expected_ask, expected_done = await _reference()
    async with SQLiteStore(tmp_path / "s.db") as store:
        checkpoints = StateStoreCheckpointStore(store)
        first = TeamAgent(make_team(), checkpoint_store=checkpoints)
        thread = LocalThread()
        asked = await first.run("pay 5", thread=thread)
        assert asked.finish_reason == "approval_required"
        assert asked.text == expected_ask
        (request,) = [
            c
            for m in asked.messages
            for c in m.contents
            if type(c) is FunctionApprovalRequestContent
        ]
        # another agent view of a new team object, and a new thread object with the same
        # messages: what a restarted server has
        second = TeamAgent(make_team(), checkpoint_store=checkpoints)
        copy = LocalThread()
        await copy.on_new_message(await thread.get_messages())
        answer = FunctionApprovalResponseContent(request.request_id, request.function_call, True)
        done = await second.run(CantataMessage("user", [answer]), thread=copy)
        assert [m.text for m in done.messages if m.text] == expected_done
        assert expected_done == ["payer says paid 5", "checker saw: payer says paid 5"]


class _Asker(Executor):
    @handler
    async def start(self, text: str, ctx: WorkflowContext[None, str]) -> None:
        await ctx.request_info(f"how many {text}?", response_type=int)

    @response_handler
    async def got(self, request: str, answer: int, ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output(f"{request} -> {answer + 1}")


async def test_a_fresh_workflow_agent_answers_a_run_another_left_in_the_store(
    tmp_path: Path,
) -> None:
    async with SQLiteStore(tmp_path / "w.db") as store:
        checkpoints = StateStoreCheckpointStore(store)

        def view() -> WorkflowAgent:
            workflow = WorkflowBuilder(_Asker("asker"), name="asker").build()
            return WorkflowAgent(workflow, checkpoint_store=checkpoints)

        thread = LocalThread()
        asked = await view().run("apples", thread=thread)
        (call,) = [c for m in asked.messages for c in m.contents if type(c) is FunctionCallContent]
        messages = await thread.get_messages()
        assert input_requests(messages)[0].stored  # the server needs no held run
        copy = LocalThread()
        await copy.on_new_message(messages)
        answer = CantataMessage("tool", [FunctionResultContent(call.call_id, result=6)])
        done = await view().run(answer, thread=copy)
        assert done.text == "how many apples? -> 7"


def _openai(url: str) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=30)


def _approval_id(response: Any) -> str:
    (item,) = [o for o in response.output if o.type == "mcp_approval_request"]
    return str(item.id)


def _paid(log: Path) -> list[str]:
    return log.read_text().split("\n")[:-1] if log.exists() else []


async def test_kill_9_with_a_pending_approval_then_restart_and_approve(tmp_path: Path) -> None:
    _, expected_done = await _reference()
    store = f"sqlite:///{tmp_path / 'serve.db'}"
    log = tmp_path / "paid.log"
    env = {"PAY_LOG": str(log)}
    with cli_server(TEAM, "--store", store, env=env) as (url, proc):
        async with _openai(url) as client:
            asked = await client.responses.create(model="payers", input="pay 5")
        async with httpx.AsyncClient() as http:
            a2a = await _a2a(http, f"{url}/a2a/payers")
            task = await _task(a2a, _text("pay 5"))
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    assert _paid(log) == []
    with cli_server(TEAM, "--store", store, env=env) as (url, proc):
        async with _openai(url) as client:
            done = await client.responses.create(
                model="payers",
                previous_response_id=asked.id,
                input=[
                    {
                        "type": "mcp_approval_response",
                        "approval_request_id": _approval_id(asked),
                        "approve": True,
                    }
                ],
            )
        assert _said(done.output_text) == expected_done
        async with httpx.AsyncClient() as http:
            a2a = await _a2a(http, f"{url}/a2a/payers")
            (request,) = _requests(task)
            finished = await _task(a2a, _data({"answers": {request["request_id"]: True}}, task))
        assert finished.status.state == TaskState.TASK_STATE_COMPLETED
        assert get_message_text(finished.status.message) == "\n\n".join(expected_done)
        restarted = proc.pid
    assert [line.split()[1] for line in _paid(log)] == ["5", "5"]
    assert {int(line.split()[0]) for line in _paid(log)} == {restarted}


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_two_server_processes_on_one_store_share_responses_and_a2a_tasks(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    if backend == "sqlite":
        store = f"sqlite:///{tmp_path / 'shared.db'}"
    else:
        store = request.getfixturevalue("postgres_dsn")
    _, expected_done = await _reference()
    with (
        cli_server(TEAM, "--store", store) as (one, _),
        cli_server(TEAM, "--store", store) as (two, _),
    ):
        async with _openai(one) as first, _openai(two) as second:
            asked = await first.responses.create(model="payers", input="pay 5")
            fetched = await second.responses.retrieve(asked.id)
            assert fetched.id == asked.id
            done = await second.responses.create(
                model="payers",
                previous_response_id=asked.id,
                input=[
                    {
                        "type": "mcp_approval_response",
                        "approval_request_id": _approval_id(asked),
                        "approve": True,
                    }
                ],
            )
            assert _said(done.output_text) == expected_done
        async with httpx.AsyncClient() as http:
            a = await _a2a(http, f"{one}/a2a/payers")
            b = await _a2a(http, f"{two}/a2a/payers")
            task = await _task(a, _text("pay 5"))
            seen = await b.get_task(GetTaskRequest(id=task.id))
            assert seen.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            (request,) = _requests(seen)
            finished = await _task(b, _data({"answers": {request["request_id"]: True}}, task))
            assert get_message_text(finished.status.message) == "\n\n".join(expected_done)
            again = await a.get_task(GetTaskRequest(id=task.id))
            assert again.status.state == TaskState.TASK_STATE_COMPLETED


async def _a2a(http: httpx.AsyncClient, url: str) -> Client:
    card = await A2ACardResolver(http, url).get_agent_card()
    return ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)


def _text(text: str) -> SendMessageRequest:
    return SendMessageRequest(message=new_text_message(text, role=Role.ROLE_USER))


def _data(data: Any, task: Task) -> SendMessageRequest:
    message = Message(
        role=Role.ROLE_USER,
        message_id=f"m-{os.urandom(6).hex()}",
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
        elif event.HasField("status_update"):
            update = event.status_update
            task = task or Task(id=update.task_id, context_id=update.context_id)
            task.status.CopyFrom(update.status)
    assert task is not None
    return task


def _requests(task: Task) -> list[dict[str, Any]]:
    (data,) = get_data_parts(task.status.message.parts)
    requests: list[dict[str, Any]] = data[INPUT_KEY]
    return requests


async def test_cantata_serve_workers_2_answers_from_both_processes_over_one_store(
    tmp_path: Path,
) -> None:
    _, expected_done = await _reference()
    store = f"sqlite:///{tmp_path / 'workers.db'}"
    target = "tests/serve/_paying_team.py:both"
    with cli_server(target, "--store", store, "--workers", "2") as (url, _):
        pids: set[str] = set()
        for _attempt in range(60):  # a new connection each time; the kernel spreads them
            async with _openai(url) as client:
                answer = await client.chat.completions.create(
                    model="pid", messages=[{"role": "user", "content": "pid?"}]
                )
            pids.add(answer.choices[0].message.content or "")
            if len(pids) == 2:
                break
        assert len(pids) == 2, f"one process answered every request: {pids}"
        for _round in range(4):  # each request may land on either worker
            async with _openai(url) as client:
                asked = await client.responses.create(model="payers", input="pay 5")
            async with _openai(url) as client:
                done = await client.responses.create(
                    model="payers",
                    previous_response_id=asked.id,
                    input=[
                        {
                            "type": "mcp_approval_response",
                            "approval_request_id": _approval_id(asked),
                            "approve": True,
                        }
                    ],
                )
            assert _said(done.output_text) == expected_done
            async with httpx.AsyncClient() as http:
                task = await _task(await _a2a(http, f"{url}/a2a/payers"), _text("pay 5"))
            async with httpx.AsyncClient() as http:
                (request,) = _requests(task)
                answer_task = await _task(
                    await _a2a(http, f"{url}/a2a/payers"),
                    _data({"answers": {request["request_id"]: True}}, task),
                )
            assert get_message_text(answer_task.status.message) == "\n\n".join(expected_done)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_two_answers_at_once_to_two_server_processes_one_goes_on(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    """The same approval sent at the same moment to two `cantata serve` processes on one
    store: the session is claimed in the store before it resumes, so one answer goes on
    (the uninterrupted transcript, the tool run once) and the other is a 409."""
    if backend == "sqlite":
        store = f"sqlite:///{tmp_path / 'race.db'}"
    else:
        store = request.getfixturevalue("postgres_dsn")
    _, expected_done = await _reference()
    log = tmp_path / "paid.log"
    env = {"PAY_LOG": str(log)}
    with (
        cli_server(TEAM, "--store", store, env=env) as (one, _),
        cli_server(TEAM, "--store", store, env=env) as (two, _),
    ):
        for _round in range(3):
            async with _openai(one) as first, _openai(two) as second:
                asked = await first.responses.create(model="payers", input="pay 5")
                answer = [
                    {
                        "type": "mcp_approval_response",
                        "approval_request_id": _approval_id(asked),
                        "approve": True,
                    }
                ]
                results = await asyncio.gather(
                    *(
                        c.responses.create(
                            model="payers", previous_response_id=asked.id, input=answer
                        )
                        for c in (first, second)
                    ),
                    return_exceptions=True,
                )
            went_on = [r for r in results if not isinstance(r, BaseException)]
            refused = [r for r in results if isinstance(r, BaseException)]
            assert len(went_on) == 1, results
            assert _said(went_on[0].output_text) == expected_done
            (conflict,) = refused
            assert isinstance(conflict, openai.ConflictError), conflict
            assert conflict.status_code == 409
            assert conflict.code == "already_answered"
            assert "answered by another request" in conflict.message
        assert [line.split()[1] for line in _paid(log)] == ["5", "5", "5"]
        async with httpx.AsyncClient(timeout=30) as http:
            a = await _a2a(http, f"{one}/a2a/payers")
            b = await _a2a(http, f"{two}/a2a/payers")
            for _round in range(3):
                task = await _task(a, _text("pay 5"))
                (asked_for,) = _requests(task)
                answer_ = {"answers": {asked_for["request_id"]: True}}
                tasks = await asyncio.gather(
                    _task(a, _data(answer_, task)),
                    _task(b, _data(answer_, task)),
                    return_exceptions=True,
                )
                done_ = [t for t in tasks if isinstance(t, Task)]
                errors = [t for t in tasks if not isinstance(t, Task)]
                assert len(done_) == 1 and len(errors) == 1, tasks
                assert get_message_text(done_[0].status.message) == "\n\n".join(expected_done)
                # refused by the claim, or (the other ahead) by the check that the task waits
                assert isinstance(errors[0], A2AError), errors
                assert re.search("answered by another request|nothing waits", str(errors[0]))
                final = await b.get_task(GetTaskRequest(id=task.id))
                assert final.status.state == TaskState.TASK_STATE_COMPLETED
        assert [line.split()[1] for line in _paid(log)] == ["5"] * 6


async def test_an_ended_session_takes_its_checkpoints_out_of_the_store(tmp_path: Path) -> None:
    """Served runs do not grow the store: a waiting session keeps its checkpoints, one that
    ended (done, or failed) leaves nothing of its run behind."""
    async with SQLiteStore(tmp_path / "bounded.db") as store:
        checkpoints = StateStoreCheckpointStore(store)
        agent = TeamAgent(make_team(), checkpoint_store=checkpoints)
        threads = [LocalThread() for _ in range(3)]
        asked = [await agent.run("pay 5", thread=t) for t in threads]
        waiting = await store.keys("wf:")
        assert len(await store.keys("wf:idx:")) >= 3
        for thread, response in zip(threads[:2], asked[:2], strict=True):
            request = _asked(response)
            answer = FunctionApprovalResponseContent(
                request.request_id, request.function_call, True
            )
            await agent.run(CantataMessage("user", [answer]), thread=thread)
        # the two answered sessions are gone; the third still waits, whole
        left = await store.keys("wf:")
        assert left and set(left) < set(waiting)
        (run,) = {k.split(":")[2] for k in await store.keys("wf:idx:")}
        third = _asked(asked[2])
        again = TeamAgent(make_team(), checkpoint_store=checkpoints)
        copy = LocalThread()
        await copy.on_new_message(await threads[2].get_messages())
        answer = FunctionApprovalResponseContent(third.request_id, third.function_call, True)
        done = await again.run(CantataMessage("user", [answer]), thread=copy)
        assert done.finish_reason != "approval_required"
        assert await store.keys("wf:") == []
        assert await store.keys(f"wf:claim:{run}") == []

        workflow_store = StateStoreCheckpointStore(store)
        failing = WorkflowBuilder(_Failing("fails"), name="fails").build()
        with pytest.raises(Exception, match="broken on purpose"):
            await WorkflowAgent(failing, checkpoint_store=workflow_store).run("x")
        asker = WorkflowAgent(
            WorkflowBuilder(_Asker("asker"), name="asker").build(), checkpoint_store=workflow_store
        )
        thread = LocalThread()
        first = await asker.run("pears", thread=thread)
        assert await store.keys("wf:idx:")
        (call,) = [c for m in first.messages for c in m.contents if type(c) is FunctionCallContent]
        answer_ = CantataMessage("tool", [FunctionResultContent(call.call_id, result=1)])
        assert (await asker.run(answer_, thread=thread)).text == "how many pears? -> 2"
        assert await store.keys("wf:") == []
        assert await store.length("wf:log:") == 0


class _Failing(Executor):
    @handler
    async def start(self, text: str, ctx: WorkflowContext[None, str]) -> None:
        raise RuntimeError("broken on purpose")


async def test_an_answer_claimed_by_a_process_that_died_is_taken_over_after_its_deadline() -> None:
    """The A2A answer claim is the store's put-if-absent; a claim outlives its request only
    when the process holding it died, so past the run's deadline another answer takes it."""
    store = MemoryStore()
    served = Served("payers", "team", None, TeamAgent(make_team()))
    executor = ServedAgentExecutor(served, store, timeout=5.0)
    assert await executor._claim("t1")
    assert not await executor._claim("t1")  # held: the other answer is refused
    await store.put("a2a:answering:t1", {"until": time.time() - 1})  # its holder died
    assert await executor._claim("t1")
    assert not await executor._claim("t1")


async def test_an_answer_another_request_holds_is_refused_before_the_task_is_touched(
    tmp_path: Path,
) -> None:
    """While another request (here, another process) holds the answer to a waiting A2A
    task, an answer is refused with 'answered by another request' before the SDK takes it:
    the task still waits (the SDK would have marked it FAILED over the other run), and once
    the claim is gone the same answer goes on."""
    _, expected_done = await _reference()
    path = tmp_path / "held.db"
    with cli_server(TEAM, "--store", f"sqlite:///{path}", env={}) as (url, _):
        async with httpx.AsyncClient(timeout=30) as http, SQLiteStore(path) as store:
            client = await _a2a(http, f"{url}/a2a/payers")
            task = await _task(client, _text("pay 5"))
            (asked_for,) = _requests(task)
            answer = _data({"answers": {asked_for["request_id"]: True}}, task)
            await store.put(f"a2a:answering:{task.id}", {"until": time.time() + 600})
            with pytest.raises(A2AError, match="answered by another request"):
                await _task(client, answer)
            held = await client.get_task(GetTaskRequest(id=task.id))
            assert held.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            assert await store.get(f"a2a:answering:{task.id}") is not None  # left to its holder
            await store.delete(f"a2a:answering:{task.id}")
            done = await _task(client, answer)
            assert done.status.state == TaskState.TASK_STATE_COMPLETED
            assert get_message_text(done.status.message) == "\n\n".join(expected_done)
            assert await store.get(f"a2a:answering:{task.id}") is None
