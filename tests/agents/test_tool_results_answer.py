"""`ChatAgent(answer_with_tool_results=True)`: a turn that ran tools ends with their results
instead of a second model call; the default still asks the model again."""

from __future__ import annotations

import pytest

from cantata.agents import ChatAgent
from cantata.core import ConfigurationError, Message
from cantata.declarative import from_config, to_config
from cantata.models import OpenAIChatClient, ScriptedChatClient, tool_call
from cantata.teams import GroupChat, RoundRobin
from cantata.tools import FunctionInvokingChatClient, tool


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
def fail() -> str:
    """Always fails."""
    raise ValueError("no luck")


async def test_the_default_asks_the_model_again_after_the_tools() -> None:
    client = ScriptedChatClient([[tool_call("add", {"a": 1, "b": 2})], "It is 3."])
    response = await ChatAgent(client, tools=[add]).run("1 + 2?")
    assert response.text == "It is 3."
    assert len(client.calls) == 2
    client.assert_complete()


async def test_the_turn_ends_with_the_tool_results_and_one_model_call() -> None:
    client = ScriptedChatClient([[tool_call("add", {"a": 1, "b": 2})]])
    agent = ChatAgent(client, name="calc", tools=[add], answer_with_tool_results=True)
    response = await agent.run("1 + 2?")
    assert len(client.calls) == 1
    client.assert_complete()
    assert response.text == "3"
    assert response.finish_reason == "stop"
    last = response.messages[-1]
    assert (last.role, last.author_name) == ("assistant", "calc")
    assert last.metadata["cantata.tool_results"] is True
    roles = [m.role for m in await response.thread.get_messages()]
    assert roles == ["user", "assistant", "tool", "assistant"]


async def test_the_format_writes_one_line_per_result_with_name_arguments_and_errors() -> None:
    client = ScriptedChatClient([[tool_call("add", {"a": 2, "b": 5}), tool_call("fail", {})]])
    agent = ChatAgent(
        client,
        tools=[add, fail],
        answer_with_tool_results=True,
        tool_results_format="{tool_name}({arguments}) -> {result} [error={is_error}]",
    )
    response = await agent.run("go")
    first, second = response.text.split("\n")
    assert first == 'add({"a": 2, "b": 5}) -> 7 [error=False]'
    assert second.startswith("fail({}) -> ") and second.endswith("[error=True]")
    assert "no luck" in second


async def test_a_plain_answer_is_untouched() -> None:
    client = ScriptedChatClient(["Just text."])
    response = await ChatAgent(client, tools=[add], answer_with_tool_results=True).run("hi")
    assert response.text == "Just text."
    assert "cantata.tool_results" not in response.messages[-1].metadata


async def test_streaming_yields_the_summary_and_records_it() -> None:
    client = ScriptedChatClient([[tool_call("add", {"a": 4, "b": 4})]])
    agent = ChatAgent(client, tools=[add], answer_with_tool_results=True)
    stream = agent.run_stream("4 + 4?")
    texts = [update.text async for update in stream]
    response = await stream.get_response()
    assert "8" in "".join(texts)
    assert response.text == "8"
    assert len(client.calls) == 1


@pytest.mark.parametrize("bad", ["{nope}", "{result", 3])
def test_a_format_that_cannot_be_filled_is_refused(bad: object) -> None:
    with pytest.raises(ConfigurationError, match="tool_results_format"):
        ChatAgent(ScriptedChatClient([]), answer_with_tool_results=True, tool_results_format=bad)  # type: ignore[arg-type]


def test_a_caller_built_loop_is_refused_with_the_option() -> None:
    loop = FunctionInvokingChatClient(ScriptedChatClient([]), tools=[add])
    with pytest.raises(ConfigurationError, match="answer_with_tool_results"):
        ChatAgent(loop, answer_with_tool_results=True)


async def test_the_option_round_trips_through_a_component_config() -> None:
    client = OpenAIChatClient(model="m", base_url="http://127.0.0.1:9/v1")
    try:
        agent = ChatAgent(
            client, answer_with_tool_results=True, tool_results_format="{tool_name}: {result}"
        )
        loaded = from_config(to_config(agent))
        try:
            assert loaded.answer_with_tool_results is True
            assert loaded.tool_results_format == "{tool_name}: {result}"
        finally:
            await loaded.aclose()
        assert "answer_with_tool_results" not in to_config(ChatAgent(client))["config"]
    finally:
        await client.aclose()


async def test_a_tool_output_turn_inside_a_round_robin_team() -> None:
    tools_client = ScriptedChatClient([[tool_call("add", {"a": 20, "b": 22})]])
    worker = ChatAgent(tools_client, name="worker", tools=[add], answer_with_tool_results=True)
    reviewer_client = ScriptedChatClient(lambda messages, options: f"reviewed: {messages[-1].text}")
    reviewer = ChatAgent(reviewer_client, name="reviewer")
    team = GroupChat([worker, reviewer], speaker=RoundRobin(), max_turns=2)
    result = await team.run(task="20 + 22?")
    visible = [(m.author_name, m.text) for m in result.messages if m.role == "assistant"]
    assert visible[0] == ("worker", "42")
    assert visible[1] == ("reviewer", "reviewed: 42")
    assert len(tools_client.calls) == 1  # the worker's turn cost one model call
    tools_client.assert_complete()
    assert isinstance(result.messages[0], Message)
