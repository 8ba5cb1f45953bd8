"""`RayRuntime`: the `AgentRuntime` contract on a Ray cluster, agents as virtual actors.

Agents are not Ray actors (a Ray actor is an OS process). The runtime keeps a fixed pool
of host actors per node (`hosts_per_node`, by default one per CPU Ray gives the node),
each running one local engine for the many agents placed on it (see host.py). An agent's
host is rendezvous hashing of its id over the pool's membership (see membership.py),
computed by every router, so a request goes from the caller straight to the host over a
direct stream (see router.py, direct.py); an agent activates there on its first message
(from the store when there is one) and leaves memory when idle (`evict_after`) or when
its work is over (`release_agents`: a run's actors, once the call that drove it returns).

Membership is a versioned record in the cluster's key-value store, not an actor: routers
read it at start and again only when a host refuses a message as no longer its own or is
lost, so nothing central sits on a request or a publication. The runtime that creates the
pool (the keeper) watches the cluster's nodes (`ray.nodes()`, every `_WATCH` seconds);
when one joins or leaves it makes the next version in two steps: `prepare` on every host
(a host stops taking the agents the new version puts elsewhere, and hands each live one
over: saved to the store, out of memory), then the record is written and `commit`
sent to every host. Between the two, a message for a moving agent is refused by both its
old and its new host and retried by its router within its timeout: one activation per
agent at a time. A host that cannot hand an agent over (saving it failed) says so and is
asked once more; if it still cannot, the keeper does not commit: every host forgets the
prepared version, the agent stays where it was (one activation, its state in memory),
and the watcher tries again a second later. Hosts are restarted by Ray when their
process dies (kill -9): the requests they held fail with `AgentUnavailable`, and their
agents activate again on their next message, from the store when there is one.

What crosses processes is JSON through the core type registry, in a versioned envelope
(see `wire.py`): a message type must be registered (`@register`) and importable on every
node. Factories are shipped to hosts by Ray's pickling (code, not messages), kept with the
subscriptions in the pool's config record so a restarted or new host has them.

Failure semantics:

- every request is bounded: `timeout`, else `default_timeout` (`math.inf` opts out; a
  dead host still ends the wait);
- a request whose host dies (or whose stream breaks) while it holds the message raises
  `AgentUnavailable` (at most once: the handler may have run); the next message
  activates the agent where the membership puts it, from its last state in the store;
- an event whose host dies is delivered again, with the same message id (at least once);
  the agent sees `ctx.is_redelivery` for an id in the handled window it restored;
- a message to an agent that moved is sent on to its new host (nothing ran).

Local subscribers (`add_local_subscriber`) run in this process, fed by a directory actor
that serves them only (see local_subscribers.py). The pool's hosts and the keeper's
membership changes are in pool.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import time
from collections.abc import Callable, Iterable, Mapping
from types import TracebackType
from typing import Any

from ray.exceptions import RayActorError

import ray

from ...core import (
    CancellationToken,
    CancelledError,
    ConfigurationError,
    RuntimeStateError,
    TimeoutError,
    new_id,
    to_json,
)
from ...stores import StateStore
from ..agent import BaseAgent
from ..context import _current
from ..events import DeliveryFailed
from ..ids import _TYPE_RE, AgentId, TopicId, _check_type
from ..interventions import InterventionHandler
from ..lifecycle import DEFAULT_TIMEOUT
from ..protocol import (
    LOCAL_TYPE,
    AgentFactory,
    LocalCallback,
    LocalSubscriber,
    LocalTopicSubscription,
)
from ..state import SCHEMA_VERSION, decode_runtime, encode_agent
from ..subscriptions import Subscription, default_subscriptions
from . import wire
from ._tls import ray_client_context
from .host import DEFAULT_STREAM_LIMIT
from .local_subscribers import LocalSubscribers
from .membership import Membership, node_of
from .pool import HostPool
from .router import Router
from .waits import await_ref

__all__ = ["RayRuntime"]

_POLL = 0.01  # seconds between looks at the cluster while waiting for idle
_log = logging.getLogger("cantata.runtime.ray")


class RayRuntime:
    """Runs agents on a pool of host actors on a Ray cluster; the contract of `LocalRuntime`.

    `address` is the cluster to join (``"auto"``, ``"ray://host:10001"``, or None for
    the one `ray.init` already joined, else the one ``RAY_ADDRESS`` names, else a new
    local one of this program alone, on 127.0.0.1); `init_options` go to
    `ray.init` when this runtime starts Ray itself (and it then shuts Ray down on close).
    `name` scopes the agents: runtimes of one name on one cluster share them (the first
    one started creates the pool and keeps its membership). `hosts_per_node` is the number
    of host processes per node (default: the node's CPUs as Ray counts them); each holds
    any number of agents. `store` is a callable making the `StateStore` each host saves
    its agents into (PostgreSQL or Redis for a cluster; called in each host's process).
    `evict_after` takes agents idle that long out of memory, saved to the store.
    `reorder_wait` bounds the wait for a message missing from a router's sequence.
    `actor_options` go to each host's actor (hosts go on the nodes that have the custom
    `resources` they ask for, and on every node when they ask none). `direct` (on by
    default) carries messages over a stream from each process to each host rather than
    as Ray calls (the same semantics, fewer hops): see direct.py; `stream_limit` bounds
    the requests in flight on one stream (a host stops reading a stream past it:
    backpressure). Under Ray's TLS (``RAY_USE_TLS``) the streams are mutual TLS with
    Ray's certificate files.
    Interventions and `on_error` run in the process that sends (or handles) the message.
    `placement()` reports the pool: its hosts, where they run and how many agents each holds.
    """

    def __init__(
        self,
        *,
        address: str | None = None,
        name: str = "cantata",
        namespace: str = "cantata",
        store: Callable[[], StateStore] | None = None,
        evict_after: float | None = None,
        default_timeout: float | None = DEFAULT_TIMEOUT,
        stop_grace: float = 5.0,
        dedup_window: int = 128,
        reorder_wait: float = 1.0,
        interventions: list[InterventionHandler] | None = None,
        on_error: Callable[[DeliveryFailed], object] | None = None,
        init_options: Mapping[str, Any] | None = None,
        actor_options: Mapping[str, Any] | None = None,
        state_prefix: str = "cantata.runtime.agent:",
        direct: bool = True,
        hosts_per_node: int | None = None,
        stream_limit: int = DEFAULT_STREAM_LIMIT,
    ) -> None:
        if evict_after is not None and store is None:
            raise ConfigurationError(
                "evict_after needs a store to save evicted agents into: pass store=a callable "
                "that makes a PostgresStore or RedisStore"
            )
        if store is not None and (isinstance(store, StateStore) or not callable(store)):
            raise ConfigurationError(
                "RayRuntime(store=...) takes a callable that makes the store (each host "
                "makes its own connection), e.g. store=lambda: RedisStore(url)"
            )
        if default_timeout is not None and not default_timeout > 0:
            raise ConfigurationError(f"default_timeout must be positive, not {default_timeout}")
        if hosts_per_node is not None and (
            not isinstance(hosts_per_node, int) or hosts_per_node < 1
        ):
            raise ConfigurationError(f"hosts_per_node must be 1 or more, not {hosts_per_node!r}")
        if not isinstance(stream_limit, int) or stream_limit < 1:
            raise ConfigurationError(f"stream_limit must be 1 or more, not {stream_limit!r}")
        _check_type(name, _TYPE_RE, "runtime name", "cantata")
        self._address = address
        self._name = name
        self._namespace = namespace
        self._make_store = store
        self._init_options = dict(init_options or {})
        self._actor_options = dict(actor_options or {})
        self._interventions = list(interventions or ())
        self._stop_grace = stop_grace
        self._default_timeout = None if default_timeout == math.inf else default_timeout
        self._config: dict[str, Any] = {
            "namespace": namespace,
            "store": store,
            "evict_after": evict_after,
            "default_timeout": self._default_timeout,
            "stop_grace": stop_grace,
            "dedup_window": dedup_window,
            "reorder_wait": reorder_wait,
            "interventions": self._interventions,
            "on_error": on_error,
            "state_prefix": state_prefix,
            "direct": bool(direct),
            "stream_limit": stream_limit,
        }
        self._prefix = state_prefix
        self._factories: dict[str, AgentFactory] = {}
        self._subs: dict[str, Subscription] = {}
        self._state = "new"
        self._owns_ray = False
        self._router: Router | None = None
        self._origin = new_id()
        self._locals = LocalSubscribers(name, namespace, self._config, self._origin)
        self._pool = HostPool(
            name,
            namespace,
            self._config,
            hosts_per_node=hosts_per_node,
            actor_options=self._actor_options,
            call_bound=stop_grace + 60.0,
        )
        self._keeper = False

    # -- registration -----------------------------------------------------------------

    async def register_factory(
        self,
        agent_type: str,
        factory: AgentFactory,
        *,
        agent_class: type[BaseAgent] | None = None,
    ) -> None:
        """Create agents of `agent_type` with `factory()` (in their host) on first use.

        The factory is shipped to the hosts (by Ray's pickling: it is code, not a
        message); the class's default subscriptions are added for this type.
        """
        _check_type(agent_type, _TYPE_RE, "agent type", "checker")
        if agent_type in self._factories:
            raise ConfigurationError(
                f"agent type {agent_type!r} is already registered; pick another type name"
            )
        if not callable(factory):
            raise ConfigurationError(f"the factory for agent type {agent_type!r} is not callable")
        cls = agent_class or (factory if isinstance(factory, type) else None)
        if cls is not None and not (isinstance(cls, type) and issubclass(cls, BaseAgent)):
            raise ConfigurationError(
                f"agent_class {cls!r} of agent type {agent_type!r} is not a BaseAgent subclass"
            )
        self._factories[agent_type] = factory
        if self._router is not None:
            await self._push_factory(self._router, agent_type, factory)
        if cls is not None:
            for sub in default_subscriptions(cls, agent_type):
                if sub.id not in self._subs:
                    await self.add_subscription(sub)

    async def _push_factory(self, router: Router, agent_type: str, factory: AgentFactory) -> None:
        def write(config: dict[str, Any]) -> None:
            config["factories"][agent_type] = factory

        await router._replicate(write, "register", agent_type, factory)

    async def add_subscription(self, subscription: Subscription) -> None:
        """Route topics matching `subscription` to its agents, cluster-wide."""
        if not isinstance(subscription, Subscription):
            raise ConfigurationError(f"{subscription!r} does not implement Subscription")
        if subscription.id in self._subs:
            raise ConfigurationError(
                f"a subscription with id {subscription.id!r} already exists; remove it first"
            )
        if self._router is not None:
            await self._router.add_subscription(subscription)
        self._subs[subscription.id] = subscription

    async def remove_subscription(self, subscription_id: str) -> None:
        """Remove the subscription with this id; unknown ids raise `ConfigurationError`."""
        if subscription_id not in self._subs:
            raise ConfigurationError(
                f"no subscription with id {subscription_id!r}; known: {sorted(self._subs)}"
            )
        if self._router is not None:
            await self._router.remove_subscription(subscription_id)
        del self._subs[subscription_id]

    async def add_local_subscriber(
        self, topic_id: TopicId, callback: LocalCallback
    ) -> LocalSubscriber:
        """Call `callback` here, in this process, for each event on `topic_id` published
        anywhere on the cluster, and for each direct request to the subscriber's `agent_id`
        (its return value answers). One at a time, in the order the directory took them."""
        if not isinstance(topic_id, TopicId):
            raise ConfigurationError(
                f"topic {topic_id!r} is not a TopicId: use TopicId(type, source)"
            )
        if not callable(callback):
            raise ConfigurationError(f"the local subscriber of {topic_id} is not callable")
        router = self._running(f"add a local subscriber of {topic_id}")
        key = await self._locals.open(router, callback)
        subscription = LocalTopicSubscription(topic_id[0], topic_id[1], key)
        await self.add_subscription(subscription)
        return LocalSubscriber(subscription.id, AgentId(LOCAL_TYPE, key), topic_id)

    async def remove_local_subscriber(self, subscriber: LocalSubscriber) -> None:
        """Stop calling the subscriber's callback; requests to it are refused from now on."""
        if subscriber.id in self._subs:
            await self.remove_subscription(subscriber.id)
        await self._locals.close(subscriber.agent_id.key)

    # -- messages ---------------------------------------------------------------------

    async def send_message(
        self,
        message: Any,
        recipient: AgentId,
        *,
        sender: AgentId | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 (the fixed API; wraps a timer)
        cancellation_token: CancellationToken | None = None,
        message_id: str | None = None,
    ) -> Any:
        """Deliver a direct request to `recipient`'s actor and return its handler's result.

        Raises as `LocalRuntime` does, and `AgentUnavailable` when the actor dies with the
        message (see the module docstring).
        """
        router = self._running(f"send a {type(message).__name__} to {recipient}")
        if not isinstance(recipient, AgentId):
            raise ConfigurationError(
                f"recipient {recipient!r} is not an AgentId: use AgentId(type, key)"
            )
        if cancellation_token is not None and cancellation_token.is_cancelled:
            raise CancelledError(
                f"{type(message).__name__} to {recipient} was not sent: its "
                "CancellationToken is already cancelled"
            )
        parent = _current.get()
        return await router.request(
            message,
            recipient,
            sender=sender,
            parent=parent,
            timeout=self._default_timeout if timeout is None else timeout,
            token=cancellation_token,
            message_id=message_id,
        )

    async def publish_message(
        self,
        message: Any,
        topic_id: TopicId,
        *,
        sender: AgentId | None = None,
        message_id: str | None = None,
    ) -> None:
        """Deliver an event to every subscriber of `topic_id` but the sender; returns once
        the directory has taken it (handlers run later, in their actors)."""
        if not isinstance(topic_id, TopicId):
            raise ConfigurationError(
                f"topic {topic_id!r} is not a TopicId: use TopicId(type, source)"
            )
        router = self._running(f"publish a {type(message).__name__} on {topic_id}")
        await router.publish(
            message, topic_id, sender=sender, parent=_current.get(), message_id=message_id
        )

    def _running(self, what: str) -> Router:
        if self._state != "running" or self._router is None:
            hint = {
                "new": "call `await runtime.start()` (or use `async with runtime:`) first",
                "stopped": "the runtime is stopped; call start() again",
                "closed": "the runtime is closed; create a new RayRuntime",
            }.get(self._state, "")
            raise RuntimeStateError(f"cannot {what}: {hint}")
        return self._router

    # -- lifecycle --------------------------------------------------------------------

    async def start(self) -> None:
        """Join (or start) Ray; create the pool of hosts (or join the one of this name)."""
        if self._state == "closed":
            raise RuntimeStateError("this RayRuntime is closed; create a new one")
        if self._state == "running":
            raise RuntimeStateError("the runtime is already running; stop() it first")
        if self._config["direct"]:
            # Ray's TLS on with files that are missing or unreadable: a ConfigurationError
            # now, not after Ray has retried its own connections for minutes.
            ray_client_context()
        if not ray.is_initialized():
            options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": True}
            address = self._address
            if address is None and not os.environ.get("RAY_ADDRESS"):
                # A Ray of this program alone: new (Ray itself would join whatever cluster
                # was started last on this machine) and on loopback, not on the network.
                address = "local"
                options["_node_ip_address"] = "127.0.0.1"
            options.update(self._init_options)
            ray.init(address=address, namespace=self._namespace, **options)
            self._owns_ray = True
        if self._router is None:
            await self._join()
        self._state = "running"

    async def _join(self) -> None:
        directory = self._locals.new_directory()
        router = Router(
            pool=self._name,
            namespace=self._namespace,
            interventions=self._interventions,
            stop_grace=self._stop_grace,
            event_bound=self._event_bound(),
            origin=self._origin,
            direct=bool(self._config["direct"]),
            directory=directory,
        )
        pool = self._pool
        records = pool.records
        self._keeper = await asyncio.to_thread(records.claim, self._origin) == self._origin
        if not self._keeper and not await asyncio.to_thread(pool.alive):
            # a pool whose keeper ended without closing it (its hosts ended with it)
            _log.warning("RayRuntime %r: the pool's keeper is gone; starting it anew", self._name)
            await asyncio.to_thread(records.clear)
            self._keeper = await asyncio.to_thread(records.claim, self._origin) == self._origin
        if self._keeper:
            config = {
                "factories": dict(self._factories),
                "subscriptions": {s.id: to_json(s) for s in self._subs.values()},
            }
            await asyncio.to_thread(records.write_config, config)
            hosts = await pool.make_hosts(await asyncio.to_thread(pool.nodes))
            membership = Membership(1, tuple(hosts))
            await asyncio.to_thread(records.write_membership, membership)
            router.adopt(membership)
            await router.broadcast("commit", membership.to_bytes())
            pool.watch(lambda: self._router)
        else:
            await router.current()
            for agent_type, factory in self._factories.items():
                await self._push_factory(router, agent_type, factory)
        for sub in self._subs.values():
            if router.has_subscription(sub.id):
                continue
            if self._keeper:
                router.subscribe(sub)
            else:
                await router.add_subscription(sub)
        if not self._keeper:
            stored = await asyncio.to_thread(records.config)
            for data in stored["subscriptions"].values():
                from .host import _subscription

                found = _subscription(data)
                if not router.has_subscription(found.id):
                    router.subscribe(found)
        self._router = router
        membership = await router.current()
        per_node: dict[str, int] = {}
        for host in membership.hosts:
            per_node[node_of(host)] = per_node.get(node_of(host), 0) + 1
        _log.info(
            "RayRuntime %r: %s pool of %d hosts on %d nodes (%s), membership version %d",
            self._name,
            "created the" if self._keeper else "joined the",
            len(membership.hosts),
            len(per_node),
            ", ".join(f"{node[:8]}: {n}" for node, n in sorted(per_node.items())),
            membership.version,
        )

    def _event_bound(self) -> float | None:
        timeout = self._default_timeout
        return None if timeout is None else float(timeout) + self._stop_grace + 5.0

    async def rebalance(self, nodes: dict[str, int] | None = None) -> Membership:
        """Make the pool follow the cluster's live nodes now (the keeper does it on its own
        every second); the new membership. Only the runtime that created the pool may."""
        router = self._running("rebalance the pool")
        if not self._keeper:
            raise RuntimeStateError(
                f"only the RayRuntime that created pool {self._name!r} changes its membership"
            )
        return await self._pool.rebalance(router, nodes)

    async def stop(self) -> None:
        """Stop taking messages here (the hosts keep their agents)."""
        if self._state == "running":
            self._state = "stopped"

    async def wait_until_idle(self, *, timeout: float | None = None) -> None:  # noqa: ASYNC109
        """Wait until no request from here is in flight and no message is being handled
        on the pool (polled); `TimeoutError` past `timeout` (default: `default_timeout`)."""
        await self._wait_for(lambda: False, timeout, "the runtime to be idle")

    async def stop_when_idle(self, *, timeout: float | None = None) -> None:  # noqa: ASYNC109
        """Wait until idle, then stop."""
        await self.wait_until_idle(timeout=timeout)
        await self.stop()

    async def stop_when(
        self,
        predicate: Callable[[], bool],
        *,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> None:
        """Stop once `predicate()` is true or the runtime is idle; bounded like
        `wait_until_idle`."""
        await self._wait_for(predicate, timeout, "the stop condition")
        await self.stop()

    async def _wait_for(
        self, predicate: Callable[[], bool], bound_s: float | None, what: str
    ) -> None:
        bound = self._default_timeout if bound_s is None else bound_s
        deadline = None if bound is None or math.isinf(bound) else time.monotonic() + bound
        while True:
            if predicate() or await self._idle():
                return
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"waited {bound}s for {what} on RayRuntime {self._name!r}")
            await asyncio.sleep(_POLL)

    async def _idle(self) -> bool:
        router = self._router
        if router is None:
            return True
        if router.pending:
            return False
        counts = await router.broadcast("pending")
        return all(isinstance(c, int) and c == 0 for c in counts)

    async def close(self) -> None:
        """Stop; the runtime that created the pool also closes every host (saving each
        agent to the store, when there is one) and ends them; shut Ray down if this
        runtime started it."""
        if self._state == "closed":
            return
        self._state = "closed"
        self._locals.stop()
        self._pool.stop_watching()
        router = self._router
        try:
            if router is not None and self._keeper:
                grace = self._stop_grace + 60.0
                await asyncio.wait_for(router.broadcast("shutdown"), grace)
                directory = self._locals.directory
                if directory is not None:
                    with contextlib.suppress(RayActorError):  # it ended with its node
                        await asyncio.wait_for(await_ref(directory.shutdown.remote()), grace)
                    ray.kill(directory, no_restart=True)
                self._pool.end(router.membership)
        finally:
            if router is not None:
                router.close()
            self._locals.directory = None
            self._router = None
            if self._owns_ray:
                ray.shutdown()

    async def __aenter__(self) -> RayRuntime:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- state, eviction, placement ---------------------------------------------------------

    async def live_agents(self) -> list[AgentId]:
        """Ids of the agents in their hosts' memory (not the evicted ones)."""
        router = self._running("list agents")
        found: list[AgentId] = []
        for names in await router.broadcast("live_agents"):
            if isinstance(names, list):
                found.extend(AgentId.parse(n) for n in names)
        return found

    async def placement(self) -> list[dict[str, Any]]:
        """The pool as it stands: one entry per host with its name, node id, process id,
        number of agents in memory, membership version and messages taken by path."""
        router = self._running("report the placement")
        return [s for s in await router.broadcast("stats") if isinstance(s, dict)]

    async def save_state(
        self, store: StateStore | None = None, *, key: str = "cantata.runtime.state"
    ) -> dict[str, Any]:
        """Agents' and subscriptions' state as JSON data (the same shape `LocalRuntime`
        writes); also written to `store[key]`. Agents evicted to the store are included."""
        router = self._running("save state")
        agents: dict[str, Any] = {}
        for records in await router.broadcast("save"):
            if isinstance(records, BaseException):
                raise records
            agents.update(records)
        if self._make_store is not None:
            own = self._make_store()
            for found in await own.keys(self._prefix):
                name = found[len(self._prefix) :]
                if name not in agents:
                    record = await own.get(found)
                    if record is not None:
                        agents[name] = record
            await _close(own)
        data: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "agents": agents,
            "subscriptions": [to_json(s) for s in self._subs.values()],
        }
        if store is not None:
            await store.put(key, data)
        return data

    async def load_state(
        self, source: StateStore | Mapping[str, Any], *, key: str = "cantata.runtime.state"
    ) -> None:
        """Restore what `save_state` wrote; everything is checked before anything changes."""
        router = self._running("load state")
        data: Any = source
        if isinstance(source, StateStore):
            data = await source.get(key)
            if data is None:
                raise RuntimeStateError(
                    f"no runtime state at key {key!r} in the store; write it with "
                    "runtime.save_state(store)"
                )
        subs, agents = decode_runtime(data)
        for agent_id, _, _ in agents:
            if agent_id.type not in self._factories:
                raise ConfigurationError(
                    f"no agent type {agent_id.type!r} is registered (state of {agent_id}); "
                    f"register it with runtime.register_factory({agent_id.type!r}, ...)"
                )
        for sub in subs:
            if sub.id not in self._subs:
                await self.add_subscription(sub)
        for agent_id, state, handled in agents:
            record = encode_agent(state, dict.fromkeys(handled))
            name = str(agent_id)
            for _ in range(3):
                host = (await router.current()).owner(name)
                reply = await self._pool.call(host, "load", name, record)
                if "err" in reply and "is not on host" in str(reply["err"].get("text")):
                    await router.refresh()
                    continue
                break
            wire.result(reply, f"load_state of {agent_id}")

    async def evict_idle(self, older_than: float = 0.0) -> int:
        """Save and take out of memory the agents idle for `older_than` seconds; how many."""
        if self._make_store is None:
            raise ConfigurationError("eviction needs a store: RayRuntime(store=...)")
        router = self._running("evict agents")
        counts = await router.broadcast("evict", older_than)
        return sum(c for c in counts if isinstance(c, int))

    async def release_agents(self, agent_ids: Iterable[AgentId]) -> int:
        """Take these agents out of their hosts' memory for good (their work is over, as
        a finished run's actors'): nothing is saved, their store records are deleted, and
        a later message activates one afresh; a busy one leaves once idle. One call per
        host holding some, at once; how many left memory at once."""
        ids = list(agent_ids)
        for agent_id in ids:
            if not isinstance(agent_id, AgentId):
                raise ConfigurationError(
                    f"{agent_id!r} is not an AgentId: release_agents takes AgentId(type, key)s"
                )
        if not ids:
            return 0
        return await self._running("release agents").release(ids)

    async def where(self, agent_id: AgentId) -> tuple[str, int]:
        """The Ray node id and process id of the host `agent_id` lives on."""
        router = self._running("locate an agent")
        host = (await router.current()).owner(str(agent_id))
        node, pid = await self._pool.call(host, "where")
        return str(node), int(pid)

    @property
    def state(self) -> str:
        """Lifecycle state: new, running, stopped or closed."""
        return self._state


async def _close(store: StateStore) -> None:
    closer = getattr(store, "close", None)
    if closer is not None:
        result = closer()
        if asyncio.iscoroutine(result):
            await result
