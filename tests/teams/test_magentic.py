"""Magentic rules on scripted models: ledgers, delegation, stalls, re-planning, limits,
plan review, fallbacks."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from cantata.agents import ChatAgent
from cantata.core import ConfigurationError, Message
from cantata.models import ChatOptions, ScriptedChatClient, tool_call
from cantata.runtime import LocalRuntime
from cantata.stores import SQLiteStore
from cantata.teams import coder_agent, file_reader_agent
from cantata.teams.events import RoutingEvent
from cantata.teams.magentic import (
    Magentic,
    MagenticLedgerEvent,
    PlanReview,
    PlanReviewAnswer,
    PlanStep,
)
from cantata.teams.result import TaskResult
from cantata.tools import LocalCodeExecutor
from cantata.workflows import RequestInfoEvent, StateStoreCheckpointStore

from ._magentic_script import ManagerScript, progress


def worker(name: str) -> ChatAgent:
    def answer(messages: list[Message], options: ChatOptions) -> str:
        return f"{name} did: {messages[-1].text}"

    return ChatAgent(ScriptedChatClient(answer), name=name, description=f"the {name}")


async def collect(team: Magentic, task: str) -> tuple[list[object], TaskResult]:
    events = [e async for e in team.run_stream(task)]
    result = events[-1]
    assert isinstance(result, TaskResult)
    return events, result


async def test_plans_delegates_and_answers_when_satisfied() -> None:
    script = ManagerScript(
        [progress("a", "read it"), progress("b", "compute"), progress("a", satisfied=True)],
        plan=[("a", "read"), ("b", "compute")],
        final="42",
    )
    team = Magentic(script.client, [worker("a"), worker("b")])
    events, result = await collect(team, "the task")
    assert script.asked == ["_Facts", "PlanOut", *["ProgressLedgerOut"] * 3, "_Final"]
    texts = [(m.author_name, m.text) for m in result.messages]
    assert texts[0] == ("user", "the task")
    assert texts[1][0] == "orchestrator" and "1. a: read" in texts[1][1]
    assert texts[2:] == [
        ("orchestrator", "a: read it"),
        ("a", "a did: orchestrator: a: read it"[: len("a did: ")] + "a: read it"),
        ("orchestrator", "b: compute"),
        ("b", "b did: b: compute"),
        ("orchestrator", "42"),
    ]
    assert result.stop_message is not None and result.stop_message.source == "satisfied"
    ledgers = [e for e in events if isinstance(e, MagenticLedgerEvent)]
    assert ledgers[0].task is not None and ledgers[0].task.facts == ["f1"]
    assert [e.progress.next_speaker for e in ledgers[1:] if e.progress] == ["a", "b", "a"]
    routes = [e for e in events if isinstance(e, RoutingEvent)]
    assert [(r.choice, r.fallback_used) for r in routes] == [("a", False), ("b", False)]
    assert routes[0].reason == "because a"


async def test_the_next_speaker_is_constrained_to_the_participants() -> None:
    script = ManagerScript([progress("a", satisfied=True)])
    team = Magentic(script.client, [worker("a"), worker("b")])
    await team.run("t")
    progress_call = next(
        c
        for c in script.client.calls
        if c.options.response_format.__name__ == "ProgressLedgerOut"  # type: ignore[union-attr]
    )
    schema = progress_call.options.response_format.model_json_schema()  # type: ignore[union-attr]
    text = json.dumps(schema)
    assert '"enum": ["a", "b"]' in text


async def test_an_invalid_ledger_is_asked_again_then_the_fallback_takes_the_turn() -> None:
    script = ManagerScript(
        [
            progress("zed"),  # not a participant
            progress("b", "fixed"),
            "not json",
            progress("nobody"),
            "{}",
            progress("a", satisfied=True),
        ],
        plan=[("a", "step for a"), ("b", "step for b")],
    )
    team = Magentic(script.client, [worker("a"), worker("b")], ledger_retries=2)
    events, result = await collect(team, "t")
    routes = [e for e in events if isinstance(e, RoutingEvent)]
    assert routes[0].choice == "b" and not routes[0].fallback_used
    assert len(routes[0].attempts) == 1 and "zed" in routes[0].attempts[0]
    # three invalid answers in a row: the next participant after b takes its plan step
    assert routes[1].choice == "a" and routes[1].fallback_used
    assert len(routes[1].attempts) == 3
    assert ("orchestrator", "a: step for a") in [(m.author_name, m.text) for m in result.messages]
    assert "invalid" in script.prompts[1] or "does not fit" in script.prompts[3]


async def test_stalls_trigger_a_replan_and_too_many_replans_stop_the_run() -> None:
    looping = [progress("a", loop=True) for _ in range(10)]
    script = ManagerScript(looping)
    team = Magentic(script.client, [worker("a")], max_stalls=1, max_resets=1)
    events, result = await collect(team, "t")
    # stall 1 is allowed, stall 2 re-plans (1 reset), and 2 more stalls exceed max_resets
    assert script.asked.count("PlanOut") == 2
    assert script.asked.count("ProgressLedgerOut") == 4
    assert result.stop_message is not None and result.stop_message.source == "max_stalls"
    assert any(m.text.startswith("New plan.") for m in result.messages)
    assert sum(1 for e in events if isinstance(e, MagenticLedgerEvent) and e.task) == 2


async def test_progress_takes_a_stall_off_the_counter() -> None:
    ledgers = [
        progress("a", loop=True),
        progress("a"),
        progress("a", progressing=False),
        progress("a", satisfied=True),
    ]
    script = ManagerScript(ledgers)
    team = Magentic(script.client, [worker("a")], max_stalls=1)
    _, result = await collect(team, "t")
    assert script.asked.count("PlanOut") == 1  # 1, 0, 1: never over the limit
    assert result.stop_message is not None and result.stop_message.source == "satisfied"


async def test_the_round_limit_ends_the_run() -> None:
    script = ManagerScript([progress("a") for _ in range(5)])
    team = Magentic(script.client, [worker("a")], max_rounds=3)
    _, result = await collect(team, "t")
    assert result.stop_reason == "maximum of 3 rounds reached"
    assert script.asked.count("ProgressLedgerOut") == 3


async def test_require_plan_done_waits_for_every_planned_participant() -> None:
    ledgers = [progress("a", satisfied=True), progress("b"), progress("a", satisfied=True)]
    script = ManagerScript(ledgers, plan=[("a", "x"), ("b", "y")])
    team = Magentic(script.client, [worker("a"), worker("b")], require_plan_done=True)
    _, result = await collect(team, "t")
    speakers = [m.author_name for m in result.messages if m.author_name in ("a", "b")]
    assert speakers == ["a", "b"]
    assert result.stop_message is not None and result.stop_message.source == "satisfied"


@pytest.fixture(params=["in process", "copying"])
async def runtime(request: pytest.FixtureRequest) -> AsyncIterator[LocalRuntime | None]:
    """No runtime, or one that copies messages (each executor an actor of its own, as on
    Ray: the review request and its answers cross as JSON)."""
    if request.param == "in process":
        yield None
        return
    async with LocalRuntime(serialize_messages=True) as copying:
        yield copying


async def test_plan_review_pauses_until_a_person_answers(runtime: LocalRuntime | None) -> None:
    script = ManagerScript([progress("a", satisfied=True)], plan=[("a", "first plan")])
    team = Magentic(script.client, [worker("a"), worker("b")], plan_review=True)
    session = team.create_session(runtime=runtime)
    events = [e async for e in session.run_stream("t")]
    requests = [e for e in events if isinstance(e, RequestInfoEvent)]
    assert len(requests) == 1 and isinstance(requests[0].data, PlanReview)
    assert requests[0].data.ledger.plan == [PlanStep("a", "first plan")]
    assert "ProgressLedgerOut" not in script.asked  # no work before the review
    # comments: the manager re-plans with them and asks again
    script.plan = [("b", "second plan")]
    paused = await session.send_responses(
        {requests[0].request_id: PlanReviewAnswer(approved=False, comments="use b")}
    )
    assert paused.stop_message is not None and paused.stop_message.source == "input"
    assert "use b" in script.prompts[-1]
    pending = session._run.pending_requests  # type: ignore[union-attr]
    assert pending[0].data.ledger.plan == [PlanStep("b", "second plan")]
    assert pending[0].data.review == 2
    done = await session.send_responses({pending[0].request_id: PlanReviewAnswer()})
    assert done.stop_message is not None and done.stop_message.source == "satisfied"


async def test_a_reviewer_may_replace_the_plan_but_only_with_participants() -> None:
    script = ManagerScript([progress("b", satisfied=True)])
    team = Magentic(script.client, [worker("a"), worker("b")], plan_review=True)
    session = team.create_session()
    await session.run("t")
    request = session._run.pending_requests[0]  # type: ignore[union-attr]
    with pytest.raises(Exception, match="names \\['zed'\\], who are not participants"):
        await session.send_responses(
            {request.request_id: PlanReviewAnswer(plan=[PlanStep("zed", "x")])}
        )
    session2 = team.create_session()
    await session2.run("t")
    request = session2._run.pending_requests[0]  # type: ignore[union-attr]
    result = await session2.send_responses(
        {request.request_id: PlanReviewAnswer(plan=[PlanStep("b", "mine")])}
    )
    assert any("1. b: mine" in m.text for m in result.messages)


async def test_a_plan_under_review_survives_a_checkpoint_and_a_fresh_team(tmp_path: Path) -> None:
    store = StateStoreCheckpointStore(SQLiteStore(str(tmp_path / "team.db")))
    try:
        script = ManagerScript([], plan=[("a", "reviewed step")])
        session = Magentic(script.client, [worker("a")], plan_review=True).create_session(
            checkpoint_store=store
        )
        await session.run("t")
        checkpoint = session.checkpoint_id
        assert checkpoint is not None
        later = ManagerScript([progress("a", "do it"), progress("a", satisfied=True)])
        fresh = Magentic(later.client, [worker("a")], plan_review=True)
        resumed = await fresh.resume(checkpoint, checkpoint_store=store)
        request = resumed._run.pending_requests[0]  # type: ignore[union-attr]
        assert request.data.ledger.plan == [PlanStep("a", "reviewed step")]
        result = await resumed.send_responses({request.request_id: PlanReviewAnswer()})
    finally:
        await store.close()  # its SQLite worker thread must not outlive this test's loop
    assert "PlanOut" not in later.asked  # the reviewed plan came from the checkpoint
    assert result.stop_message is not None and result.stop_message.source == "satisfied"


async def test_invalid_facts_and_plan_fall_back() -> None:
    script = ManagerScript([progress("b", satisfied=True)], facts="nope")
    script.plan = []  # an empty plan does not fit the schema (at least one step)
    team = Magentic(script.client, [worker("a"), worker("b")], ledger_retries=0)
    events, _ = await collect(team, "t")
    task = next(e.task for e in events if isinstance(e, MagenticLedgerEvent) and e.task)
    assert task.facts == []
    assert task.plan == [PlanStep("a", "t"), PlanStep("b", "t")]


async def test_reads_a_file_and_runs_code_with_real_tools(tmp_path: Path) -> None:
    (tmp_path / "numbers.txt").write_text("6 and 7")
    reader = file_reader_agent(
        ScriptedChatClient([[tool_call("read_file", {"path": "numbers.txt"})], "It says 6 and 7."]),
        tmp_path,
    )
    async with LocalCodeExecutor(timeout=10) as executor:
        coder = coder_agent(
            ScriptedChatClient([[tool_call("run_python", {"code": "print(6 * 7)"})], "42"]),
            executor,
        )
        script = ManagerScript(
            [
                progress("file_reader", "read numbers.txt"),
                progress("coder", "multiply them"),
                progress("coder", satisfied=True),
            ],
            plan=[("file_reader", "read"), ("coder", "multiply")],
            final="6 * 7 = 42",
        )
        session = Magentic(script.client, [reader, coder]).create_session()
        result = await session.run("Multiply the numbers in numbers.txt")
    assert result.messages[-1].text == "6 * 7 = 42"
    reader_seen = reader.client.calls[1].messages  # type: ignore[attr-defined]
    assert any(r.result == "6 and 7" for m in reader_seen for r in m.function_results)
    coder_seen = coder.client.calls[1].messages  # type: ignore[attr-defined]
    assert any("42" in str(r.result) for m in coder_seen for r in m.function_results)


def test_bad_definitions_are_refused() -> None:
    client = ScriptedChatClient([])
    with pytest.raises(ConfigurationError, match="max_rounds must be an int >= 1"):
        Magentic(client, [worker("a")], max_rounds=0)
    with pytest.raises(ConfigurationError, match="named 'orchestrator', like the manager"):
        Magentic(client, [worker("orchestrator")])
    with pytest.raises(ConfigurationError, match="must be a ChatClient or a ChatAgent"):
        Magentic("gpt", [worker("a")])  # type: ignore[arg-type]
    agent_manager = ChatAgent(client, name="boss")
    assert Magentic(agent_manager, [worker("a")]).client is client


def _enum_of(options: ChatOptions) -> list[str]:
    """The names the progress ledger's schema allows as the next speaker."""
    schema = options.response_format.model_json_schema()  # type: ignore[union-attr]
    answer = schema["$defs"]["NextSpeaker"]["properties"]["answer"]
    return list(answer["enum"]) if "enum" in answer else [answer["const"]]


