"""`ResponsesAgent`: a remote agent whose thread is the last response id on a cantata server
(in this process, and `cantata serve` in another), as a tool, a workflow step and a team
participant; its thread serializes and survives a restart of the client."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from cantata.agents import AgentResponse, ChatAgent, LocalThread
from cantata.agents.remote_responses import ResponsesAgent, ResponsesThread
from cantata.core import (
    CancellationToken,
    CancelledError,
    Message,
    ModelError,
    ModelHTTPError,
    SerializationError,
    ThreadError,
)
from cantata.models import ScriptedChatClient, tool_call
from cantata.teams import GroupChat
from cantata.workflows import WorkflowBuilder

from ._servers import cli_server, echo_agent, free_port


async def test_several_turns_send_only_what_is_new(echo_url: str) -> None:
    async with ResponsesAgent(f"{echo_url}/v1", model="echo") as remote:
        thread = remote.create_thread()
        assert thread.id is None
        first = await remote.run("hello", thread=thread)
        assert first.text == "turn 1: hello" and first.author_name == "echo"
        assert thread.id == first.response_id
        ids = [thread.id]
        for n in (2, 3):
            answer = await remote.run(f"say {n}", thread=thread)
            assert answer.text == f"turn {n}: say {n}"
            ids.append(thread.id)
        assert len(set(ids)) == 3  # the id rolls with every turn
        assert len(await thread.get_messages()) == 6  # the turns this object took part in
        restored = await remote.deserialize_thread(await thread.serialize())
        assert (await thread.serialize())["history"] is None  # the server has it
        with pytest.raises(ThreadError, match="its history is on the Responses server"):
            await restored.get_messages()
        streamed = remote.run_stream(
            "streamed", thread=thread, cancellation_token=CancellationToken()
        )
        pieces = [u.text async for u in streamed]
        assert len(pieces) > 1 and "".join(pieces) == "turn 4: streamed"
        assert streamed.response.thread is thread and thread.id not in ids


async def test_messages_written_to_the_thread_go_with_the_next_run(echo_url: str) -> None:
    async with ResponsesAgent(f"{echo_url}/v1", model="echo") as remote:
        thread = remote.create_thread()
        await thread.on_new_message(Message("user", "a note from elsewhere"))
        answer = await remote.run("and a question", thread=thread)
        assert answer.text == "turn 2: and a question"  # the note reached the server
        data = await thread.serialize()
        assert data["pending"] == []


async def test_without_server_storage_the_local_history_is_sent(echo_url: str) -> None:
    async with (
        ResponsesAgent(f"{echo_url}/v1", model="echo", store=False) as remote,
        httpx.AsyncClient() as http,
    ):
        thread = remote.create_thread()
        await remote.run("one", thread=thread)
        second = await remote.run("two", thread=thread)
        assert second.text == "turn 2: two"
        assert [m.text for m in await thread.get_messages()] == [
            "one",
            "turn 1: one",
            "two",
            "turn 2: two",
        ]
        kept = await http.get(f"{echo_url}/v1/responses/{thread.id}")
        assert kept.status_code == 404  # nothing stored on the server
        restored = await remote.deserialize_thread(json.dumps(await thread.serialize()))
        third = await remote.run("three", thread=restored)
        assert third.text == "turn 3: three"
        with pytest.raises(ThreadError, match="store=False"):
            async with ResponsesAgent(f"{echo_url}/v1", model="echo") as storing:
                await storing.deserialize_thread(await thread.serialize())


async def test_usable_as_a_tool_a_workflow_step_and_a_team_participant(echo_url: str) -> None:
    async with ResponsesAgent(f"{echo_url}/v1", model="echo") as remote:
        caller = ChatAgent(
            ScriptedChatClient([tool_call("echo", {"task": "from the tool"}), "done"]),
            name="caller",
            tools=[remote.as_tool()],
        )
        answer = await caller.run("use the remote agent")
        results = [c.result for m in answer.messages for c in m.function_results]
        assert results == ["turn 1: from the tool"]

        workflow = WorkflowBuilder(remote).build()
        result = await workflow.run("as a step")
        outputs = [o for o in result.outputs if isinstance(o, AgentResponse)]
        assert [o.text for o in outputs] == ["turn 1: as a step"]

        team = GroupChat([echo_agent("local"), remote], name="mixed", max_turns=4)
        result_t = await team.run("start")
        said = [(m.author_name, m.text) for m in result_t.messages if m.role == "assistant"]
        # the remote agent's server thread gets the task and each of the local agent's
        # answers (as a user's words) once, and keeps them: its turn count grows
        assert said == [
            ("local", "turn 1: start"),
            ("echo", "turn 2: turn 1: start"),
            ("local", "turn 2: turn 2: turn 1: start"),
            ("echo", "turn 3: turn 2: turn 2: turn 1: start"),
        ]
        await team.close()


async def test_failures_are_typed(echo_url: str) -> None:
    async with ResponsesAgent(f"{echo_url}/v1", model="nobody") as wrong:
        with pytest.raises(ModelHTTPError, match="HTTP 404") as info:
            await wrong.run("hi")
        assert info.value.status_code == 404
    async with ResponsesAgent(f"http://127.0.0.1:{free_port()}/v1", model="echo") as gone:
        with pytest.raises(ModelError, match="cannot reach the Responses server"):
            await gone.run("hi")
    async with ResponsesAgent(f"{echo_url}/v1", model="echo") as remote:
        with pytest.raises(ThreadError, match="cannot be used with agent"):
            await remote.run("hi", thread=LocalThread())
        with pytest.raises(ThreadError, match="nothing to send"):
            await remote.run()
        token = CancellationToken()
        token.cancel()
        with pytest.raises(CancelledError):
            await remote.run("hi", cancellation_token=token)
        for bad in ("{}", "[]", '{"schema_version": 1, "kind": "local", "id": "x"}'):
            with pytest.raises(SerializationError):
                await remote.deserialize_thread(bad)
        thread = remote.create_thread()
        await remote.run("hi", thread=thread)
        damaged = await thread.serialize()
        damaged["history"] = [{"not": "a message"}]
        with pytest.raises(SerializationError):
            await remote.deserialize_thread(damaged)
        await thread.delete()  # deletes its response on the server
        with pytest.raises(ThreadError, match="deleted"):
            await remote.run("again", thread=thread)


async def test_end_to_end_with_cantata_serve_in_another_process(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/server.db"
    with cli_server("tests/serve/_servers.py:echo", "--store", store) as (url, _proc):
        remote = ResponsesAgent(f"{url}/v1", model="echo", name="far")
        thread = remote.create_thread()
        for n in (1, 2, 3):
            answer = await remote.run(f"message {n}", thread=thread)
            assert answer.text == f"turn {n}: message {n}"
        saved = json.dumps(await thread.serialize())
        await remote.aclose()  # the client "restarts": a new agent, a new HTTP client

        again = ResponsesAgent(f"{url}/v1", model="echo", name="far")
        restored = await again.deserialize_thread(saved)
        assert isinstance(restored, ResponsesThread) and restored.id == thread.id
        answer = await again.run("message 4", thread=restored)
        assert answer.text == "turn 4: message 4"
        await again.aclose()
    # the server restarts too: its SQLite store still holds the conversation
    with cli_server("tests/serve/_servers.py:echo", "--store", store) as (url, _proc):
        async with ResponsesAgent(f"{url}/v1", model="echo") as third:
            back = await third.deserialize_thread(json.loads(saved))
            assert (await third.run("message 5", thread=back)).text == "turn 4: message 5"
            assert (await third.run("message 6", thread=back)).text == "turn 5: message 6"
