"""A participant's tool that needs a person's approval, or a tool declared without a
function, pauses the team with a request the caller answers; the participant's turn then
goes on (the tool runs, or the model reads the rejection or the answer) and the team goes
on with the next speaker. For every team type that runs local agents, in process and on a
runtime that copies messages, and across a checkpoint taken while the request waits."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from cantata.agents import Agent, ChatAgent
from cantata.core import (
    FunctionApprovalRequestContent,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    ModelError,
    TextContent,
    ToolError,
    Usage,
    UsageError,
    WorkflowError,
    dumps,
    loads,
)
from cantata.models import ChatOptions, ScriptedChatClient, ScriptedTurn, ToolSpec, tool_call
from cantata.runtime import LocalRuntime
from cantata.stores import SQLiteStore
from cantata.teams import (
    Concurrent,
    GroupChat,
    Handoff,
    LocalChannel,
    Magentic,
    Selector,
    Sequential,
    ServiceChannel,
    TaskResult,
    Team,
    TeamMessageEvent,
    TeamSession,
)
from cantata.teams.turns import PausedTurn
from cantata.tools import tool
from cantata.workflows import (
    AgentUpdateEvent,
    InMemoryCheckpointStore,
    RequestInfoEvent,
    StateStoreCheckpointStore,
)

from ._agents import asking_agent, function_agent, paying_agent
from ._magentic_script import ManagerScript, progress

REJECTED = "the user rejected this call"


def _checker() -> Agent:
    return function_agent("checker", lambda messages: f"checker saw: {messages[-1].text}")


def _selector_client() -> object:
    def pick(messages: list[Message], options: ChatOptions) -> str:
        fmt = options.response_format
        assert isinstance(fmt, dict)
        names = fmt["properties"]["speaker"]["enum"]
        return json.dumps({"speaker": "payer" if "payer" in names else names[0]})

    return ScriptedChatClient(pick)


class _ReadingScript(ManagerScript):
    """A magentic manager's model that reads the run so far: the payer works first, then
    the checker, then the task is done (so a fresh team resumed mid-run answers alike)."""

    def answer(self, messages: list[Message], options: ChatOptions) -> str:
        said = "\n".join(m.text for m in messages)
        if "checker saw" in said:
            self.ledgers = [progress("checker", satisfied=True)]
        elif "payer says" in said or "payer got" in said:
            self.ledgers = [progress("checker", "check")]
        else:
            self.ledgers = [progress("payer", "pay")]
        return super().answer(messages, options)


def _magentic(agents: list[Agent]) -> Team:
    script = _ReadingScript([], plan=[("payer", "pay"), ("checker", "check")])
    return Magentic(script.client, agents)


TEAMS: dict[str, tuple[Callable[[list[Agent]], Team], str]] = {
    # name: (the team of [payer, checker], the source of the stop once both spoke)
    "round robin": (lambda agents: GroupChat(agents, max_turns=2), "max_turns"),
    "speaker function": (
        lambda agents: GroupChat(
            agents,
            speaker=lambda s: "checker" if s.last_speaker == "payer" else "payer",
            max_turns=2,
        ),
        "max_turns",
    ),
    "selector": (
        lambda agents: GroupChat(
            agents,
            speaker=Selector(_selector_client(), structured=True),
            max_turns=2,  # type: ignore[arg-type]
        ),
        "max_turns",
    ),
    "sequential": (lambda agents: Sequential(agents), "sequence"),
    "chain": (lambda agents: Sequential(agents, chain_only_agent_responses=True), "sequence"),
    "concurrent": (lambda agents: Concurrent(agents), "concurrent"),
    "handoff": (lambda agents: Handoff(agents), "user_input"),
    "magentic": (_magentic, "satisfied"),
}


def _team(kind: str, ran: list[int]) -> Team:
    make, _ = TEAMS[kind]
    hand_to = "checker" if kind == "handoff" else None
    return make([paying_agent("payer", ran, hand_to=hand_to), _checker()])


def _lines(result: TaskResult) -> list[str]:
    return [f"{m.author_name}: {m.text}" for m in result.messages]


def _approval(session: TeamSession) -> RequestInfoEvent:
    [request] = session.pending_requests
    assert isinstance(request.data, FunctionApprovalRequestContent)
    return request


@pytest.fixture(params=["in process", "copying"])
async def runtime(request: pytest.FixtureRequest) -> AsyncIterator[LocalRuntime | None]:
    """No runtime, or one that copies messages (each executor an actor of its own, as on
    Ray: the request, its answer and the paused turn cross as JSON)."""
    if request.param == "in process":
        yield None
        return
    async with LocalRuntime(serialize_messages=True) as copying:
        yield copying


@pytest.mark.parametrize("kind", list(TEAMS))
async def test_an_approval_pauses_the_team_and_the_turn_goes_on_once_approved(
    kind: str, runtime: LocalRuntime | None
) -> None:
    ran: list[int] = []
    session = _team(kind, ran).create_session(runtime=runtime)
    paused = await session.run("pay the bill")
    assert paused.stop_message is not None and paused.stop_message.source == "input"
    request = _approval(session)
    assert request.executor_id == "payer"
    call = request.data.function_call
    assert (call.name, call.arguments) == ("pay", {"amount": 5})
    assert ran == []  # nothing ran before a person said so
    with pytest.raises(UsageError, match="send_responses"):
        await session.run()  # the team waits for the answer, not for a task

    done = await session.send_responses({request.request_id: request.data.create_response(True)})
    assert ran == [5]
    assert session.pending_requests == []
    _, stop_source = TEAMS[kind]
    assert done.stop_message is not None and done.stop_message.source == stop_source
    lines = _lines(done)
    assert lines[0] == "user: pay the bill"
    paid = "payer says paid 5" if kind != "handoff" else "payer handed the conversation"
    said = next(i for i, line in enumerate(lines) if line.startswith(f"payer: {paid}"))
    checked = [i for i, line in enumerate(lines) if line.startswith("checker: checker saw")]
    assert checked, lines  # the team went on with the next speaker
    if kind != "concurrent":  # the fan-out's checker answered while the payer waited
        assert checked[0] > said
    if kind in ("round robin", "sequential", "handoff"):  # the checker read the payer's word
        assert lines[checked[0]] == f"checker: checker saw: {lines[said].removeprefix('payer: ')}"


@pytest.mark.parametrize("kind", list(TEAMS))
async def test_a_rejection_is_shown_to_the_model_and_the_tool_never_runs(kind: str) -> None:
    ran: list[int] = []
    team = _team(kind, ran)
    session = team.create_session()
    await session.run("pay the bill")
    request = _approval(session)
    done = await session.send_responses({request.request_id: request.data.create_response(False)})
    assert ran == []
    payer = team.participants[0]
    last_call = payer.client.calls[-1]  # type: ignore[attr-defined]
    results = [c for m in last_call.messages for c in m.function_results]
    assert [r.error for r in results] == [REJECTED]
    assert any(m.author_name == "checker" for m in done.messages)


@pytest.mark.parametrize("kind", list(TEAMS))
async def test_a_declared_tool_call_is_a_request_the_caller_answers(kind: str) -> None:
    make, stop_source = TEAMS[kind]
    team = make([asking_agent("payer"), _checker()])
    session = team.create_session()
    await session.run("how much?")
    [request] = session.pending_requests
    assert request.executor_id == "payer"
    assert isinstance(request.data, FunctionCallContent) and request.data.name == "ask_clerk"
    answer = FunctionResultContent(request.data.call_id, result="12 euros")
    done = await session.send_responses({request.request_id: answer})
    assert "payer: payer got 12 euros" in _lines(done)
    assert done.stop_message is not None and done.stop_message.source == stop_source


async def test_the_stream_yields_the_request_and_two_approvals_are_answered_one_by_one() -> None:
    ran: list[int] = []
    payer = paying_agent("payer", ran, amounts=(1, 2))
    team = GroupChat([payer, _checker()], max_turns=2)
    session = team.create_session()
    items = [item async for item in session.run_stream("pay twice")]
    requests = [e for e in items if isinstance(e, RequestInfoEvent)]
    assert [r.data.function_call.arguments for r in requests] == [{"amount": 1}, {"amount": 2}]
    assert isinstance(items[-1], TaskResult) and items[-1].stop_message is not None
    assert items[-1].stop_message.source == "input"
    one, two = requests
    still = await session.send_responses({one.request_id: one.data.create_response(True)})
    assert ran == [] and [r.request_id for r in session.pending_requests] == [two.request_id]
    assert still.stop_message is not None and still.stop_message.source == "input"
    done = await session.send_responses({two.request_id: two.data.create_response(False)})
    assert ran == [1]
    assert f"payer: payer says paid 1; {REJECTED}" in _lines(done)
    assert done.stop_message is not None and done.stop_message.source == "max_turns"


@pytest.mark.parametrize("kind", list(TEAMS))
async def test_a_pending_approval_survives_a_checkpoint_and_a_fresh_team(
    kind: str, tmp_path: Path, runtime: LocalRuntime | None
) -> None:
    reference_ran: list[int] = []
    reference = _team(kind, reference_ran).create_session()
    await reference.run("pay the bill")
    request = _approval(reference)
    expected = await reference.send_responses(
        {request.request_id: request.data.create_response(True)}
    )

    store = StateStoreCheckpointStore(SQLiteStore(str(tmp_path / "team.db")))
    try:
        before: list[int] = []
        session = _team(kind, before).create_session(checkpoint_store=store, runtime=runtime)
        await session.run("pay the bill")
        checkpoint = session.checkpoint_id
        assert checkpoint is not None
        waiting = _approval(session).data
        after: list[int] = []
        fresh = _team(kind, after)  # a new definition, as a new process would build
        resumed = await fresh.resume(checkpoint, checkpoint_store=store, runtime=runtime)
        request = _approval(resumed)
        assert request.data == waiting
        done = await resumed.send_responses(
            {request.request_id: request.data.create_response(True)}
        )
    finally:
        await store.close()
    assert (before, after) == ([], [5])
    assert _lines(done) == _lines(expected)
    assert done.stop_reason == expected.stop_reason


def test_a_paused_turn_round_trips_through_json() -> None:
    call = FunctionCallContent("c1", "pay", {"amount": 5})
    asked = FunctionApprovalRequestContent("r1", call)
    paused = PausedTurn(
        "corr",
        3,
        [Message("assistant", [call]), Message("assistant", [asked])],
        ["q1", "q2"],
        {"q1": Message("user", [asked.create_response(True)], author_name="payer")},
        Usage(3, 4),
        7,
    )
    back = loads(dumps(paused))
    assert back == paused and back.waiting == ["q2"]


async def test_the_answer_streams_the_rest_of_the_turn_and_of_the_team() -> None:
    ran: list[int] = []
    session = _team("round robin", ran).create_session()
    await session.run("pay the bill")
    request = _approval(session)
    with pytest.raises(WorkflowError, match="must be a"):
        await session.send_responses({request.request_id: "yes"})  # not an approval
    assert _approval(session).request_id == request.request_id  # still waiting
    answer = {request.request_id: request.data.create_response(True)}
    items = [item async for item in session.send_responses_stream(answer)]
    assert ran == [5]
    result = items[-1]
    assert isinstance(result, TaskResult) and result.stop_message is not None
    assert result.stop_message.source == "max_turns"
    chunks = [e for e in items if isinstance(e, AgentUpdateEvent) and e.executor_id == "payer"]
    assert "".join(c.data.text for c in chunks) == "payer says paid 5"
    shown = [(e.source, e.message.text) for e in items if isinstance(e, TeamMessageEvent)]
    assert shown == [("payer", "payer says paid 5"), ("checker", "checker saw: payer says paid 5")]


def _paying_twice(ran: list[int]) -> ChatAgent:
    """Pays 1, and once that is paid, pays 2 (two approvals, one after the other)."""

    @tool(name="pay", approval_mode="always_require")
    def pay(amount: int) -> str:
        """Pay an amount."""
        ran.append(amount)
        return f"paid {amount}"

    def answer(messages: list[Message], options: ChatOptions) -> ScriptedTurn:
        results = [r for m in messages for r in m.function_results]
        if len(results) < 2:
            return [tool_call("pay", {"amount": len(results) + 1})]
        return "payer says " + ", ".join(str(r.result or r.error) for r in results)

    return ChatAgent(ScriptedChatClient(answer), name="payer", tools=[pay])


@pytest.mark.parametrize("kind", ["round robin", "concurrent"])
async def test_a_turn_that_asks_again_after_an_answer_pauses_again(kind: str) -> None:
    ran: list[int] = []
    make, _ = TEAMS[kind]
    session = make([_paying_twice(ran), _checker()]).create_session()
    await session.run("pay the bill")
    first = _approval(session)
    await session.send_responses({first.request_id: first.data.create_response(True)})
    second = _approval(session)
    assert ran == [1] and second.data.function_call.arguments == {"amount": 2}
    done = await session.send_responses({second.request_id: second.data.create_response(True)})
    assert ran == [1, 2]
    assert "payer: payer says paid 1, paid 2" in _lines(done)
    turn = [m for m in done.messages if m.author_name == "payer"]
    assert len(turn) == 1  # one turn: the transcript shows its last word only


async def test_a_remote_participant_served_over_a2a_pauses_and_goes_on_alike() -> None:
    pytest.importorskip("a2a", reason="needs the serve extra")
    from cantata.agents.remote_a2a import A2AAgent
    from cantata.stores import MemoryStore

    from ..serve._servers import serving

    ran: list[int] = []
    async with (
        MemoryStore() as store,
        serving(paying_agent("payer", ran), store=store) as url,
        A2AAgent(f"{url}/a2a/payer") as remote,
    ):
        session = GroupChat([remote, _checker()], max_turns=2).create_session()
        paused = await session.run("pay the bill")
        assert paused.stop_message is not None and paused.stop_message.source == "input"
        request = _approval(session)
        assert request.executor_id == "payer" and ran == []
        assert request.data.function_call.arguments == {"amount": 5}
        done = await session.send_responses(
            {request.request_id: request.data.create_response(True)}
        )
        kinds = {type(session.channels.channel(k)) for k in session.channels.keys}
    assert ran == [5]
    assert ServiceChannel in kinds  # the remote agent's turn went on on its server thread
    lines = _lines(done)
    assert lines[-1] == f"checker: checker saw: {lines[-2].removeprefix('payer: ')}"
    assert "paid 5" in lines[-2]


async def test_a_remote_participants_paused_turn_goes_on_in_a_fresh_team(tmp_path: Path) -> None:
    pytest.importorskip("a2a", reason="needs the serve extra")
    from cantata.agents.remote_a2a import A2AAgent
    from cantata.stores import MemoryStore

    from ..serve._servers import serving

    ran: list[int] = []
    checkpoints = StateStoreCheckpointStore(SQLiteStore(str(tmp_path / "team.db")))
    try:
        async with (
            MemoryStore() as store,
            serving(paying_agent("payer", ran), store=store) as url,
        ):
            async with A2AAgent(f"{url}/a2a/payer") as remote:
                team = GroupChat([remote, _checker()], max_turns=2)
                session = team.create_session(checkpoint_store=checkpoints)
                await session.run("pay the bill")
                checkpoint = session.checkpoint_id
                assert checkpoint is not None
            async with A2AAgent(f"{url}/a2a/payer") as again:  # a new client, as after a restart
                fresh = GroupChat([again, _checker()], max_turns=2)
                resumed = await fresh.resume(checkpoint, checkpoint_store=checkpoints)
                request = _approval(resumed)
                done = await resumed.send_responses(
                    {request.request_id: request.data.create_response(True)}
                )
    finally:
        await checkpoints.close()
    assert ran == [5]  # the served agent's waiting task took the approval
    lines = _lines(done)
    assert lines[-2] == "payer: payer says paid 5"
    assert lines[-1] == "checker: checker saw: payer says paid 5"


async def test_a_team_as_an_agent_asks_as_an_agent_does_and_the_next_run_answers() -> None:
    ran: list[int] = []
    agent = _team("round robin", ran).as_agent(name="payments")
    thread = agent.create_thread()
    asked = await agent.run("pay the bill", thread=thread)
    assert asked.finish_reason == "approval_required"
    [request] = asked.user_input_requests
    assert request.function_call.name == "pay" and asked.messages[-1].author_name == "payer"
    assert ran == []
    done = await agent.run(Message("user", [request.create_response(True)]), thread=thread)
    assert ran == [5]
    assert [f"{m.author_name}: {m.text}" for m in done.messages] == [
        "payer: payer says paid 5",
        "checker: checker saw: payer says paid 5",
    ]
    assert done.finish_reason is not None and "maximum of 2 turns" in done.finish_reason
    # a tool made of it has no thread to come back to: it says what it waits for
    as_tool = _team("round robin", ran).as_agent(name="payments").as_tool()
    with pytest.raises(ToolError, match="waiting on pay"):
        await as_tool.invoke({"task": "pay the bill"})
    assert ran == [5]


async def test_a_team_served_over_a2a_asks_its_client_and_takes_the_approval() -> None:
    pytest.importorskip("a2a", reason="needs the serve extra")
    from cantata.agents.remote_a2a import A2AAgent
    from cantata.stores import MemoryStore

    from ..serve._servers import serving

    ran: list[int] = []
    async with (
        MemoryStore() as store,
        serving(_team("round robin", ran), store=store) as url,
        A2AAgent(f"{url}/a2a/group_chat") as remote,
    ):
        thread = remote.create_thread()
        asked = await remote.run("pay the bill", thread=thread)
        assert asked.finish_reason == "approval_required" and ran == []
        [request] = asked.user_input_requests
        done = await remote.run(Message("user", [request.create_response(True)]), thread=thread)
    assert ran == [5]
    assert "checker saw: payer says paid 5" in done.text


@pytest.mark.parametrize("kind", ["round robin", "chain", "handoff"])
async def test_a_pending_approval_travels_in_saved_state_as_json(kind: str) -> None:
    before: list[int] = []
    session = _team(kind, before).create_session(checkpoint_store=InMemoryCheckpointStore())
    await session.run("pay the bill")
    saved = json.loads(json.dumps(await session.save_state()))
    after: list[int] = []
    loaded = _team(kind, after).create_session()
    await loaded.load_state(saved)
    request = _approval(loaded)
    done = await loaded.send_responses({request.request_id: request.data.create_response(True)})
    assert (before, after) == ([], [5])
    assert any(line.startswith("checker: checker saw") for line in _lines(done))


_CHILD = """
import asyncio, json, sys
from cantata.stores import SQLiteStore
from cantata.workflows import StateStoreCheckpointStore
from tests.teams.test_approvals import _team

