"""ChatAgent(retry_policy=...): a model call that failed with a retryable error is made again
(scripted model, and a real OpenAI-compatible HTTP server on 127.0.0.1 answering 503, 429 and
dropping connections); fatal errors are not; a streamed answer is never retried once part
of it reached the caller; cancellation ends the backoff at once; bad policies are refused."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cantata.agents import ChatAgent
from cantata.core import (
    CancellationToken,
    CancelledError,
    ConfigurationError,
    ModelError,
    ModelHTTPError,
)
from cantata.core.retry import RetryPolicy
from cantata.models import OpenAIChatClient, ScriptedChatClient
from cantata.tools import FunctionInvokingChatClient

from .._chat_server import ChatServer, Reply, chat_server, streamed, text_reply

QUICK = RetryPolicy(attempts=3, initial_delay=0)


def http(code: int) -> ModelHTTPError:
    return ModelHTTPError(f"status {code}", status_code=code)


# -- the scripted model --------------------------------------------------------------------


async def test_a_retryable_model_failure_is_asked_again() -> None:
    client = ScriptedChatClient([http(503), TimeoutError("slow"), "hello"])
    agent = ChatAgent(client, retry_policy=QUICK)
    response = await agent.run("hi")
    assert response.text == "hello" and len(client.calls) == 3
    messages = await response.thread.get_messages()
    assert [m.text for m in messages] == ["hi", "hello"]  # no trace of the failed attempts


async def test_a_fatal_model_failure_is_not_asked_again() -> None:
    client = ScriptedChatClient([http(400), "never"])
    with pytest.raises(ModelHTTPError, match="status 400"):
        await ChatAgent(client, retry_policy=QUICK).run("hi")
    assert len(client.calls) == 1


async def test_without_a_policy_nothing_is_retried() -> None:
    client = ScriptedChatClient([http(503), "never"])
    with pytest.raises(ModelHTTPError, match="503"):
        await ChatAgent(client).run("hi")
    assert len(client.calls) == 1


async def test_a_stream_that_failed_before_its_first_chunk_is_retried() -> None:
    client = ScriptedChatClient([http(429), "streamed answer"], chunk_size=4)
    agent = ChatAgent(client, retry_policy=QUICK)
    stream = agent.run_stream("hi")
    text = "".join([u.text async for u in stream])
    assert text == "streamed answer" and len(client.calls) == 2


async def test_the_loop_s_own_policy_serves_an_agent_without_one() -> None:
    client = ScriptedChatClient([http(502), "fine"])
    loop = FunctionInvokingChatClient(client, retry_policy=QUICK)
    assert (await ChatAgent(loop).run("hi")).text == "fine"


async def test_cancellation_ends_the_backoff_at_once() -> None:
    client = ScriptedChatClient([http(503), "never"])
    agent = ChatAgent(client, retry_policy=RetryPolicy(initial_delay=600, max_delay=600))
    token = CancellationToken()
    task = asyncio.ensure_future(agent.run("hi", cancellation_token=token))
    for _ in range(200):
        if client.calls:
            break
        await asyncio.sleep(0.01)
    token.cancel()
    with pytest.raises(CancelledError):
        await asyncio.wait_for(task, 10)  # the backoff alone would wait at least 300 s
    assert len(client.calls) == 1


@given(st.one_of(st.integers(), st.text(), st.booleans(), st.lists(st.integers())))
def test_a_retry_policy_that_is_no_policy_is_refused(bad: Any) -> None:
    with pytest.raises(ConfigurationError, match="retry_policy"):
        ChatAgent(ScriptedChatClient(["x"]), retry_policy=bad)
    with pytest.raises(ConfigurationError, match="retry_policy"):
        FunctionInvokingChatClient(ScriptedChatClient(["x"]), retry_policy=bad)


# -- a real OpenAI-compatible server on 127.0.0.1 ------------------------------------------


def http_agent(server: ChatServer) -> ChatAgent:
    # the SDK's own retries off: the agent's policy is what is tested
    client = OpenAIChatClient("fake-model", base_url=server.url, api_key="k", max_retries=0)
    return ChatAgent(client, retry_policy=QUICK)


async def test_a_503_then_a_429_from_a_real_server_are_retried() -> None:
    busy = Reply(503, {"error": {"message": "busy"}})
    limited = Reply(429, {"error": {"message": "slow down"}}, headers={"retry-after-ms": "1"})
    with chat_server(busy, limited, text_reply("at last")) as server:
        response = await http_agent(server).run("hi")
    assert response.text == "at last" and len(server.requests) == 3


async def test_a_400_from_a_real_server_is_not_retried() -> None:
    bad = Reply(400, {"error": {"message": "bad request"}})
    with chat_server(bad, text_reply("x")) as server, pytest.raises(ModelHTTPError) as info:
        await http_agent(server).run("hi")
    assert info.value.status_code == 400 and len(server.requests) == 1


async def test_a_dropped_connection_before_the_stream_is_retried() -> None:
    with chat_server(Reply(drop=True), streamed("Hel", "lo")) as server:
        text = "".join([u.text async for u in http_agent(server).run_stream("hi")])
    assert text == "Hello" and len(server.requests) == 2


async def test_a_stream_cut_after_its_first_chunk_is_not_retried() -> None:
    with chat_server(streamed("Hel", "lo", cut=True), streamed("again")) as server:
        seen: list[str] = []
        with pytest.raises(ModelError):
            async for update in http_agent(server).run_stream("hi"):
                seen.append(update.text)
    assert "".join(seen) == "Hel" and len(server.requests) == 1


async def test_in_a_durable_run_only_the_answer_that_came_is_journaled() -> None:
    from cantata.stores import MemoryStore
    from cantata.workflows import (
        AgentExecutor,
        EffectJournal,
        StateStoreCheckpointStore,
        WorkflowBuilder,
    )

    client = ScriptedChatClient([http(503), "journaled"])
    agent = ChatAgent(client, name="writer", retry_policy=QUICK)
    store = StateStoreCheckpointStore(MemoryStore())
    wf = WorkflowBuilder(AgentExecutor(agent)).build()
    result = await wf.run("write", checkpoint_store=store, run_id="run-a")
    assert [str(o) for o in result.outputs] == ["journaled"] and len(client.calls) == 2
    journal = EffectJournal(store.store)
    keys = [k for k in await journal.keys("run-a") if k.endswith(":model")]
    assert keys == ["run-a:writer:1:model"]
    found, answer = await journal.lookup(keys[0])
    assert found and answer.text == "journaled"
