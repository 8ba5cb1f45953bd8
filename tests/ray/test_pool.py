"""The pool: agents as virtual actors, many per host process, placed by hashing.

Thousands of agents share a handful of processes; every acknowledged increment is counted
once while a host is killed under four driver processes, each a runtime joining the pool;
a node added and removed mid-load leaves no caller hanging and moves agents; a
publication reaches subscribers on both nodes with one message per host; concurrent
writers of the pool's config record lose no change.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import sys
import time
import uuid
from typing import Any

import pytest
import ray_agents as ra

import ray
from cantata.core import CantataError
from cantata.runtime import AgentId, TopicId
from cantata.runtime.ray import RayRuntime
from cantata.runtime.ray.membership import node_of
from cantata.stores import RedisStore

REDIS = "redis://127.0.0.1:6379/0"
HERE = os.path.dirname(os.path.abspath(__file__))


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
    return f"p{uuid.uuid4().hex[:8]}"


def _workers(cluster: Any) -> int:
    """Ray worker processes of this test cluster on the machine (read from /proc)."""
    gcs = str(cluster.address).split(":")[-1]
    count = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().decode(errors="replace")
        except OSError:
            continue
        if "default_worker.py" in cmd and f":{gcs}" in cmd:
            count += 1
    return count


async def _gather_bounded(calls: list[Any], width: int) -> list[Any]:
    gate = asyncio.Semaphore(width)

    async def one(call: Any) -> Any:
        async with gate:
            return await call

    return list(await asyncio.gather(*(one(c) for c in calls)))


async def test_thousands_of_agents_share_a_handful_of_processes(cluster: Any) -> None:
    async with RayRuntime(name=_name(), hosts_per_node=2, default_timeout=60) as rt:
        await rt.register_factory("counter", ra.Counter)
        await _gather_bounded(
            [rt.send_message(ra.Add(1), AgentId("counter", f"k{i}")) for i in range(100)], 64
        )
        few = _workers(cluster)
        started = time.monotonic()
        results = await _gather_bounded(
            [rt.send_message(ra.Add(1), AgentId("counter", f"k{i}")) for i in range(3000)], 64
        )
        took = time.monotonic() - started
        assert results[:100] == [2] * 100 and results[100:] == [1] * 2900
        assert _workers(cluster) <= few  # 2,900 more agents, no more processes
        placed = await rt.placement()
        # two hosts on each live node (two, or more where an earlier test of this session's
        # cluster added one)
        nodes = sum(1 for n in ray.nodes() if n["Alive"])
        assert nodes >= 2
        assert len(placed) == 2 * nodes
        assert len({p["node"] for p in placed}) == nodes
        assert len({p["pid"] for p in placed}) == len(placed)
        assert sum(p["agents"] for p in placed) == 3000
        assert all(p["agents"] > 3000 / len(placed) / 2 for p in placed)  # spread by the hash
        print(f"3000 requests (2900 activations) in {took:.2f}s; {few} worker processes")


async def _driver_processes(
    address: str, pool: str, agents: int, count: int
) -> list[asyncio.subprocess.Process]:
    """`count` driver processes (pool_driver.py), each its own RayRuntime joining `pool`;
    returned once each has had an increment acknowledged."""
    path = os.pathsep.join([HERE, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            os.path.join(HERE, "pool_driver.py"),
            address,
            pool,
            str(seed),
            str(agents),
            stdout=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": path},
        )
        for seed in range(count)
    ]
    for proc in procs:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 180)
        assert line.strip() == b"ready", line
    return procs


class _Progress:
    """What the driver processes (pool_driver.py) report: the increments each has had
    acknowledged so far, read from their output as they go, and their last lines."""

    def __init__(self, procs: list[asyncio.subprocess.Process]) -> None:
        self._procs = procs
        self._counts = [0] * len(procs)
        self._last: list[str] = [""] * len(procs)
        self._readers = [asyncio.create_task(self._read(k, p)) for k, p in enumerate(procs)]

    async def _read(self, k: int, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        async for raw in proc.stdout:
            line = raw.decode().strip()
            if line.isdigit():
                self._counts[k] = int(line)
            elif line:
                self._last[k] = line

    @property
    def total(self) -> int:
        return sum(self._counts)

    async def reach(self, target: int, when: str, bound: float = 180.0) -> None:
        """Wait until the drivers together have `target` increments acknowledged."""
        deadline = time.monotonic() + bound
        while self.total < target:
            assert time.monotonic() < deadline, (
                f"{when}: {self.total} of {target} increments acknowledged in {bound} s"
            )
            await asyncio.sleep(0.05)

    async def ends(self, bound: float = 90.0) -> list[dict[str, Any]]:
        """Each driver's closing JSON, once it has exited (after SIGTERM) with status 0."""
        await asyncio.wait_for(asyncio.gather(*self._readers), bound)
        codes = [await asyncio.wait_for(p.wait(), bound) for p in self._procs]
        assert codes == [0] * len(codes), codes
        return [json.loads(line) for line in self._last]


