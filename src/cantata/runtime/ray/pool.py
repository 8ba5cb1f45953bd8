"""The keeper's side of a `RayRuntime`: the pool of host actors and its membership.

The first runtime of a name on a cluster creates the pool and keeps it (the keeper): it
starts the hosts of each node, watches the cluster's nodes, and makes each next
membership in two steps (`prepare` on every host, then the record and `commit`; see
runtime.py's module docstring). Every other runtime only reads the membership record.
Kept apart from runtime.py because none of it is on a message's path.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

import ray

from ...core import RuntimeStateError
from .errors import AgentUnavailable
from .host import host_class
from .membership import Membership, Records, node_of
from .router import Router
from .waits import await_ref

__all__ = ["HostPool", "alive_nodes"]

_WATCH = 1.0  # seconds between the keeper's looks at the cluster's nodes
_READY_WAIT = 120.0  # seconds at most for a new host to start
_log = logging.getLogger("cantata.runtime.ray")


class HostPool:
    """The host actors of pool `name`, and (for the keeper) the membership's changes."""

    def __init__(
        self,
        name: str,
        namespace: str,
        config: dict[str, Any],
        *,
        hosts_per_node: int | None,
        actor_options: Mapping[str, Any],
        call_bound: float,
    ) -> None:
        self._name, self._namespace, self._config = name, namespace, config
        self._hosts_per_node = hosts_per_node
        self._actor_options = dict(actor_options)
        self._call_bound = call_bound
        self.records = Records(name, namespace)
        self._hosts: dict[str, Any] = {}  # host handles, by name
        self._lock = asyncio.Lock()
        self._watcher: asyncio.Task[None] | None = None

    def nodes(self) -> dict[str, int]:
        """The cluster's live nodes that can run this pool's hosts (blocking)."""
        return alive_nodes(self._actor_options.get("resources"))

    def alive(self) -> bool:
        """Whether the recorded pool's first host still exists (blocking): a pool whose
        keeper ended without closing it has none."""
        membership = self.records.membership()
        if membership is None or not membership.hosts:
            return membership is not None
        try:
            ray.get_actor(membership.hosts[0], namespace=self._namespace)
        except ValueError:
            return False
        return True

    async def make_hosts(self, nodes: dict[str, int]) -> list[str]:
        """Start the hosts of `nodes` (node id -> CPUs) and wait until each listens."""
        names: list[str] = []
        for node, cpus in sorted(nodes.items()):
            count = self._hosts_per_node or max(1, cpus)
            for i in range(count):
                name = f"{self._name}/host/{node}/{i}"
                options: dict[str, Any] = {
                    "name": name,
                    "namespace": self._namespace,
                    "get_if_exists": True,
                    "num_cpus": 0,
                    "max_restarts": -1,
                    "max_task_retries": 0,
                    "max_concurrency": 100_000,
                    "scheduling_strategy": NodeAffinitySchedulingStrategy(node, soft=False),
                    **self._actor_options,
                }
                self._hosts[name] = (
                    host_class().options(**options).remote(self._name, name, self._config)
                )
                names.append(name)
        ready = [
            asyncio.wrap_future(self._hosts[n].direct_address.remote().future()) for n in names
        ]
        results = await asyncio.wait_for(
            asyncio.gather(*ready, return_exceptions=True), _READY_WAIT
        )
        for name, result in zip(names, results, strict=True):
            if isinstance(result, BaseException):
                raise AgentUnavailable(f"host {name} did not start: {result}") from result
        return names

    def watch(self, router: Callable[[], Router | None]) -> None:
        """Follow the cluster's nodes from now on: a node joined or left -> `rebalance`."""
        self._watcher = asyncio.get_running_loop().create_task(self._watch(router))

    async def _watch(self, current: Callable[[], Router | None]) -> None:
        while True:
            await asyncio.sleep(_WATCH)
            try:
                nodes = await asyncio.to_thread(self.nodes)
                router = current()
                if router is None or router.membership is None:
                    continue
                held = {node_of(h) for h in router.membership.hosts}
                if set(nodes) != held:
                    await self.rebalance(router, nodes)
            except asyncio.CancelledError:
                raise
            except Exception:
                _log.exception("RayRuntime %r: following the cluster's nodes failed", self._name)

    async def rebalance(self, router: Router, nodes: dict[str, int] | None = None) -> Membership:
        """The next membership for the cluster's live nodes (`nodes`, else read now)."""
        async with self._lock:
            if nodes is None:
                nodes = await asyncio.to_thread(self.nodes)
            old = await router.current()
            kept = [h for h in old.hosts if node_of(h) in nodes]
            held = {node_of(h) for h in kept}
            added = await self.make_hosts({n: c for n, c in nodes.items() if n not in held})
            gone = [h for h in old.hosts if node_of(h) not in nodes]
            new = Membership(old.version + 1, tuple(sorted([*kept, *added])))
            # 1. every live host hands over what it no longer owns, and refuses it
            data = new.to_bytes()
            answers = await asyncio.gather(
                *(self.call(h, "prepare", data) for h in new.hosts), return_exceptions=True
            )
            failed = _failed_hand_overs(new.hosts, answers)
            if failed:  # once more, for what could not be saved (a store's brief failure)
                again = await asyncio.gather(
                    *(self.call(h, "prepare", data) for h in failed), return_exceptions=True
                )
                answers = [*answers, *again]
                failed = _failed_hand_overs(list(failed), again)
            if failed:
                # An agent still in memory on its old host, unsaved: committing would let
                # its new host activate it too. The old membership stays; the keeper's
                # watcher tries again.
                await asyncio.gather(
                    *(self.call(h, "abort", new.version) for h in new.hosts),
                    return_exceptions=True,
                )
                raise RuntimeStateError(
                    f"pool {self._name!r}: membership {new.version} not taken, since these "
                    f"agents could not be handed over (saving them failed): "
                    f"{sorted(a for agents in failed.values() for a in agents)[:10]}; "
                    f"membership {old.version} stays"
                )
            moved = sum(int(a["moved"]) for a in answers if isinstance(a, dict))
            # 2. the record, then every host takes the new membership
            await asyncio.to_thread(self.records.write_membership, new)
            router.adopt(new)
            await asyncio.gather(
                *(self.call(h, "commit", data) for h in new.hosts), return_exceptions=True
            )
            for host in gone:
                handle = self._hosts.pop(host, None)
                if handle is not None:
                    ray.kill(handle, no_restart=True)
            _log.info(
                "RayRuntime %r: membership %d: %d hosts (+%d, -%d); %d agents handed over",
                self._name,
                new.version,
                len(new.hosts),
                len(added),
                len(gone),
                moved,
            )
            return new

    async def call(self, host: str, method: str, *args: Any) -> Any:
        """A Ray call to one host's actor (control, not messages), bounded."""
        handle = self._hosts.get(host)
        if handle is None:
            handle = await asyncio.to_thread(ray.get_actor, host, namespace=self._namespace)
            self._hosts[host] = handle
        ref = getattr(handle, method).remote(*args)
        return await asyncio.wait_for(await_ref(ref), self._call_bound)

    def end(self, membership: Membership | None) -> None:
        """Kill every host of `membership` (after they were told to shut down) and forget
        the pool's records: the keeper's close."""
        self.stop_watching()
        for host in () if membership is None else membership.hosts:
            handle = self._hosts.pop(host, None)
            if handle is None:
                try:
                    handle = ray.get_actor(host, namespace=self._namespace)
                except ValueError:
                    continue
            ray.kill(handle, no_restart=True)
        self.records.clear()

    def stop_watching(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            self._watcher = None


def _failed_hand_overs(
    hosts: list[str] | tuple[str, ...], answers: list[Any]
) -> dict[str, list[str]]:
    """The agents each host answered it could not hand over."""
    return {
        host: list(answer["failed"])
        for host, answer in zip(hosts, answers, strict=True)
        if isinstance(answer, dict) and answer.get("failed")
    }


def alive_nodes(needs: Mapping[str, float] | None = None) -> dict[str, int]:
    """The cluster's live nodes that can run hosts (those with every custom resource the
    hosts' `actor_options` ask for): node id -> CPUs Ray gives it."""
    wanted = dict(needs or {})
    return {
        str(node["NodeID"]): int(node.get("Resources", {}).get("CPU", 0))
        for node in ray.nodes()  # type: ignore[no-untyped-call]
        if node.get("Alive")
        and all(node.get("Resources", {}).get(k, 0) >= v for k, v in wanted.items())
    }
