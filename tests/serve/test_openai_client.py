"""The OpenAI-compatible endpoints through the official `openai` client, on a real server."""

from __future__ import annotations

import openai
import pytest
from openai import AsyncOpenAI

from cantata.agents import ChatAgent
from cantata.core import Message
from cantata.models import (
    ChatOptions,
    OpenAIChatClient,
    ScriptedChatClient,
    allow_model_requests,
)
from cantata.stores import MemoryStore
from cantata.teams import GroupChat
from cantata.workflows import WorkflowBuilder

from ._servers import echo_agent, serving


def _client(url: str, **kwargs: object) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=30, **kwargs)  # type: ignore[arg-type]


async def test_models_lists_what_is_served(echo_url: str) -> None:
    async with _client(echo_url) as client:
        models = await client.models.list()
        assert [m.id for m in models.data] == ["echo"]
        assert (await client.models.retrieve("echo")).id == "echo"
        with pytest.raises(openai.NotFoundError, match="not served here"):
            await client.models.retrieve("nope")


async def test_chat_completion_runs_the_agent_on_the_messages(echo_url: str) -> None:
    async with _client(echo_url) as client:
        answer = await client.chat.completions.create(
            model="echo",
            messages=[
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "one"},
                {"role": "assistant", "content": "turn 1: one"},
                {"role": "user", "content": [{"type": "text", "text": "two"}]},
            ],
        )
    assert answer.choices[0].message.content == "turn 2: two"
    assert answer.choices[0].finish_reason == "stop"
    assert answer.model == "echo"


async def test_chat_completion_streams_chunks_and_usage(echo_url: str) -> None:
    async with _client(echo_url) as client:
        stream = await client.chat.completions.create(
            model="echo",
            messages=[{"role": "user", "content": "hello there"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        pieces = [c async for c in stream]
    text = "".join(c.choices[0].delta.content or "" for c in pieces if c.choices)
    assert text == "turn 1: hello there"
    assert len([c for c in pieces if c.choices and c.choices[0].delta.content]) > 1
    assert pieces[-2].choices[0].finish_reason == "stop"
    assert pieces[-1].usage is not None


async def test_unknown_model_is_a_404_in_openai_shape(echo_url: str) -> None:
    async with _client(echo_url) as client:
        with pytest.raises(openai.NotFoundError) as info:
            await client.chat.completions.create(
                model="missing", messages=[{"role": "user", "content": "hi"}]
            )
    assert "'echo'" in str(info.value)  # says what is served
    assert info.value.body["code"] == "model_not_found"  # type: ignore[index]


async def test_bad_message_is_a_400_naming_the_field(echo_url: str) -> None:
    async with _client(echo_url) as client:
        with pytest.raises(openai.BadRequestError, match=r"messages\[0\]\.role"):
            await client.chat.completions.create(
                model="echo",
                messages=[{"role": "robot", "content": "hi"}],  # type: ignore[list-item,misc]
            )


async def test_a_failing_run_is_a_500_with_the_error_named() -> None:
    broken = ChatAgent(ScriptedChatClient([]), name="broken")  # the script is empty
    async with MemoryStore() as store, serving(broken, store=store) as url, _client(url) as client:
        with pytest.raises(openai.InternalServerError, match="ran out of turns") as info:
            await client.chat.completions.create(
                model="broken", messages=[{"role": "user", "content": "hi"}]
            )
        assert info.value.body["code"] == "ModelError"  # type: ignore[index]
        stream = await client.chat.completions.create(
            model="broken", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        with pytest.raises(openai.APIError, match="ran out of turns"):
            async for _ in stream:
                pass


async def test_cantatas_own_openai_client_talks_to_the_server(echo_url: str) -> None:
    client = OpenAIChatClient(model="echo", base_url=f"{echo_url}/v1", api_key="unused")
    agent = ChatAgent(client, name="caller", owns_client=True)
    # the 'model' is our own server on loopback, answering from a scripted client
    with allow_model_requests():
        async with agent:
            first = await agent.run("hello")
            assert first.text == "turn 1: hello"
            second = await agent.run("again", thread=first.thread)  # the client sends history
            assert second.text == "turn 2: again"
            streamed = agent.run_stream("third", thread=second.thread)
            chunks = [u.text async for u in streamed]
            assert "".join(chunks) == "turn 3: third"


async def test_a_workflow_and_a_team_answer_as_models() -> None:
    workflow = WorkflowBuilder(echo_agent("inner")).build()
    team = GroupChat([echo_agent("first"), echo_agent("second")], name="pair", max_turns=2)
    served = {"flow": workflow, "pair": team}
    async with MemoryStore() as store, serving(served, store=store) as url, _client(url) as client:
        kinds = {m.id: m.model_extra["cantata_kind"] for m in (await client.models.list()).data}  # type: ignore[index]
        assert kinds == {"flow": "workflow", "pair": "team"}
        answer = await client.chat.completions.create(
            model="flow", messages=[{"role": "user", "content": "go"}]
        )
        assert answer.choices[0].message.content == "turn 1: go"
        answer = await client.chat.completions.create(
            model="pair", messages=[{"role": "user", "content": "go"}]
        )
        # both speakers answer, one after the other; the second saw the first's answer
        assert answer.choices[0].message.content == "turn 1: go\n\nturn 2: turn 1: go"


def _report_options(messages: list[Message], options: ChatOptions) -> str:
    system = " ".join(m.text for m in messages if m.role == "system")
    return f"t={options.temperature} max={options.max_tokens} stop={options.stop} sys={system}"


async def test_sampling_options_reach_a_served_agent_and_are_checked() -> None:
    agent = ChatAgent(ScriptedChatClient(_report_options), name="opts", instructions="base")
    flow = WorkflowBuilder(echo_agent("inner")).build()
    async with (
        MemoryStore() as store,
        serving({"opts": agent, "flow": flow}, store=store) as url,
        _client(url) as client,
    ):
        answer = await client.chat.completions.create(
            model="opts",
            messages=[{"role": "user", "content": "hi"}],
            temperature=0.5,
            max_tokens=7,
            stop="END",
        )
        assert answer.choices[0].message.content == "t=0.5 max=7 stop=['END'] sys=base"
        reply = await client.responses.create(
            model="opts", input="hi", max_output_tokens=9, instructions="special"
        )
        assert reply.output_text == "t=None max=9 stop=None sys=special"
        with pytest.raises(openai.BadRequestError, match="'temperature' must be a number"):
            await client.chat.completions.create(
                model="opts", messages=[{"role": "user", "content": "hi"}], temperature=7
            )
        with pytest.raises(openai.BadRequestError, match="apply to agents; 'flow' is a workflow"):
            await client.chat.completions.create(
                model="flow", messages=[{"role": "user", "content": "hi"}], temperature=0
            )