@needs_redis
async def test_every_acknowledged_increment_counts_once_while_a_host_is_killed(
    cluster: Any,
) -> None:
    """1,000 counter agents, 4 driver processes (each its own RayRuntime joining the pool
    this one keeps), a Redis store; a host is killed (kill -9) under them."""
    prefix = f"cantata-test-pool-{uuid.uuid4().hex[:8]}:"
    store = lambda: RedisStore(REDIS, prefix=prefix)  # noqa: E731
    agents = [AgentId("durable", f"d{i}") for i in range(1000)]
    acked = dict.fromkeys(range(len(agents)), 0)
    doubtful = dict.fromkeys(range(len(agents)), 0)  # may or may not have counted
    pool = _name()
    procs: list[asyncio.subprocess.Process] = []
    try:
        async with RayRuntime(name=pool, hosts_per_node=2, store=store, default_timeout=30) as rt:
            await rt.register_factory("durable", ra.DurableCounter)
            procs = await _driver_processes(cluster.address, pool, len(agents), 4)
            progress = _Progress(procs)
            # Progress, not time: the kill comes under load and load goes on after it, on
            # a busy machine as on an idle one.
            await progress.reach(250, "before the kill")
            placed = await rt.placement()
            victim = max(placed, key=lambda p: p["agents"])
            os.kill(int(victim["pid"]), signal.SIGKILL)  # the host's process, kill -9
            await progress.reach(progress.total + 250, "after the kill")
            for proc in procs:
                proc.send_signal(signal.SIGTERM)
            for counts in await progress.ends():
                for i, n in counts["acked"].items():
                    acked[int(i)] += n
                for i, n in counts["doubtful"].items():
                    doubtful[int(i)] += n
            totals = await _gather_bounded(
                [rt.send_message(ra.Get(), a, timeout=30) for a in agents], 64
            )
            after = {p["host"]: p["pid"] for p in await rt.placement()}
        assert after[victim["host"]] != victim["pid"]  # Ray started the host again
        assert sum(acked.values()) > 500
        for i, total in enumerate(totals):
            # each acknowledged increment once: none lost (one activation at a time), none
            # doubled; an increment whose host died with it may or may not have counted
            assert acked[i] <= total <= acked[i] + doubtful[i], agents[i]
        print(f"acked {sum(acked.values())}, lost with the host {sum(doubtful.values())}")
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        cleanup = RedisStore(REDIS, prefix=prefix)
        for key in await cleanup.keys(""):
            await cleanup.delete(key)
        await cleanup.close()


