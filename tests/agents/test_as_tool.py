"""An agent as a tool of another: a triage agent with two specialists, end to end."""

from __future__ import annotations

from typing import Any

import pytest

from cantata.agents import AgentResponseUpdate, ChatAgent
from cantata.core import CancellationToken, ConfigurationError
from cantata.models import ScriptedChatClient, tool_call
from cantata.tools import ToolContext, tool


def _specialist(name: str, answer: str) -> tuple[ChatAgent, ScriptedChatClient]:
    client = ScriptedChatClient(lambda messages, options: f"{answer}: {messages[-1].text}")
    agent = ChatAgent(
        client, name=name, description=f"Answers {name} questions.", instructions=f"You do {name}."
    )
    return agent, client


def test_as_tool_describes_the_agent() -> None:
    agent, _ = _specialist("billing", "refund")
    as_tool = agent.as_tool()
    assert as_tool.name == "billing"
    assert as_tool.description == "Answers billing questions."
    assert as_tool.parameters["required"] == ["task"]
    assert as_tool.parameters["properties"]["task"]["type"] == "string"
    assert "ToolContext" not in str(as_tool.parameters)


def test_as_tool_names_can_be_chosen() -> None:
    agent, _ = _specialist("billing", "refund")
    custom = agent.as_tool(name="ask_billing", description="Ask.", arg_name="question")
    assert custom.name == "ask_billing"
    assert list(custom.parameters["properties"]) == ["question"]


def test_bad_arg_name_is_refused() -> None:
    agent, _ = _specialist("billing", "refund")
    with pytest.raises(ConfigurationError, match="arg_name"):
        agent.as_tool(arg_name="not valid")


async def test_triage_agent_calls_two_specialists_end_to_end() -> None:
    billing, billing_client = _specialist("billing", "refund issued")
    tech, tech_client = _specialist("tech", "restart it")
    triage_client = ScriptedChatClient(
        [
            [
                tool_call("billing", {"task": "I was charged twice"}),
                tool_call("tech", {"task": "the app crashes"}),
            ],
            "Both handled.",
        ]
    )
    triage = ChatAgent(triage_client, name="triage", tools=[billing, tech.as_tool()])
    response = await triage.run("charged twice and the app crashes")
    results = {r.call_id: r.result for m in response.messages for r in m.function_results}
    assert sorted(results.values()) == [
        "refund issued: I was charged twice",
        "restart it: the app crashes",
    ]
    assert response.text == "Both handled."
    # each specialist got only its task, on a fresh thread, with its own instructions
    assert [m.text for m in billing_client.calls[0].messages] == [
        "You do billing.",
        "I was charged twice",
    ]
    assert [m.text for m in tech_client.calls[0].messages] == ["You do tech.", "the app crashes"]
    sent_tools = [s.name for s in triage_client.calls[0].options.tools or ()]
    assert sent_tools == ["billing", "tech"]


async def test_tool_kwargs_and_cancellation_flow_into_the_specialist() -> None:
    seen: dict[str, Any] = {}

    @tool
    def lookup(context: ToolContext) -> str:
        """Look the user up."""
        seen["kwargs"] = dict(context.kwargs)
        seen["token"] = context.cancellation_token
        return "found"

    inner = ChatAgent(
        ScriptedChatClient([[tool_call("lookup")], "ok"]), name="inner", tools=[lookup]
    )
    outer = ChatAgent(
        ScriptedChatClient([[tool_call("inner", {"task": "who"})], "done"]),
        name="outer",
        tools=[inner],
    )
    token = CancellationToken()
    await outer.run("go", tool_kwargs={"user_id": "u1"}, cancellation_token=token)
    assert seen["kwargs"] == {"user_id": "u1"}
    assert seen["token"] is token


async def test_stream_callback_sees_the_specialists_updates() -> None:
    specialist, _ = _specialist("writer", "drafted")
    updates: list[AgentResponseUpdate] = []
    triage = ChatAgent(
        ScriptedChatClient([[tool_call("writer", {"task": "a poem"})], "sent"]),
        name="triage",
        tools=[specialist.as_tool(stream_callback=updates.append)],
    )
    await triage.run("write")
    assert "".join(u.text for u in updates) == "drafted: a poem"


@pytest.mark.parametrize("inner_streams", [False, True])
@pytest.mark.parametrize("outer_streams", [False, True])
async def test_specialist_errors_reach_the_model_as_tool_errors(
    inner_streams: bool, outer_streams: bool
) -> None:
    failing = ChatAgent(ScriptedChatClient([]), name="broken")  # runs out of turns
    seen: list[Any] = []
    specialist = failing.as_tool(stream_callback=seen.append if inner_streams else None)
    triage_client = ScriptedChatClient([[tool_call("broken", {"task": "x"})], "sorry"])
    triage = ChatAgent(triage_client, name="triage", tools=[specialist])
    if outer_streams:
        response = await triage.run_stream("go").get_response()
    else:
        response = await triage.run("go")
    (result,) = [r for m in response.messages for r in m.function_results]
    assert result.is_error and "ran out of turns" in (result.error or "")
    assert response.text == "sorry"


async def test_a_specialist_waiting_for_approval_is_an_error_result_not_an_empty_answer() -> None:
    @tool(approval_mode="always_require")
    def remove(path: str) -> str:
        """Remove a file."""
        return "gone"

    specialist = ChatAgent(
        ScriptedChatClient([[tool_call("remove", {"path": "/x"})]]), name="ops", tools=[remove]
    )
    triage_client = ScriptedChatClient([[tool_call("ops", {"task": "delete /x"})], "sorry"])
    triage = ChatAgent(triage_client, name="triage", tools=[specialist])
    response = await triage.run("please delete /x")
    (result,) = [r for m in response.messages for r in m.function_results]
    assert result.is_error and "approval_required" in (result.error or "")
    assert "remove" in (result.error or "")


async def test_a_failing_stream_callback_is_an_error_result() -> None:
    def explode(update: Any) -> None:
        raise ValueError("callback broke")

    specialist = ChatAgent(ScriptedChatClient(["fine"]), name="spec").as_tool(
        stream_callback=explode
    )
    triage_client = ScriptedChatClient([[tool_call("spec", {"task": "x"})], "sorry"])
    response = await ChatAgent(triage_client, name="triage", tools=[specialist]).run("go")
    (result,) = [r for m in response.messages for r in m.function_results]
    assert result.is_error and "callback broke" in (result.error or "")
    assert response.text == "sorry"
