"""Guardrails on a team's turns: a tripwire stops the run cleanly with the reason in its
TaskResult and the session goes on afterwards; redaction belongs on the agent."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from cantata import ChatAgent, ScriptedChatClient
from cantata.agents import Guardrail, Verdict, output_guardrail
from cantata.core import ConfigurationError, Message, WorkflowError
from cantata.teams import GroupChat, MaxMessage, Sequential

from ._agents import counting_agent, function_agent


def _no_three(text: str) -> Verdict:
    return Verdict.tripwire("said three") if "says 3" in text else Verdict.passed()


async def test_a_tripwire_at_a_turn_stops_the_run_with_its_reason() -> None:
    team = GroupChat(
        [counting_agent("a"), counting_agent("b")],
        termination=MaxMessage(10),
        guardrails=[Guardrail(_no_three, name="no_three", on="turn")],
    )
    result = await team.run("go")
    assert [m.text for m in result.messages] == ["go", "a says 1", "b says 2"]
    stop = result.stop_message
    assert stop is not None and stop.source == "guardrail:no_three"
    assert "a's turn" in stop.content and "said three" in stop.content
    # the session goes on: the next run starts with fresh conditions
    again = await team.run("more")
    assert again.stop_message is not None


async def test_a_turn_guardrail_may_not_replace_and_the_agent_output_one_redacts() -> None:
    seen: list[str] = []

    def second(messages: Sequence[Message]) -> str:
        seen.extend(m.text for m in messages)
        return "ok"

    def redact(text: str) -> str:
        return text.replace("1234", "[n]")

    first = function_agent("first", lambda m: "pin 1234")
    team = Sequential(
        [first, function_agent("second", second)], guardrails=[Guardrail(redact, on="turn")]
    )
    with pytest.raises(WorkflowError, match="passes or trips"):
        await team.run("start")
    # on the agent, the redaction happens before its answer reaches anyone
    guarded = ChatAgent(
        ScriptedChatClient(["pin 1234"]), name="first", guardrails=[output_guardrail(redact)]
    )
    seen.clear()
    result = await Sequential([guarded, function_agent("second", second)]).run("start")
    assert "pin [n]" in [m.text for m in result.messages]
    assert "pin 1234" not in seen and "pin [n]" in seen


def test_an_agent_stage_guardrail_is_refused_on_a_team() -> None:
    with pytest.raises(ConfigurationError, match="turn"):
        GroupChat([counting_agent("a")], max_turns=1, guardrails=[Guardrail(str.lower)])
