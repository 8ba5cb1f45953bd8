"""What one call of `run` / `run_stream` takes: chat options as keywords (refused when
misspelled), tool keyword arguments, and instructions for this call only."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from cantata.agents import (
    CHAT_OPTION_KEYWORDS,
    AgentRunContext,
    ChatAgent,
    UnknownOptionError,
    agent_middleware,
)
from cantata.core import UsageError
from cantata.models import ChatOptions, ScriptedChatClient, tool_call
from cantata.tools import ToolContext, tool


class Colour(BaseModel):
    name: str


def _agent(script: Any, **kwargs: Any) -> tuple[ChatAgent, ScriptedChatClient]:
    client = ScriptedChatClient(script)
    return ChatAgent(client, name="painter", instructions="You name colours.", **kwargs), client


async def test_chat_options_as_keywords_reach_the_model_as_agent_framework_users_write_them() -> (
    None
):
    agent, client = _agent(['{"name": "teal"}'])
    response = await agent.run("a colour?", response_format=Colour, temperature=0)
    assert response.value == Colour(name="teal")
    sent = client.calls[0].options
    assert (sent.response_format, sent.temperature) == (Colour, 0)


async def test_keywords_override_the_options_object_and_the_agent_defaults() -> None:
    agent, client = _agent(["a", "b"], options=ChatOptions(temperature=0.9, seed=1))
    await agent.run("x", options=ChatOptions(temperature=0.5, max_tokens=9), temperature=0.1)
    sent = client.calls[0].options
    assert (sent.temperature, sent.max_tokens, sent.seed) == (0.1, 9, 1)
    stream = agent.run_stream("y", top_p=0.3, stop=["END"])
    async for _ in stream:
        pass
    sent = client.calls[1].options
    assert (sent.top_p, sent.stop, sent.temperature) == (0.3, ["END"], 0.9)
    assert agent.options == ChatOptions(temperature=0.9, seed=1)  # never stored


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_misspelled_option_is_refused_with_the_valid_names(streaming: bool) -> None:
    agent, client = _agent(["never"])
    with pytest.raises(UnknownOptionError) as caught:
        if streaming:
            async for _ in agent.run_stream("x", temprature=0):  # type: ignore[call-arg]
                pass
        else:
            await agent.run("x", temprature=0)  # type: ignore[call-arg]
    error = caught.value
    assert isinstance(error, UsageError) and isinstance(error, TypeError)
    assert error.names == ["temprature"] and error.agent_name == "painter"
    text = str(error)
    assert "'temprature'" in text and "did you mean 'temperature'" in text
    for name in CHAT_OPTION_KEYWORDS:
        assert name in text
    assert "tool_kwargs" in text
    assert client.calls == []  # nothing was sent


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("temperature", "hot"),
        ("temperature", float("nan")),
        ("max_tokens", 0),
        ("max_tokens", True),
        ("stop", "END"),
        ("response_format", int),
        ("extra", ["x"]),
    ],
)
async def test_an_option_of_the_wrong_kind_is_refused_naming_it(name: str, value: Any) -> None:
    agent, _ = _agent(["never"])
    with pytest.raises(UsageError, match=f"{name}="):
        await agent.run("x", **{name: value})


async def test_tool_keyword_arguments_have_their_own_parameter() -> None:
    seen: list[Any] = []

    @tool
    def whoami(context: ToolContext) -> str:
        """Who is asking."""
        seen.append(dict(context.kwargs))
        return "ok"

    agent, _ = _agent([[tool_call("whoami")], "done"], tools=[whoami])
    await agent.run("who?", tool_kwargs={"user_id": 7})
    assert seen == [{"user_id": 7}]
    with pytest.raises(UsageError, match="tool_kwargs must be a mapping"):
        await agent.run("who?", tool_kwargs=[("user_id", 7)])  # type: ignore[arg-type]


async def test_instructions_override_replaces_the_instructions_for_one_call_only() -> None:
    agent, client = _agent(["a", "b", "c"], arguments={"tone": "dry"})
    await agent.run("x", instructions_override="Answer in a {{ tone }} tone.")
    stream = agent.run_stream("y", instructions_override="Only say yes.")
    async for _ in stream:
        pass
    await agent.run("z")
    systems = [call.messages[0].text for call in client.calls]
    assert systems == ["Answer in a dry tone.", "Only say yes.", "You name colours."]
    assert agent.instructions == "You name colours."


async def test_agent_middleware_sees_and_may_change_the_override() -> None:
    seen: list[str | None] = []

    @agent_middleware
    async def louder(context: AgentRunContext, call_next: Any) -> None:
        seen.append(context.instructions_override)
        context.instructions_override = "SHOUT."
        await call_next()

    agent, client = _agent(["a"], middleware=[louder])
    await agent.run("x", instructions_override="whisper.")
    assert seen == ["whisper."]
    assert client.calls[0].messages[0].text == "SHOUT."


async def test_the_agent_tool_takes_an_optional_override_when_allowed() -> None:
    specialist, specialist_client = _agent(["fine", "also fine"])
    plain = specialist.as_tool()
    assert "instructions_override" not in plain.parameters["properties"]
    allowed = specialist.as_tool(allow_instructions_override=True)
    props = allowed.parameters["properties"]
    assert "instructions_override" in props
    assert allowed.parameters["required"] == ["task"]
    caller, _ = _agent(
        [
            [tool_call("painter", {"task": "t1", "instructions_override": "Be terse."})],
            [tool_call("painter", {"task": "t2"})],
            "done",
        ],
        tools=[allowed],
    )
    await caller.run("go")
    systems = [call.messages[0].text for call in specialist_client.calls]
    assert systems == ["Be terse.", "You name colours."]


_RUN_PARAMETERS = set(inspect.signature(ChatAgent.run).parameters)


@given(
    name=st.text(min_size=1, max_size=20).filter(
        lambda n: n not in CHAT_OPTION_KEYWORDS and n not in _RUN_PARAMETERS
    )
)
async def test_any_other_keyword_is_refused(name: str) -> None:
    agent, _ = _agent(["never"])
    with pytest.raises(UnknownOptionError):
        await agent.run("x", **{name: 1})