@needs_redis
async def test_a_node_added_and_removed_mid_load_leaves_no_caller_hanging(
    cluster: Any,
) -> None:
    prefix = f"cantata-test-pool-{uuid.uuid4().hex[:8]}:"
    store = lambda: RedisStore(REDIS, prefix=prefix)  # noqa: E731
    agents = [AgentId("durable", f"m{i}") for i in range(200)]
    acked = dict.fromkeys(agents, 0)
    doubtful = dict.fromkeys(agents, 0)
    timeout = 10.0
    outcomes: list[tuple[str, float]] = []
    try:
        async with RayRuntime(
            name=_name(), hosts_per_node=1, store=store, default_timeout=30
        ) as rt:
            await rt.register_factory("durable", ra.DurableCounter)
            stop = asyncio.Event()

            async def caller(seed: int) -> None:
                rng = random.Random(seed)
                while not stop.is_set():
                    agent = rng.choice(agents)
                    began = time.monotonic()
                    try:
                        await asyncio.wait_for(
                            rt.send_message(ra.Add(1), agent, timeout=timeout),
                            timeout + 15,  # the runtime's own bound comes first
                        )
                        outcomes.append(("ok", time.monotonic() - began))
                        acked[agent] += 1
                    except CantataError as exc:
                        outcomes.append((type(exc).__name__, time.monotonic() - began))
                        doubtful[agent] += 1
                    except builtins_timeout:
                        outcomes.append(("hung", time.monotonic() - began))
                        doubtful[agent] += 1

            callers = [asyncio.ensure_future(caller(s)) for s in range(4)]
            await asyncio.sleep(2)
            before = await rt.placement()
            node = cluster.add_node(num_cpus=1, object_store_memory=80 * 1024 * 1024)
            cluster.wait_for_nodes()
            grown = await _until(rt, lambda placed: len(placed) == len(before) + 1)
            [fresh] = [p for p in grown if p["node"] == node.node_id]
            await asyncio.sleep(2)
            assert (await _host(rt, fresh["host"]))["agents"] > 0  # the new node is used
            cluster.remove_node(node, allow_graceful=False)
            await _until(rt, lambda placed: len(placed) == len(before))
            await asyncio.sleep(2)
            stop.set()
            await asyncio.wait_for(asyncio.gather(*callers), 60)
            # every agent answers where it now lives, with every acknowledged increment
            # (handed over to the new node's host from the store, and back after it went)
            totals = await _gather_bounded(
                [rt.send_message(ra.Get(), a, timeout=30) for a in agents], 32
            )
        for agent, total in zip(agents, totals, strict=True):
            assert acked[agent] <= total <= acked[agent] + doubtful[agent], agent
        kinds = {kind for kind, _ in outcomes}
        assert "hung" not in kinds
        assert kinds <= {"ok", "AgentUnavailable", "TimeoutError"}
        assert max(took for _, took in outcomes) <= timeout + 8  # stop_grace + 1 past it
        assert sum(kind == "ok" for kind, _ in outcomes) > 100
        for _ in range(300):  # a later test must not be placed on the dead node
            if not any(n["NodeID"] == node.node_id and n["Alive"] for n in ray.nodes()):
                break
            await asyncio.sleep(0.2)
    finally:
        cleanup = RedisStore(REDIS, prefix=prefix)
        for key in await cleanup.keys(""):
            await cleanup.delete(key)
        await cleanup.close()


builtins_timeout = asyncio.TimeoutError


async def _until(rt: RayRuntime, check: Any) -> list[dict[str, Any]]:
    """The placement once `check` holds of it (90 s at most: the keeper follows nodes)."""
    for _ in range(450):
        placed = await rt.placement()
        if check(placed):
            return placed
        await asyncio.sleep(0.2)
    raise AssertionError(f"the pool did not follow the nodes: {await rt.placement()}")


async def _host(rt: RayRuntime, name: str) -> dict[str, Any]:
    [found] = [p for p in await rt.placement() if p["host"] == name]
    return found


@needs_redis
async def test_a_failed_hand_over_keeps_the_old_membership_until_the_agent_is_saved(
    cluster: Any,
) -> None:
    """A node joins while agents that would move to it cannot be saved: the keeper does
    not commit the new membership (their old host keeps them, one activation each, with
    their state); once they can be saved, it does, and they move with their state."""
    prefix = f"cantata-test-pool-{uuid.uuid4().hex[:8]}:"
    store = lambda: RedisStore(REDIS, prefix=prefix)  # noqa: E731
    agents = [AgentId("unsavable", f"u{i}") for i in range(60)]
    try:
        async with RayRuntime(
            name=_name(), hosts_per_node=1, store=store, default_timeout=30
        ) as rt:
            await rt.register_factory("unsavable", ra.Unsavable)
            assert await _gather_bounded([rt.send_message(ra.Add(100), a) for a in agents], 16)
            version = rt._router.membership.version  # type: ignore[union-attr]
            before = await rt.placement()
            node = cluster.add_node(num_cpus=1, object_store_memory=80 * 1024 * 1024)
            try:
                cluster.wait_for_nodes()
                await asyncio.sleep(6)  # the keeper's watcher tries (every second) and fails
                assert rt._router.membership.version == version  # type: ignore[union-attr]
                assert len(await rt.placement()) == len(before)
                # each is still its one activation, with its state: 100 + 1
                got = await _gather_bounded([rt.send_message(ra.Add(1), a) for a in agents], 16)
                assert got == [101] * len(agents)
                # savable again (total below 100): the next try commits and they move
                got = await _gather_bounded([rt.send_message(ra.Add(-100), a) for a in agents], 16)
                assert got == [1] * len(agents)
                grown = await _until(rt, lambda placed: len(placed) == len(before) + 1)
                [fresh] = [p for p in grown if p["node"] == node.node_id]
                got = await _gather_bounded([rt.send_message(ra.Add(1), a) for a in agents], 16)
                assert got == [2] * len(agents)  # moved with their state, none twice
                assert (await _host(rt, fresh["host"]))["agents"] > 0
            finally:
                cluster.remove_node(node, allow_graceful=False)
                # until the keeper has taken the node out (not just its host gone quiet),
                # so the next test's pool is not placed on it
                for _ in range(450):
                    hosts = rt._router.membership.hosts  # type: ignore[union-attr]
                    if node.node_id not in {node_of(h) for h in hosts}:
                        break
                    await asyncio.sleep(0.2)
                else:
                    raise AssertionError(f"node {node.node_id} stayed in the membership")
    finally:
        cleanup = RedisStore(REDIS, prefix=prefix)
        for key in await cleanup.keys(""):
            await cleanup.delete(key)
        await cleanup.close()