async def test_max_repeats_leaves_a_repeating_speaker_out_of_the_choice() -> None:
    """The scripted manager always names the first allowed speaker: without the guard it
    would pick `a` forever; with max_repeats=1 the schema itself moves the turn on."""
    enums: list[list[str]] = []
    rounds = iter(range(100))

    def manager(messages: list[Message], options: ChatOptions) -> str:
        name = options.response_format.__name__  # type: ignore[union-attr]
        if name == "_Facts":
            return json.dumps({"facts": []})
        if name == "PlanOut":
            return json.dumps({"steps": [{"agent": "a", "action": "x"}]})
        if name == "_Final":
            return json.dumps({"answer": "done"})
        allowed = _enum_of(options)
        enums.append(allowed)
        return progress(allowed[0], satisfied=next(rounds) == 4)

    team = Magentic(ScriptedChatClient(manager), [worker("a"), worker("b")], max_repeats=1)
    _, result = await collect(team, "t")
    speakers = [m.author_name for m in result.messages if m.author_name in ("a", "b")]
    assert speakers == ["a", "b", "a", "b"]
    assert enums[0] == ["a", "b"] and enums[1] == ["b"] and enums[2] == ["a"]
    with pytest.raises(ConfigurationError, match="max_repeats"):
        Magentic(ScriptedChatClient([]), [worker("a")], max_repeats=0)


