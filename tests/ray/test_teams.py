"""Teams on `RayRuntime` with no change to the team's code (issue 14, item 3).

Each team type of `ray_teams` runs on each kind of runtime (an in-process `LocalRuntime`,
one that copies every message as JSON, and a `RayRuntime` on the tests' two-node cluster,
where each participant is an actor of its own, in its own process) and must produce the
transcript the same team produces in process without a runtime: the scripted agents count
the messages they are shown, so a channel that missed or doubled a message in another
process changes the transcript. Checkpoints made on one runtime resume on another, and a
cancelled run goes on where it stopped.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import ray_teams as rt

from cantata.core import CancellationToken, CancelledError, Message, WorkflowError
from cantata.runtime import AgentRuntime, LocalRuntime
from cantata.runtime.ray import AgentUnavailable, RayRuntime
from cantata.teams import RoutingEvent, TaskResult, Team, TeamMessageEvent
from cantata.workflows import InMemoryCheckpointStore


@pytest.fixture(params=["local", "copying", "ray"])
async def runtime(request: pytest.FixtureRequest) -> AsyncIterator[AgentRuntime]:
    if request.param != "ray":
        async with LocalRuntime(serialize_messages=request.param == "copying") as local:
            yield local
        return
    request.getfixturevalue("cluster")
    async with RayRuntime(
        name=f"t{uuid.uuid4().hex[:8]}", default_timeout=60, hosts_per_node=2
    ) as ray_rt:
        yield ray_rt


def transcript(result: TaskResult) -> list[tuple[Any, ...]]:
    """What a reader of the result sees: who said what, tool calls by name, the stop."""

    def line(m: Message) -> tuple[Any, ...]:
        return (m.author_name, m.role, m.text, [c.name for c in m.function_calls])

    return [*map(line, result.messages), ("stop", result.stop_message.source)]


async def conversation(team: Team, tasks: list[str | None], **session: Any) -> list[Any]:
    """The transcripts of runs of one session of `team`, one per task."""
    chat = team.create_session(**session)
    try:
        return [transcript(await chat.run(task)) for task in tasks]
    finally:
        await chat.close()


TASKS: dict[str, list[str | None]] = {
    "round_robin": ["write a haiku", "another one"],
    "selector": ["pick well", None],
    "function_speaker": ["go", "again"],
    "reduced": ["go", "on"],
    "sequential": ["draft this", "once more"],
    "concurrent": ["assess the plan"],
    "handoff": ["I want my money back", "thanks, and the invoice?"],
    "magentic": ["find the answer"],
}


ON_RAY = {"round_robin", "handoff", "magentic", "concurrent"}
"""The team types also run on Ray (a Ray actor per participant costs seconds in CI); the
others exercise the same catching-up code on the copying runtime."""


@pytest.mark.parametrize(
    ("kind", "runtime"),
    [
        (kind, where)
        for kind in sorted(TASKS)
        for where in ("local", "copying", "ray")
        if where != "ray" or kind in ON_RAY
    ],
    indirect=["runtime"],
)
async def test_every_team_type_says_the_same_on_every_runtime(
    kind: str, runtime: AgentRuntime
) -> None:
    build: Callable[[], Team] = rt.BUILDERS[kind]
    expected = await conversation(build(), TASKS[kind])
    got = await conversation(build(), TASKS[kind], runtime=runtime)
    assert got == expected
    assert len(expected[0]) > 3  # the task, some turns, the stop: not a trivial run


async def test_a_streamed_run_yields_the_same_messages_and_routing(runtime: AgentRuntime) -> None:
    async def stream(**session: Any) -> tuple[list[Any], list[str], TaskResult]:
        chat = rt.round_robin().create_session(**session)
        items = [item async for item in chat.run_stream("write a haiku")]
        said = [(e.source, e.message.text) for e in items if isinstance(e, TeamMessageEvent)]
        routes = [e.choice for e in items if isinstance(e, RoutingEvent)]
        result = items[-1]
        assert isinstance(result, TaskResult)
        return said, routes, result

    said, routes, result = await stream(runtime=runtime)
    ref_said, ref_routes, ref_result = await stream()
    assert (said, routes) == (ref_said, ref_routes)
    assert routes == ["writer", "critic", "writer", "critic", "writer"]
    assert transcript(result) == transcript(ref_result)


async def test_a_checkpoint_resumes_on_this_runtime_and_in_process(runtime: AgentRuntime) -> None:
    tasks = ["write a haiku", "another one", "and a third"]
    expected = await conversation(rt.round_robin(), tasks)
    team = rt.round_robin()
    store = InMemoryCheckpointStore()
    first = team.create_session(checkpoint_store=store, runtime=runtime)
    assert transcript(await first.run(tasks[0])) == expected[0]
    saved = first.checkpoint_id
    assert saved is not None
    # a new session at the checkpoint on the same runtime: its channels (in every process)
    # are new, and catch up from the history
    here = await team.resume(saved, checkpoint_store=store, runtime=runtime)
    assert transcript(await here.run(tasks[1])) == expected[1]
    # the same checkpoint in process, without a runtime (the other placement)
    local = await team.resume(here.checkpoint_id or "", checkpoint_store=store)
    assert transcript(await local.run(tasks[2])) == expected[2]
    # and back: save the state as JSON, load it into a session on the runtime
    state = await local.save_state()
    again = team.create_session(runtime=runtime)
    await again.load_state(state)
    more = transcript(await again.run("a fourth"))
    reference = await conversation(rt.round_robin(), [*tasks, "a fourth"])
    assert more == reference[3]


async def test_a_cancelled_run_goes_on_where_it_stopped(
    runtime: AgentRuntime, tmp_path: Any
) -> None:
    marker = str(tmp_path / "go")
    team = rt.waiting(marker)
    chat = team.create_session(runtime=runtime)
    token = CancellationToken()
    with pytest.raises(CancelledError):
        async with asyncio.timeout(60):  # guards the test against the hang it is about
            async for item in chat.run_stream("wait for it", cancellation_token=token):
                if isinstance(item, RoutingEvent) and item.choice == "slow":
                    await asyncio.sleep(0.2)  # let the slow turn start
                    token.cancel()
    open(marker, "w").close()  # noqa: ASYNC230 (a test's flag)
    finished = transcript(await chat.run())
    expected = await conversation(rt.waiting(marker), ["wait for it"])
    assert finished == expected[0]


async def test_a_participant_whose_worker_dies_fails_the_run_which_resumes(
    cluster: Any, tmp_path: Any
) -> None:
    marker = str(tmp_path / "crashed")
    team = rt.crashing(marker)
    store = InMemoryCheckpointStore()
    async with RayRuntime(
        name=f"t{uuid.uuid4().hex[:8]}", default_timeout=60, hosts_per_node=2
    ) as ray_rt:
        chat = team.create_session(checkpoint_store=store, runtime=ray_rt)
        with pytest.raises(WorkflowError, match="executor 'crashy' failed") as failed:
            async with asyncio.timeout(90):  # the caller is not left hanging
                await chat.run("go")
        assert isinstance(failed.value.__cause__, AgentUnavailable)
        # the turns before the crash were committed: resume from the last checkpoint
        last = max(await store.list_checkpoints(), key=lambda c: c.superstep)
        assert last.superstep >= 4  # the task, a's and b's turns
        resumed = await team.resume(last.checkpoint_id, checkpoint_store=store, runtime=ray_rt)
        finished = transcript(await resumed.run())
    expected = await conversation(rt.crashing(marker), ["go"])  # the marker is there now
    assert finished == expected[0]