async def test_a_publication_reaches_subscribers_on_both_nodes_once_per_host(
    cluster: Any,
) -> None:
    types = [f"c{i}" for i in range(8)]
    async with RayRuntime(name=_name(), hosts_per_node=2, default_timeout=60) as rt:
        for agent_type in types:
            await rt.register_factory(agent_type, ra.Counter)  # each subscribes to "news"
        membership = rt._router.membership  # type: ignore[union-attr]
        assert membership is not None
        nodes = {p["host"]: p["node"] for p in await rt.placement()}
        key = next(
            k
            for k in (f"s{i}" for i in range(200))
            if len({nodes[membership.owner(f"{t}/{k}")] for t in types}) == 2
        )
        receivers = [AgentId(t, key) for t in types]
        hosts = {membership.owner(str(a)) for a in receivers}
        await _gather_bounded([rt.send_message(ra.Add(0), a) for a in receivers], 8)
        before = {p["host"]: p["paths"] for p in await rt.placement()}
        await rt.publish_message(ra.Note("to all"), TopicId("news", key))
        await rt.wait_until_idle(timeout=60)
        after = {p["host"]: p["paths"] for p in await rt.placement()}
        for host in before:
            taken = sum(after[host].values()) - sum(before[host].values())
            assert taken == (1 if host in hosts else 0), host  # one message per host
        for agent in receivers:
            seen = await rt.send_message(ra.Get(), agent)
            assert seen.notes == ["to all", "total=0"]


async def test_hosts_run_the_sources_this_test_imports(cluster: Any) -> None:
    import cantata

    @ray.remote(num_cpus=0)
    def where_cantata() -> str:
        import cantata as there

        return str(there.__file__)

    assert await where_cantata.remote() == cantata.__file__  # PYTHONPATH reaches the cluster


def test_concurrent_writers_of_the_config_record_lose_no_change(cluster: Any) -> None:
    """Two writers (threads, each a read-modify-write of the record) at once: every
    change is in the last version, and a reader sees it."""
    import threading

    from cantata.runtime.ray.membership import Records

    records = Records(_name(), "cantata-tests")
    per_writer = 40
    errors: list[BaseException] = []

    def writer(tag: str) -> None:
        for i in range(per_writer):

            def change(config: dict[str, Any], key: str = f"{tag}{i}") -> None:
                config["subscriptions"][key] = {"by": tag}

            try:
                records.update_config(change)
            except BaseException as exc:  # reported below, not lost in the thread
                errors.append(exc)

    threads = [threading.Thread(target=writer, args=(tag,)) for tag in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors
    assert not any(thread.is_alive() for thread in threads)
    subscriptions = records.config()["subscriptions"]
    assert sorted(subscriptions) == sorted(f"{t}{i}" for t in "ab" for i in range(per_writer))
    records.clear()
    assert records.config() == {"factories": {}, "subscriptions": {}}


async def test_two_runtimes_on_one_pool_subscribing_at_once_keep_every_subscription(
    cluster: Any,
) -> None:
    """A second runtime joins the pool; both add subscriptions at the same time; a host
    started later (it reads the record) and the record itself hold them all."""
    from cantata.runtime import TypeSubscription
    from cantata.runtime.ray.membership import Records

    name = _name()
    async with (
        RayRuntime(name=name, hosts_per_node=1, default_timeout=60) as first,
        RayRuntime(name=name, hosts_per_node=1, default_timeout=60) as second,
    ):

        async def subscribe(rt: RayRuntime, tag: str) -> None:
            for i in range(15):
                await rt.add_subscription(
                    TypeSubscription(f"t-{tag}{i}", "counter", id=f"{tag}{i}")
                )

        await asyncio.wait_for(asyncio.gather(subscribe(first, "a"), subscribe(second, "b")), 120)
        stored = Records(name, "cantata").config()["subscriptions"]
        assert sorted(stored) == sorted(f"{t}{i}" for t in "ab" for i in range(15))
