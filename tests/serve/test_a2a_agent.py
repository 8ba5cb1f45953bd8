"""`A2AAgent`: a remote agent whose thread is an A2A context on a cantata server (in this
process, and `cantata serve` in another), as a tool, a workflow step and a team
participant; its thread serializes and survives a restart of the client."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from cantata.agents import AgentResponse, ChatAgent, LocalThread
from cantata.agents.remote_a2a import A2AAgent, A2AThread
from cantata.core import (
    CancellationToken,
    CancelledError,
    ConfigurationError,
    DataContent,
    FunctionApprovalResponseContent,
    FunctionCallContent,
    InvalidMessageError,
    Message,
    ModelError,
    SerializationError,
    TextContent,
    ThreadError,
)
from cantata.models import ScriptedChatClient, tool_call
from cantata.stores import MemoryStore
from cantata.teams import GroupChat
from cantata.workflows import WorkflowBuilder

from ._servers import cli_server, echo_agent, free_port, serving


@pytest.fixture
async def a2a_url() -> AsyncIterator[str]:
    async with MemoryStore() as store, serving(echo_agent(), store=store) as url:
        yield f"{url}/a2a/echo"


async def test_several_turns_on_one_context(a2a_url: str) -> None:
    async with A2AAgent(a2a_url) as remote:
        assert remote.name == "echo"
        thread = remote.create_thread()
        assert thread.id is None
        first = await remote.run("hello", thread=thread)
        assert first.text == "turn 1: hello" and first.author_name == "echo"
        context = thread.id
        assert context is not None and first.thread is thread
        for n in (2, 3):
            answer = await remote.run(f"say {n}", thread=thread)
            assert answer.text == f"turn {n}: say {n}"
        assert thread.id == context  # the context id does not roll
        assert len(await thread.get_messages()) == 6
        streamed = remote.run_stream(
            "streamed", thread=thread, cancellation_token=CancellationToken()
        )
        pieces = [u.text async for u in streamed]
        assert len(pieces) > 1 and "".join(pieces) == "turn 4: streamed"
        assert streamed.response.text == "turn 4: streamed"
        restored = await remote.deserialize_thread(json.dumps(await thread.serialize()))
        assert isinstance(restored, A2AThread) and restored.id == context
        with pytest.raises(ThreadError, match="its history is on the A2A server"):
            await restored.get_messages()
        assert (await remote.run("five", thread=restored)).text == "turn 5: five"


async def test_messages_written_to_the_thread_go_with_the_next_run(a2a_url: str) -> None:
    async with A2AAgent(a2a_url) as remote:
        thread = remote.create_thread()
        await thread.on_new_message(
            [Message("user", "a note"), Message("assistant", "another's", author_name="x")]
        )
        assert len((await thread.serialize())["pending"]) == 2
        answer = await remote.run("and a question", thread=thread)
        assert answer.text == "turn 3: and a question"  # each reached the server as a user
        assert (await thread.serialize())["pending"] == []
        # a message with data goes as a raw part and comes back as DataContent on the server
        await thread.on_new_message(
            Message("user", [TextContent("see"), DataContent("image/png", data=b"\x89PNG")])
        )
        assert (await remote.run("well?", thread=thread)).text == "turn 5: well?"


async def test_usable_as_a_tool_a_workflow_step_and_a_team_participant(a2a_url: str) -> None:
    async with A2AAgent(a2a_url) as remote:
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
        # the server's context gets the task and each of the local agent's answers once
        # (as a user's words), and keeps them: its turn count grows
        assert said == [
            ("local", "turn 1: start"),
            ("echo", "turn 2: turn 1: start"),
            ("local", "turn 2: turn 2: turn 1: start"),
            ("echo", "turn 3: turn 2: turn 2: turn 1: start"),
        ]
        await team.close()


async def test_write_paths_the_server_cannot_take_are_refused(a2a_url: str) -> None:
    async with A2AAgent(a2a_url) as remote:
        thread = remote.create_thread()
        approval = FunctionApprovalResponseContent(
            request_id="a1", function_call=FunctionCallContent("c1", "f", {}), approved=True
        )
        with pytest.raises(InvalidMessageError, match="A2A cannot carry"):
            await thread.on_new_message(Message("user", [approval]))
        with pytest.raises(InvalidMessageError, match="A2A cannot carry"):
            await remote.run(Message("user", [approval]), thread=thread)
        with pytest.raises(ConfigurationError, match="takes no chat options"):
            await remote.run("hi", thread=thread, temperature=0.5)
        with pytest.raises(ConfigurationError, match="instructions_override"):
            await remote.run("hi", thread=thread, instructions_override="be brief")
        await thread.delete()  # nothing reached the server yet: nothing to delete there
        used = remote.create_thread()
        await remote.run("hi", thread=used)
        with pytest.raises(ThreadError, match="A2A has no way to delete context"):
            await used.delete()
        used.forget()
        with pytest.raises(ThreadError, match="deleted"):
            await remote.run("again", thread=used)


async def test_failures_are_typed(a2a_url: str) -> None:
    base = a2a_url.rsplit("/a2a/", 1)[0]
    async with A2AAgent(f"{base}/a2a/nobody") as wrong:
        with pytest.raises(ModelError, match="cannot read the agent card of `nobody`"):
            await wrong.run("hi")
    async with A2AAgent(f"http://127.0.0.1:{free_port()}/a2a/echo") as gone:
        with pytest.raises(ModelError, match="cannot read the agent card"):
            await gone.run("hi")
    with pytest.raises(ConfigurationError, match="http"):
        A2AAgent("127.0.0.1:8000/a2a/echo")
    with pytest.raises(ConfigurationError, match="timeout"):
        A2AAgent(a2a_url, timeout=0)
    async with A2AAgent(a2a_url) as remote:
        with pytest.raises(ThreadError, match="cannot be used with agent"):
            await remote.run("hi", thread=LocalThread())
        with pytest.raises(ThreadError, match="nothing to send"):
            await remote.run()
        token = CancellationToken()
        token.cancel()
        with pytest.raises(CancelledError):
            await remote.run("hi", cancellation_token=token)
        for bad in (
            "{}",
            "[]",
            '{"schema_version": 1, "kind": "local", "id": "x", "state": "created"}',
            '{"schema_version": 1, "kind": "a2a", "id": 5, "state": "created", "pending": []}',
            '{"schema_version": 1, "kind": "a2a", "id": "c", "state": "created", "pending": 3}',
            '{"schema_version": 1, "kind": "a2a", "id": "c", "state": "created",'
            ' "pending": [{"not": "a message"}]}',
        ):
            with pytest.raises(SerializationError):
                await remote.deserialize_thread(bad)


async def test_a_failed_remote_run_is_a_model_error() -> None:
    def broken(messages: list[Message], options: object) -> str:
        raise RuntimeError("the model broke")

    agent = ChatAgent(ScriptedChatClient(broken), name="broken")
    async with (
        MemoryStore() as store,
        serving(agent, store=store, token="t0k") as url,
        A2AAgent(f"{url}/a2a/broken", token="t0k") as remote,
    ):
        with pytest.raises(ModelError, match=r"ended task .* as failed: .*the model broke"):
            await remote.run("hi")
        stream = remote.run_stream("hi")
        with pytest.raises(ModelError, match="as failed"):
            async for _ in stream:
                pass
    async with (
        MemoryStore() as store,
        serving(agent, store=store, token="t0k") as url,
        A2AAgent(f"{url}/a2a/broken") as no_token,
    ):
        with pytest.raises(ModelError, match="cannot read the agent card"):
            await no_token.run("hi")


async def test_a_given_httpx_client_stays_open(a2a_url: str) -> None:
    async with httpx.AsyncClient() as http:
        remote = A2AAgent(a2a_url, httpx_client=http, name="mine")
        assert (await remote.run("hi")).author_name == "mine"
        await remote.aclose()
        assert not http.is_closed


async def test_end_to_end_with_cantata_serve_in_another_process(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/server.db"
    with cli_server("tests/serve/_servers.py:echo", "--store", store) as (url, _proc):
        remote = A2AAgent(f"{url}/a2a/echo", name="far")
        thread = remote.create_thread()
        for n in (1, 2, 3):
            answer = await remote.run(f"message {n}", thread=thread)
            assert answer.text == f"turn {n}: message {n}"
        saved = json.dumps(await thread.serialize())
        await remote.aclose()  # the client "restarts": a new agent, a new HTTP client

        again = A2AAgent(f"{url}/a2a/echo", name="far")
        restored = await again.deserialize_thread(saved)
        assert restored.id == thread.id
        assert (await again.run("message 4", thread=restored)).text == "turn 4: message 4"
        await again.aclose()
    # the server restarts too: its SQLite store still holds the context's thread
    with cli_server("tests/serve/_servers.py:echo", "--store", store) as (url, _proc):
        async with A2AAgent(f"{url}/a2a/echo") as third:
            back = await third.deserialize_thread(json.loads(saved))
            assert (await third.run("message 5", thread=back)).text == "turn 5: message 5"
