"""Failure semantics on the cluster: a dead worker or node never leaves a caller hanging
(a workflow run on a lost node fails its call and resumes from its checkpoint), eviction
to a real store keeps the agent's state, state saves and loads, a worker refuses a wire
version it cannot read, cancellation reaches a nested request in another actor, and a
cycle of requests across actors (A asks B, B asks A) runs instead of waiting for its
timeout."""

from __future__ import annotations

import asyncio
import os
import uuid
from typing import Any

import pytest
import ray_agents as ra

import ray
from cantata.core import SchemaVersionError
from cantata.runtime import AgentId, TopicId
from cantata.runtime.ray import AgentUnavailable, RayRuntime, wire
from cantata.stores import RedisStore

REDIS = "redis://127.0.0.1:6379/0"


def _redis_up() -> bool:
    import socket

    try:
        with socket.create_connection(("127.0.0.1", 6379), timeout=0.5):
            return True
    except OSError:
        return False


needs_redis = pytest.mark.skipif(
    not _redis_up() and os.environ.get("CI", "") == "", reason="Redis is not on 127.0.0.1:6379"
)


def _name() -> str:
    return f"f{uuid.uuid4().hex[:8]}"


async def _until_marked_dead(node_id: str) -> None:
    """Wait (60 s at most) for the cluster to see a removed node as dead: until then it may
    still place a later test's actor there, which then dies with the node (a CI flake)."""
    for _ in range(300):
        if not any(n["NodeID"] == node_id and n["Alive"] for n in ray.nodes()):
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"node {node_id} still alive 60 s after its removal")


async def test_worker_death_mid_request_is_a_typed_error_then_the_agent_comes_back(
    cluster: Any,
) -> None:
    async with RayRuntime(name=_name(), hosts_per_node=2, default_timeout=60) as rt:
        await rt.register_factory("counter", ra.Counter)
        a = AgentId("counter", "a")
        await rt.send_message(ra.Add(2), a)
        before = (await rt.send_message(ra.Get(), a)).pid
        with pytest.raises(AgentUnavailable, match="counter/a"):
            await rt.send_message(ra.Crash(), a)
        seen = await rt.send_message(
            ra.Get(), a
        )  # its host again (a new process), from the factory
        assert seen.pid != before
        assert seen.notes == ["total=0"]


async def test_node_death_mid_request_does_not_hang_the_caller(cluster: Any) -> None:
    node = cluster.add_node(
        num_cpus=2, resources={"doomed": 1}, object_store_memory=80 * 1024 * 1024
    )
    cluster.wait_for_nodes()
    options = {"resources": {"doomed": 0.001}}
    async with RayRuntime(
        name=_name(), hosts_per_node=2, default_timeout=120, actor_options=options
    ) as rt:
        await rt.register_factory("counter", ra.Counter)
        a = AgentId("counter", "a")
        node_id, _ = await rt.where(a)
        assert node_id == node.node_id
        pending = asyncio.ensure_future(rt.send_message(ra.Hang(), a))
        await asyncio.sleep(0.5)
        cluster.remove_node(node, allow_graceful=False)
        with pytest.raises(AgentUnavailable, match="counter/a"):
            await asyncio.wait_for(pending, 100)  # the bound only guards the test itself
    await _until_marked_dead(node.node_id)


async def test_an_event_whose_worker_dies_is_delivered_again(cluster: Any, tmp_path: Any) -> None:
    marker = tmp_path / "crashed"
    async with RayRuntime(name=_name(), hosts_per_node=2, default_timeout=60) as rt:
        await rt.register_factory("counter", ra.Counter)
        b = AgentId("counter", "b")
        await rt.publish_message(ra.Note(f"crash-once:{marker}"), TopicId("news", "b"))
        await rt.wait_until_idle(timeout=60)
        assert marker.exists()  # the first delivery killed the worker
        seen = await rt.send_message(ra.Get(), b)
        assert seen.notes == [f"crash-once:{marker}", "total=0"]  # at least once: here once


@needs_redis
async def test_eviction_saves_to_redis_and_the_agent_continues(cluster: Any) -> None:
    prefix = f"cantata-test-ray-{uuid.uuid4().hex[:8]}:"
    store = lambda: RedisStore(REDIS, prefix=prefix)  # noqa: E731
    try:
        async with RayRuntime(name=_name(), hosts_per_node=2, store=store) as rt:
            await rt.register_factory("counter", ra.Counter)
            a = AgentId("counter", "a")
            assert await rt.send_message(ra.Add(4), a) == 4
            assert await rt.evict_idle(0.0) == 1
            assert await rt.live_agents() == []
            assert await rt.send_message(ra.Add(1), a) == 5  # restored from Redis
            assert await rt.live_agents() == [a]
            saved = await rt.save_state()
            assert saved["agents"]["counter/a"]["state"]["total"] == 5
        async with RayRuntime(name=_name(), hosts_per_node=2, store=store, evict_after=0.2) as rt2:
            await rt2.register_factory("counter", ra.Counter)
            a = AgentId("counter", "a")
            assert await rt2.send_message(ra.Add(1), a) == 6  # what close() saved
            for _ in range(200):
                if not await rt2.live_agents():
                    break
                await asyncio.sleep(0.05)
            assert await rt2.live_agents() == []  # the idle agent left its host by itself
            assert await rt2.send_message(ra.Add(1), a) == 7
    finally:
        cleanup = RedisStore(REDIS, prefix=prefix)
        for key in await cleanup.keys(""):
            await cleanup.delete(key)
        await cleanup.close()


