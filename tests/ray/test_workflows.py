"""Workflows on `RayRuntime` with no change to their code (issue 14, item 3).

Each test runs a workflow of `ray_flows` with ``placement="executor"`` on each kind of
runtime (an in-process `LocalRuntime`, one that copies every message as JSON, and a
`RayRuntime` on the tests' two-node cluster) and compares what comes out with the same
workflow run in process with the default placement: outputs, status, and the events.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import ray_flows as rf

from cantata.core import CancellationToken, WorkflowError
from cantata.runtime import AgentRuntime, LocalRuntime, TopicId
from cantata.runtime.ray import RayRuntime
from cantata.stores import MemoryStore
from cantata.workflows import (
    AgentUpdateEvent,
    ExecutorFailedEvent,
    InMemoryCheckpointStore,
    StateStoreCheckpointStore,
    SuperstepCompletedEvent,
    Workflow,
    WorkflowEvent,
)


@pytest.fixture(params=["local", "copying", "ray"])
async def runtime(request: pytest.FixtureRequest) -> AsyncIterator[AgentRuntime]:
    if request.param != "ray":
        async with LocalRuntime(serialize_messages=request.param == "copying") as local:
            yield local
        return
    request.getfixturevalue("cluster")
    async with RayRuntime(
        name=f"w{uuid.uuid4().hex[:8]}", default_timeout=60, hosts_per_node=2
    ) as ray_rt:
        yield ray_rt


def _lines(path: str) -> list[str]:
    with open(path) as f:
        return f.read().split()


def shape(events: list[WorkflowEvent]) -> dict[Any, list[str]]:
    """Event kinds in order per executor (and for the run itself, under None): executors of
    one superstep run in parallel on Ray, so only their interleaving may differ."""
    by: dict[Any, list[str]] = {}
    for e in events:
        by.setdefault(getattr(e, "executor_id", None), []).append(type(e).__name__)
    return by


async def both(workflow: Workflow, reference: Workflow, given: Any, rt: AgentRuntime) -> Any:
    local = await reference.run(given, include_events=True)
    placed = await workflow.run(given, runtime=rt, include_events=True)
    assert placed.outputs == local.outputs
    assert placed.status == local.status
    assert shape(placed.events) == shape(local.events)
    return placed


async def test_a_chain_with_live_events(runtime: AgentRuntime) -> None:
    result = await both(rf.chain("executor"), rf.chain("run"), 1, runtime)
    assert result.outputs == [1 + sum(range(5)) + 1]
    tags = [e.text for e in result.events if isinstance(e, rf.Tagged)]
    assert tags == [f"s{i}" for i in range(6)]


async def test_a_fan_out_and_fan_in(runtime: AgentRuntime) -> None:
    result = await both(rf.fan("executor", 4), rf.fan("run", 4), 3, runtime)
    assert result.outputs == [3 * sum(range(4))]


async def test_a_request_and_its_answer(runtime: AgentRuntime) -> None:
    asked = await rf.gate("executor").run(7, runtime=runtime)
    assert asked.status == "idle_with_pending_requests"
    [request] = asked.pending_requests
    assert request.data == rf.Approve(7) and request.response_type is bool
    done = await asked.run.send_responses({request.request_id: True})
    assert done.outputs == ["paid 14"]


async def test_checkpoints_and_a_resume(runtime: AgentRuntime) -> None:
    store = InMemoryCheckpointStore()
    wf = rf.chain("executor", 3)
    first = await wf.run(2, runtime=runtime, checkpoint_store=store, include_events=True)
    assert first.outputs == [2 + 0 + 1 + 1]
    [entry, *_] = [e.checkpoint_id for e in first.events if isinstance(e, SuperstepCompletedEvent)]
    resumed = await wf.resume(entry, checkpoint_store=store, runtime=runtime)
    assert resumed.outputs == first.outputs


async def test_agent_executors_stream_their_updates(runtime: AgentRuntime) -> None:
    local = await rf.agents("run").run_stream("draft").get_result()
    placed = await rf.agents("executor").run_stream("draft", runtime=runtime).get_result()
    assert placed.outputs == local.outputs
    assert placed.outputs and "editor saw" in placed.outputs[0]
    updates = [e for e in placed.events if isinstance(e, AgentUpdateEvent)]
    assert len(updates) == len([e for e in local.events if isinstance(e, AgentUpdateEvent)]) > 2
    assert shape(placed.events) == shape(local.events)


async def test_a_failure_is_reported_after_the_events_before_it(runtime: AgentRuntime) -> None:
    events: list[WorkflowEvent] = []
    with pytest.raises(WorkflowError, match="executor 'boom' failed: ValueError: boom"):
        async for event in rf.boom("executor").run_stream(1, runtime=runtime):
            events.append(event)
    kinds = [type(e).__name__ for e in events]
    assert kinds.index("Tagged") < kinds.index("ExecutorFailedEvent")
    assert kinds.index("ExecutorFailedEvent") < kinds.index("WorkflowFailedEvent")
    [failed] = [e for e in events if isinstance(e, ExecutorFailedEvent)]
    assert isinstance(failed.error, ValueError)


async def test_cancellation_reaches_the_executor(runtime: AgentRuntime, tmp_path: Any) -> None:
    marker = str(tmp_path / "go")
    wf = rf.slow("executor", marker)
    token = CancellationToken()
    started = asyncio.Event()
    stream = wf.run_stream(1, runtime=runtime, cancellation_token=token)
    async with asyncio.timeout(60):  # guards the test against the hang it is about
        async for event in stream:
            if isinstance(event, rf.Tagged) and event.text == "wait started":
                started.set()
                token.cancel()
    assert started.is_set()
    result = stream.result
    assert result.status == "cancelled"
    os.close(os.open(marker, os.O_CREAT | os.O_WRONLY))
    done = await result.run.continue_run()
    assert done.status == "idle" and done.outputs == [(1 + 1) * 2 + 1]


async def test_local_subscribers_get_events_and_answer_requests(runtime: AgentRuntime) -> None:
    got: list[Any] = []
    hello = asyncio.Event()
    topic = TopicId("local-test", uuid.uuid4().hex[:8])

    async def take(message: Any) -> Any:
        got.append(message)
        if message == "hello":
            hello.set()
        return f"answer to {message}"

    subscriber = await runtime.add_local_subscriber(topic, take)
    await runtime.publish_message("hello", topic)
    assert await runtime.send_message("question", subscriber.agent_id) == "answer to question"
    await asyncio.wait_for(hello.wait(), 30)
    await runtime.remove_local_subscriber(subscriber)
    await runtime.publish_message("late", topic)
    await asyncio.sleep(0.2)
    assert "late" not in got


async def test_effects_are_journaled_and_not_repeated_on_resume(
    runtime: AgentRuntime, tmp_path: Any
) -> None:
    ledger, marker = str(tmp_path / "ledger"), str(tmp_path / "go")
    store = StateStoreCheckpointStore(MemoryStore())
    wf = rf.charged("executor", ledger, marker)
    with pytest.raises(WorkflowError, match="crashed after the effect"):
        await wf.run(5, runtime=runtime, checkpoint_store=store)
    [key] = _lines(ledger)
    assert key.endswith(":charge:2:charge")  # run:executor:superstep:key
    [checkpoint] = [c for c in await store.list_checkpoints() if c.superstep == 1]
    os.close(os.open(marker, os.O_CREAT | os.O_WRONLY))
    done = await wf.resume(checkpoint.checkpoint_id, checkpoint_store=store, runtime=runtime)
    assert done.outputs == ["receipt 5"]
    assert _lines(ledger) == [key]  # charged once: the resume read the journal
