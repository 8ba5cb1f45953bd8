"""Routing evaluation on scripted handoff and selector teams: accuracy, fallbacks, turns,
early and late endings, failures."""

from __future__ import annotations

import pytest

from cantata.agents import ChatAgent
from cantata.core import ConfigurationError, Message
from cantata.models import ChatOptions, ScriptedChatClient, tool_call
from cantata.teams.group_chat import GroupChat
from cantata.teams.handoff import Handoff
from cantata.teams.routing_eval import LabelledTask, evaluate_routing
from cantata.teams.speakers import Selector
from cantata.teams.termination import MaxMessage


def triage_team(*, autonomous: bool = False) -> Handoff:
    def route(messages: list[Message], options: ChatOptions) -> object:
        task = next(m.text for m in messages if m.role == "user")
        if "invoice" in task:
            return [tool_call("transfer_to_billing", {"summary": task})]
        if "vpn" in task:
            return [tool_call("transfer_to_tech", {"summary": task})]
        if "crash" in task:
            raise ValueError("not a CantataError: a bug in the test model")
        return "I can answer that myself."  # no handoff: asks the user

    def specialist(name: str) -> ChatAgent:
        return ChatAgent(ScriptedChatClient(lambda m, o: f"{name} answers"), name=name)

    return Handoff(
        [
            ChatAgent(ScriptedChatClient(route), name="triage"),
            specialist("billing"),
            specialist("tech"),
        ],
        handoffs={"triage": ["billing", "tech"]},
        autonomous=autonomous,
        max_turns=3,
    )


async def test_handoff_team_accuracy_turns_and_early_endings() -> None:
    tasks = [
        LabelledTask("invoice 7 is wrong", "billing"),
        LabelledTask("the vpn is down", "tech"),
        LabelledTask("invoice or vpn? vpn", "tech"),  # routed to billing: wrong
        LabelledTask("what is the weather", "tech"),  # never handed off: early
    ]
    report = await evaluate_routing(triage_team(), tasks)
    assert [o.chosen for o in report.outcomes] == ["billing", "tech", "billing", None]
    assert [o.correct for o in report.outcomes] == [True, True, False, False]
    assert report.accuracy == 0.5
    assert [o.turns for o in report.outcomes] == [2, 2, 2, 1]
    assert report.average_turns == 7 / 4
    assert [o.ending for o in report.outcomes] == ["on_time", "on_time", "early", "early"]
    assert report.early_rate == 0.5 and report.late_rate == 0.0
    assert report.fallback_rate == 0.0
    assert all(o.stop_source == "user_input" for o in report.outcomes)
    table = report.as_table()
    assert "accuracy 50%" in table and "invoice 7 is wrong" in table


async def test_a_run_stopped_by_a_limit_or_over_its_turns_ends_late() -> None:
    alone = await evaluate_routing(
        triage_team(autonomous=True), [LabelledTask("what is the weather", "triage")]
    )
    assert alone.outcomes[0].ending == "late"  # autonomous: it ran into max_turns
    assert alone.outcomes[0].stop_source == "max_turns" and alone.late_rate == 1.0
    tasks = [
        LabelledTask("invoice 1", "billing", turns=2),
        LabelledTask("invoice 2", "billing", turns=1),  # took 2: late
        LabelledTask("invoice 3", "billing", turns=5),  # took 2 of 5: early
    ]
    report = await evaluate_routing(triage_team(), tasks)
    assert [o.ending for o in report.outcomes] == ["on_time", "late", "early"]


async def test_a_failing_run_is_reported_not_raised() -> None:
    report = await evaluate_routing(
        triage_team(), [LabelledTask("crash now", "billing"), LabelledTask("invoice", "billing")]
    )
    assert report.outcomes[0].ending == "failed" and report.outcomes[0].error
    assert report.outcomes[1].correct
    assert report.failed == 1 and report.accuracy == 0.5


async def test_selector_team_fallbacks_are_counted() -> None:
    answers = iter(['{"speaker": "nobody"}'] * 3 + ['{"speaker": "tech"}'] * 10)

    def select(messages: list[Message], options: ChatOptions) -> str:
        return next(answers)

    def member(name: str) -> ChatAgent:
        return ChatAgent(ScriptedChatClient(lambda m, o: f"{name} here"), name=name)

    team = GroupChat(
        [member("billing"), member("tech")],
        speaker=Selector(ScriptedChatClient(select), structured=True, max_attempts=3),
        termination=MaxMessage(2),
    )
    report = await evaluate_routing(
        team, [LabelledTask("vpn down", "tech"), LabelledTask("vpn again", "tech")]
    )
    first, second = report.outcomes
    assert first.fallbacks == 1 and first.chosen == "billing"  # round robin's first
    assert second.fallbacks == 0 and second.chosen == "tech"
    assert report.fallback_rate == 0.5
    assert report.accuracy == 0.5


async def test_concurrent_evaluation_gives_the_same_report() -> None:
    tasks = [LabelledTask(f"invoice {i}", "billing") for i in range(8)]
    serial = await evaluate_routing(triage_team(), tasks)
    parallel = await evaluate_routing(triage_team(), tasks, concurrency=4)
    assert [o.chosen for o in serial.outcomes] == [o.chosen for o in parallel.outcomes]
    assert parallel.accuracy == 1.0


async def test_bad_labels_are_refused() -> None:
    team = triage_team()
    with pytest.raises(ConfigurationError, match="expects 'legal', which is not a participant"):
        await evaluate_routing(team, [LabelledTask("x", "legal")])
    with pytest.raises(ConfigurationError, match="at least one"):
        await evaluate_routing(team, [])
    with pytest.raises(ConfigurationError, match="concurrency"):
        await evaluate_routing(team, [LabelledTask("x", "billing")], concurrency=0)