async def main(mode, db, kind):
    store = StateStoreCheckpointStore(SQLiteStore(db))
    ran = []
    try:
        if mode == "pause":
            session = _team(kind, ran).create_session(checkpoint_store=store)
            await session.run("pay the bill")
            print(json.dumps({"checkpoint": session.checkpoint_id, "ran": ran}))
            return
        session = await _team(kind, ran).resume(sys.argv[4], checkpoint_store=store)
        [request] = session.pending_requests
        done = await session.send_responses(
            {request.request_id: request.data.create_response(True)}
        )
        lines = [f"{m.author_name}: {m.text}" for m in done.messages]
        print(json.dumps({"ran": ran, "lines": lines, "stop": done.stop_reason}))
    finally:
        await store.close()

asyncio.run(main(*sys.argv[1:4]))
"""


def _child(*args: str) -> dict[str, object]:
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, *args],
        env={**os.environ, "PYTHONPATH": f"{root / 'src'}:{root}"},
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    out: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


@pytest.mark.parametrize("kind", ["round robin", "concurrent"])
async def test_a_pending_approval_is_answered_in_another_process(kind: str, tmp_path: Path) -> None:
    reference_ran: list[int] = []
    reference = _team(kind, reference_ran).create_session()
    await reference.run("pay the bill")
    request = _approval(reference)
    expected = await reference.send_responses(
        {request.request_id: request.data.create_response(True)}
    )
    db = str(tmp_path / "team.db")
    paused = _child("pause", db, kind)
    assert paused["ran"] == []
    resumed = _child("resume", db, kind, str(paused["checkpoint"]))
    assert resumed == {"ran": [5], "lines": _lines(expected), "stop": expected.stop_reason}


async def test_a_turn_that_fails_after_the_answer_waits_again_and_runs_the_tool_once() -> None:
    ran: list[int] = []
    down = [True]

    @tool(name="pay", approval_mode="always_require")
    def pay(amount: int) -> str:
        """Pay an amount."""
        ran.append(amount)
        return f"paid {amount}"

    def answer(messages: list[Message], options: ChatOptions) -> ScriptedTurn:
        if messages[-1].role != "tool":
            return [tool_call("pay", {"amount": 5})]
        if down[0]:
            down[0] = False
            return ModelError("the model is down")
        return f"payer says {messages[-1].function_results[-1].result}"

    payer = ChatAgent(ScriptedChatClient(answer), name="payer", tools=[pay])
    session = GroupChat([payer, _checker()], max_turns=2).create_session()
    await session.run("pay the bill")
    request = _approval(session)
    with pytest.raises(WorkflowError, match="the model is down"):
        await session.send_responses({request.request_id: request.data.create_response(True)})
    again = _approval(session)  # the turn waits for its answer again
    assert again.request_id == request.request_id and ran == [5]
    done = await session.send_responses({again.request_id: again.data.create_response(True)})
    assert ran == [5]  # its result was in the turn already: approved twice, run once
    assert _lines(done)[-2:] == [
        "payer: payer says paid 5",
        "checker: checker saw: payer says paid 5",
    ]


def _asking_twice() -> ChatAgent:
    """Asks the clerk twice, one question after the other, then says what it got."""
    spec = ToolSpec("ask_clerk", "Ask the clerk.", {"type": "object", "properties": {}})

    def answer(messages: list[Message], options: ChatOptions) -> ScriptedTurn:
        results = [r.result for m in messages for r in m.function_results]
        if len(results) < 2:
            return [tool_call("ask_clerk", {})]
        return f"payer got {results}"

    return ChatAgent(ScriptedChatClient(answer), name="payer", options=ChatOptions(tools=[spec]))


@pytest.mark.parametrize("kind", ["round robin", "chain"])
async def test_each_answer_reaches_the_participant_once_and_no_one_else(kind: str) -> None:
    make, _ = TEAMS[kind]
    team = make([_asking_twice(), _checker()])
    session = team.create_session()
    await session.run("ask twice")
    for said in ("one", "two"):
        [request] = session.pending_requests
        assert isinstance(request.data, FunctionCallContent)
        answer = FunctionResultContent(request.data.call_id, result=said)
        done = await session.send_responses({request.request_id: answer})
    assert "payer: payer got ['one', 'two']" in _lines(done)
    checker = team.participants[1]
    seen = checker.client.calls[-1].messages  # type: ignore[attr-defined]
    assert not [c for m in seen for c in m.contents if type(c) is not TextContent]
    for channel in (session.channels.channel(k) for k in session.channels.keys):
        if isinstance(channel, LocalChannel):  # the checker's side holds text only
            view = channel.view("checker")
            assert all(type(c) is TextContent for m in view for c in m.contents)


async def test_a_remote_participant_that_asks_twice_is_answered_twice() -> None:
    pytest.importorskip("a2a", reason="needs the serve extra")
    from cantata.agents.remote_a2a import A2AAgent
    from cantata.stores import MemoryStore

    from ..serve._servers import serving

    ran: list[int] = []
    async with (
        MemoryStore() as store,
        serving(_paying_twice(ran), store=store) as url,
        A2AAgent(f"{url}/a2a/payer") as remote,
    ):
        session = GroupChat([remote, _checker()], max_turns=2).create_session()
        await session.run("pay the bill")
        for _ in range(2):
            request = _approval(session)
            done = await session.send_responses(
                {request.request_id: request.data.create_response(True)}
            )
    assert ran == [1, 2]
    assert _lines(done)[-2] == "payer: payer says paid 1, paid 2"


@pytest.mark.parametrize("kind", ["round robin", "concurrent"])
async def test_a_turn_paused_a_second_time_goes_on_in_a_fresh_team(
    kind: str, tmp_path: Path, runtime: LocalRuntime | None
) -> None:
    make, _ = TEAMS[kind]
    store = StateStoreCheckpointStore(SQLiteStore(str(tmp_path / "team.db")))
    try:
        before: list[int] = []
        session = make([_paying_twice(before), _checker()]).create_session(
            checkpoint_store=store, runtime=runtime
        )
        await session.run("pay the bill")
        first = _approval(session)
        await session.send_responses({first.request_id: first.data.create_response(True)})
        checkpoint = session.checkpoint_id
        assert checkpoint is not None and before == [1]
        after: list[int] = []
        fresh = make([_paying_twice(after), _checker()])
        resumed = await fresh.resume(checkpoint, checkpoint_store=store, runtime=runtime)
        second = _approval(resumed)
        assert second.data.function_call.arguments == {"amount": 2}
        done = await resumed.send_responses({second.request_id: second.data.create_response(True)})
    finally:
        await store.close()
    assert (before, after) == ([1], [2])
    assert "payer: payer says paid 1, paid 2" in _lines(done)
    payer = fresh.participants[0]
    shown = payer.client.calls[-1].messages  # type: ignore[attr-defined]
    assert [r.result for m in shown for r in m.function_results] == ["paid 1", "paid 2"]