async def test_save_and_load_state_between_runtimes(cluster: Any) -> None:
    async with RayRuntime(name=_name(), hosts_per_node=2) as rt:
        await rt.register_factory("counter", ra.Counter)
        await rt.send_message(ra.Add(3), AgentId("counter", "x"))
        data = await rt.save_state()
    assert data["agents"]["counter/x"]["state"]["total"] == 3
    async with RayRuntime(name=_name(), hosts_per_node=2) as rt2:
        await rt2.register_factory("counter", ra.Counter)
        await rt2.load_state(data)
        assert await rt2.send_message(ra.Add(1), AgentId("counter", "x")) == 4
        with pytest.raises(SchemaVersionError):
            await rt2.load_state({**data, "schema_version": 99})


async def test_a_worker_answers_an_unknown_wire_version_with_a_typed_error(
    cluster: Any,
) -> None:
    async with RayRuntime(name=_name(), hosts_per_node=2) as rt:
        await rt.register_factory("counter", ra.Counter)
        a = AgentId("counter", "a")
        await rt.send_message(ra.Add(1), a)
        host = rt._router.membership.owner(str(a))  # type: ignore[union-attr]
        handle = ray.get_actor(host, namespace="cantata")
        reply = await handle.request.remote({"v": 99, "id": "m"})
        with pytest.raises(SchemaVersionError, match="wire version 99"):
            wire.result(reply, "a request")
        assert await rt.send_message(ra.Add(1), a) == 2  # the host is still there


async def _resume_on_a_busy_cluster(wf: Any, checkpoint_id: str, store: Any, rt: Any) -> Any:
    """Resume; a node of this busy test machine may itself be taken for lost meanwhile,
    which is the typed error again (bounded), and resuming from the checkpoint is safe."""
    from cantata.core import WorkflowError

    for attempt in range(3):
        try:
            async with asyncio.timeout(120):
                return await wf.resume(checkpoint_id, checkpoint_store=store, runtime=rt)
        except WorkflowError as exc:
            if attempt == 2 or not isinstance(exc.__cause__, AgentUnavailable):
                raise
    raise AssertionError("unreachable")


async def test_a_node_lost_mid_workflow_fails_the_call_and_the_run_resumes(
    cluster: Any, tmp_path: Any
) -> None:
    import ray_flows as rf

    from cantata.core import WorkflowError
    from cantata.workflows import InMemoryCheckpointStore

    doomed = cluster.add_node(
        num_cpus=4, resources={"wf-node": 1}, object_store_memory=80 * 1024 * 1024
    )
    cluster.wait_for_nodes()
    marker = str(tmp_path / "go")
    store = InMemoryCheckpointStore()
    wf = rf.slow("executor", marker)
    options = {"resources": {"wf-node": 0.001}}  # every executor's actor on that node
    async with RayRuntime(
        name=_name(), hosts_per_node=2, default_timeout=120, actor_options=options
    ) as rt:
        stream = wf.run_stream(1, runtime=rt, checkpoint_store=store)
        committed: list[int] = []
        with pytest.raises(WorkflowError, match="executor 'wait' failed") as failed:
            async with asyncio.timeout(90):  # the caller is not left hanging
                async for event in stream:
                    if type(event).__name__ == "SuperstepCompletedEvent":
                        committed.append(event.superstep)
                    if isinstance(event, rf.Tagged) and event.text == "wait started":
                        cluster.remove_node(doomed, allow_graceful=False)
        assert isinstance(failed.value.__cause__, AgentUnavailable)
        assert committed == [1]  # superstep 1 was committed before the node went
        [last] = [c for c in await store.list_checkpoints() if c.superstep == 1]
        await _until_marked_dead(doomed.node_id)
        cluster.add_node(num_cpus=4, resources={"wf-node": 1}, object_store_memory=80 * 2**20)
        cluster.wait_for_nodes()
        os.close(os.open(marker, os.O_CREAT | os.O_WRONLY))
        done = await _resume_on_a_busy_cluster(wf, last.checkpoint_id, store, rt)
        assert done.status == "idle"
        assert done.outputs == [(1 + 1) * 2 + 1]  # from the checkpoint: s1 ran once


async def test_cancellation_reaches_a_nested_request_in_another_actor(
    cluster: Any, tmp_path: Any
) -> None:
    from cantata.core import CancellationToken, CancelledError

    marker = tmp_path / "hanging"
    async with RayRuntime(name=_name(), hosts_per_node=2, default_timeout=60) as rt:
        await rt.register_factory("counter", ra.Counter)
        a, b = AgentId("counter", "a"), AgentId("counter", "b")
        token = CancellationToken()
        relay = ra.Relay(b, str(marker))
        pending = asyncio.ensure_future(rt.send_message(relay, a, cancellation_token=token))
        async with asyncio.timeout(60):
            while not marker.exists():  # noqa: ASYNC110 (A waits on B, and B hangs)
                await asyncio.sleep(0.05)
        token.cancel()
        with pytest.raises(CancelledError):
            await asyncio.wait_for(pending, 10)
        seen = await rt.send_message(ra.Get(), b, timeout=30)  # once B's hang has ended
        [entry] = seen.cancelled
        assert entry.endswith(":token")  # B's handler saw its token cancelled


async def test_a_cycle_across_actors_runs_within_the_waiting_turn(cluster: Any) -> None:
    async with RayRuntime(name=_name(), hosts_per_node=2, default_timeout=20) as rt:
        await rt.register_factory("counter", ra.Counter)
        a, b = AgentId("counter", "a"), AgentId("counter", "b")
        assert await rt.send_message(ra.Add(5), a) == 5
        # A asks B, B asks A: A's turn is waiting on B, so B's request runs within it
        async with asyncio.timeout(15):  # well below the 20 s a deadlock would take
            assert await rt.send_message(ra.Loop(to=b, back=a), a) == 5
        assert await rt.send_message(ra.Add(1), a) == 6  # A's turns go on as usual