async def test_compact_ledgers_ask_for_answers_without_reasons() -> None:
    formats: list[str] = []

    def manager(messages: list[Message], options: ChatOptions) -> str:
        fmt = options.response_format
        name = fmt.__name__  # type: ignore[union-attr]
        formats.append(json.dumps(fmt.model_json_schema()))  # type: ignore[union-attr]
        if name == "_FewFacts":
            return json.dumps({"facts": ["one"]})
        if name == "PlanOut":
            return json.dumps({"steps": [{"agent": "a", "action": "x"}]})
        if name == "_Final":
            return json.dumps({"answer": "done"})
        ledger = {
            "is_request_satisfied": len(formats) > 4,
            "is_in_loop": False,
            "is_progress_being_made": True,
            "next_speaker": "a",
            "instruction_or_question": "go",
        }
        return json.dumps(ledger)

    team = Magentic(ScriptedChatClient(manager), [worker("a")], compact_ledgers=True)
    events, result = await collect(team, "t")
    progress_events = [e.progress for e in events if isinstance(e, MagenticLedgerEvent)]
    ledger = next(p for p in progress_events if p is not None)
    assert ledger.next_speaker == "a" and ledger.instruction == "go" and ledger.reasons == {}
    assert '"maxItems": 3' in formats[0]
    assert "reason" not in formats[2]
    assert result.stop_message is not None and result.stop_message.source == "satisfied"
