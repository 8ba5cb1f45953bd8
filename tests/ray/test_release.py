"""On `RayRuntime` (the tests' two-node cluster, two hosts a node), runs leave nothing on
the hosts: after team sessions and executor-placed workflow runs that ended in every way
(done, failed, cancelled, waiting for a person and answered, left waiting), no agent of
theirs is in any host's memory (`placement()`), no object of theirs is in any host process
(a probe agent counts them there) and none in the driver (weak references)."""

from __future__ import annotations

import asyncio
import gc
import uuid
import weakref
from collections.abc import AsyncIterator
from typing import Any

import pytest
import ray_flows as rf
import ray_release as rr

from cantata.core import CancellationToken, CancelledError, WorkflowError
from cantata.runtime import AgentId
from cantata.runtime.ray import RayRuntime

N = 2  # runs of each kind


@pytest.fixture
async def runtime(cluster: Any) -> AsyncIterator[RayRuntime]:
    async with RayRuntime(
        name=f"t{uuid.uuid4().hex[:8]}", default_timeout=60, hosts_per_node=2
    ) as ray_rt:
        await ray_rt.register_factory("probe", rr.Probe)
        yield ray_rt


async def _probes(rt: RayRuntime) -> list[AgentId]:
    """One probe id per host of the pool."""
    hosts = {(s["node"], s["pid"]) for s in await rt.placement()}
    found: dict[tuple[str, int], AgentId] = {}
    for i in range(200):
        probe = AgentId("probe", str(i))
        found.setdefault(await rt.where(probe), probe)
        if len(found) == len(hosts):
            return list(found.values())
    raise AssertionError(f"no probe key reached every host of {hosts}")


async def _nothing_left(rt: RayRuntime, refs: list[weakref.ref[Any]]) -> None:
    assert sum(s["agents"] for s in await rt.placement()) == 0
    assert await rt.live_agents() == []
    probes = await _probes(rt)
    for probe in probes:
        counts = await rt.send_message("count", probe)
        # the probe's own cell is the one cell left; no actor, no invocation of a run
        assert counts == {**dict.fromkeys(rr.LEFT_BEHIND, 0), "Cell": 1}, counts
        await rt.release_agents([probe])
    assert sum(s["agents"] for s in await rt.placement()) == 0
    gc.collect()
    assert [r for r in refs if r() is not None] == []


async def test_release_agents_takes_agents_out_of_their_hosts(runtime: RayRuntime) -> None:
    probes = await _probes(runtime)
    for probe in probes:
        await runtime.send_message("count", probe)
    assert sum(s["agents"] for s in await runtime.placement()) == len(probes)
    assert await runtime.release_agents([*probes, AgentId("probe", "never")]) == len(probes)
    assert sum(s["agents"] for s in await runtime.placement()) == 0
    with pytest.raises(Exception, match="not an AgentId"):
        await runtime.release_agents(["probe/1"])  # type: ignore[list-item]


async def test_workflow_runs_of_every_ending_leave_nothing_on_the_hosts(
    runtime: RayRuntime, tmp_path: Any
) -> None:
    refs: list[weakref.ref[Any]] = []
    for i in range(N):
        done = await rf.chain("executor", 3).run(i, runtime=runtime)
        assert done.outputs == [i + 0 + 1 + 1]
        with pytest.raises(WorkflowError, match="boom"):
            await rf.boom("executor").run(1, runtime=runtime)
        marker = str(tmp_path / f"never-{i}")
        token = CancellationToken()
        slow = rf.slow("executor", marker)
        stream = slow.run_stream(1, runtime=runtime, cancellation_token=token)
        async with asyncio.timeout(60):
            async for event in stream:
                if isinstance(event, rf.Tagged) and event.text == "wait started":
                    token.cancel()
        assert stream.result.status == "cancelled"
        asked = await rf.gate("executor").run(7, runtime=runtime)
        [request] = asked.pending_requests
        assert sum(s["agents"] for s in await runtime.placement()) == 0  # waiting: nothing
        answered = await asked.run.send_responses({request.request_id: True})
        assert answered.outputs == ["paid 14"]
        waiting = await rf.gate("executor").run(3, runtime=runtime)  # left waiting
        refs += [weakref.ref(r.run) for r in (done, stream.result, asked, answered, waiting)]
        del done, stream, asked, answered, waiting
    await _nothing_left(runtime, refs)


async def test_team_sessions_of_every_ending_leave_nothing_on_the_hosts(
    runtime: RayRuntime,
) -> None:
    team = rr.team()
    refs: list[weakref.ref[Any]] = []
    for _ in range(N):
        done = team.create_session(runtime=runtime)
        result = await done.run("talk")
        assert result.stop_message is not None and result.stop_message.source == "max_turns"
        await done.run("talk more")
        failed = team.create_session(runtime=runtime)
        with pytest.raises(WorkflowError, match="the model failed"):
            await failed.run("fail now")
        cancelled = team.create_session(runtime=runtime)
        token = CancellationToken()
        token.cancel()
        with pytest.raises(CancelledError):
            await cancelled.run("talk", cancellation_token=token)
        asked = team.create_session(runtime=runtime)
        waiting = await asked.run("pay the bill")
        assert waiting.stop_message is not None and waiting.stop_message.source == "input"
        assert sum(s["agents"] for s in await runtime.placement()) == 0  # waiting: nothing
        [request] = asked.pending_requests
        answered = await asked.send_responses(
            {request.request_id: request.data.create_response(True)}
        )
        assert "payer is done" in [m.text for m in answered.messages]
        left = team.create_session(runtime=runtime)
        await left.run("pay the bill")
        for session in (done, failed, cancelled, asked, left):
            await session.close()
            refs.append(weakref.ref(session))
        del done, failed, cancelled, asked, left, session
    await _nothing_left(runtime, refs)
