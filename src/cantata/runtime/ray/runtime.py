"""`RayRuntime`: the `AgentRuntime` contract on a Ray cluster.

Each agent lives in its own Ray actor (see `host.py`), created on its first message from
the registered factory; a directory actor per runtime name holds the factories and the
subscriptions and fans events out (see `directory.py`). What crosses processes is JSON
through the core type registry, in a versioned envelope (see `wire.py`): a message type
must be registered (`@register`) and importable on every node.

Failure semantics:

- every request is bounded: `timeout`, else `default_timeout` (`math.inf` opts out; a
  dead actor still ends the wait, Ray reports it);
- a request whose actor's worker or node dies while it holds the message raises
  `AgentUnavailable` (at most once: the handler may have run), and so does one sent
  through a handle this process cached before the actor died; the next message creates
  the agent anew, from its last state in the store when there is one;
- an event whose actor dies is delivered again, with the same message id, to the
  re-created actor (at least once); the agent sees `ctx.is_redelivery` for an id in the
  handled window it restored;
- a message to an evicted agent is sent on to its re-created actor (nothing ran).

Local subscribers (`add_local_subscriber`) run in this process: one task takes what the
directory queued for them (a long poll, `_TAKE_WAIT` seconds at most per call) and calls
each callback in turn, answering direct requests through the directory.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
import os
import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any

from ray.exceptions import RayActorError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

import ray

from ...core import (
    CancellationToken,
    CancelledError,
    ConfigurationError,
    RuntimeStateError,
    TimeoutError,
    loads,
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
from .errors import AgentUnavailable
from .host import directory_class
from .router import Router, _wait

__all__ = ["RayRuntime"]

_POLL = 0.01  # seconds between looks at the cluster while waiting for idle
_TAKE_WAIT = 5.0  # seconds the directory holds a local subscribers' poll with nothing new
_log = logging.getLogger("cantata.runtime.ray")


class RayRuntime:
    """Runs agents as Ray actors on a cluster; the same contract as `LocalRuntime`.

    `address` is the cluster to join (``"auto"``, ``"ray://host:10001"``, or None for
    the one `ray.init` already joined, else the one ``RAY_ADDRESS`` names, else a new
    local one of this program alone, on 127.0.0.1); `init_options` go to
    `ray.init` when this runtime starts Ray itself (and it then shuts Ray down on close).
    `name` scopes the agents: runtimes of one name on one cluster share them. `store` is a
    callable making the `StateStore` each actor saves its agent into (PostgreSQL or
    Redis for a cluster; called in each actor's process). `evict_after` ends actors idle
    that long, their agents saved to the store. `reorder_wait` bounds the wait for a
    message missing from a sender's sequence. `actor_options` go to each agent's actor.
    `direct` (on by default) carries requests over a stream from each process to each
    agent's actor rather than as Ray calls (the same semantics, fewer hops; Ray calls where
    no stream can be opened): see direct.py. Under Ray's TLS (``RAY_USE_TLS``) the streams
    are mutual TLS with Ray's certificate files.
    Interventions and `on_error` run in the process that sends (or handles) the message.
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
    ) -> None:
        if evict_after is not None and store is None:
            raise ConfigurationError(
                "evict_after needs a store to save evicted agents into: pass store=a callable "
                "that makes a PostgresStore or RedisStore"
            )
        if store is not None and (isinstance(store, StateStore) or not callable(store)):
            raise ConfigurationError(
                "RayRuntime(store=...) takes a callable that makes the store (each actor "
                "makes its own connection), e.g. store=lambda: RedisStore(url)"
            )
        if default_timeout is not None and not default_timeout > 0:
            raise ConfigurationError(f"default_timeout must be positive, not {default_timeout}")
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
        }
        self._prefix = state_prefix
        self._factories: dict[str, AgentFactory] = {}
        self._subs: dict[str, Subscription] = {}
        self._state = "new"
        self._owns_ray = False
        self._directory: Any = None
        self._router: Router | None = None
        self._origin = new_id()
        self._locals: dict[str, LocalCallback] = {}
        self._poller: asyncio.Task[None] | None = None

    # -- registration -----------------------------------------------------------------

    async def register_factory(
        self,
        agent_type: str,
        factory: AgentFactory,
        *,
        agent_class: type[BaseAgent] | None = None,
    ) -> None:
        """Create agents of `agent_type` with `factory()` (in their actor) on first use.

        The factory is shipped to the actors (by Ray's pickling: it is code, not a
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
        if self._directory is not None:
            await _wait(self._directory.register.remote(agent_type, factory))
        if cls is not None:
            for sub in default_subscriptions(cls, agent_type):
                if sub.id not in self._subs:
                    await self.add_subscription(sub)

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
        self._running(f"add a local subscriber of {topic_id}")
        key = new_id()
        await _wait(self._directory.open_local.remote(self._origin, key))
        self._locals[key] = callback
        subscription = LocalTopicSubscription(topic_id[0], topic_id[1], key)
        await self.add_subscription(subscription)
        if self._poller is None or self._poller.done():
            self._poller = asyncio.get_running_loop().create_task(self._poll())
        return LocalSubscriber(subscription.id, AgentId(LOCAL_TYPE, key), topic_id)

    async def remove_local_subscriber(self, subscriber: LocalSubscriber) -> None:
        """Stop calling the subscriber's callback; requests to it are refused from now on."""
        key = subscriber.agent_id.key
        if subscriber.id in self._subs:
            await self.remove_subscription(subscriber.id)
        if self._locals.pop(key, None) is not None and self._directory is not None:
            await _wait(self._directory.close_local.remote(key))

    async def _poll(self) -> None:
        """Take what waits for this process's local subscribers and call them, in order."""
        directory, router = self._directory, self._router
        while self._directory is directory and router is not None:
            try:
                items = await router.take(_TAKE_WAIT)
            except (RayActorError, AgentUnavailable):
                _log.warning("local subscribers: the directory actor is gone; they stop")
                return
            for item in items:
                await self._call_local(router, item)

    async def _call_local(self, router: Router, item: dict[str, Any]) -> None:
        env = item.get("ask") or item["event"]
        key = AgentId.parse(str(env["recipient"])).key
        callback = self._locals.get(key)
        try:
            if callback is None:
                raise ConfigurationError(f"local subscriber {env['recipient']} was removed")
            result = callback(loads(env["msg"]))
            if inspect.isawaitable(result):
                result = await result
            reply = wire.ok(result)
        except Exception as exc:
            if "ask" not in item:
                _log.exception("local subscriber %s failed on event %s", key, env["id"])
                return
            reply = wire.failed(exc)
        if "ask" in item:
            router.answer(str(env["id"]), reply)

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
        """Join (or start) Ray, find or create this runtime's directory actor, and push
        the factories and subscriptions registered so far."""
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
        if self._directory is None:
            self._directory = (
                directory_class()
                .options(
                    name=f"{self._name}/directory",
                    namespace=self._namespace,
                    get_if_exists=True,
                    max_concurrency=1000,
                    # Where the runtime starts (the head, usually): agents' actors share
                    # its fate, so it belongs on the node least likely to go.
                    scheduling_strategy=NodeAffinitySchedulingStrategy(
                        ray.get_runtime_context().get_node_id(), soft=True
                    ),
                )
                .remote(self._name, self._config, self._host_options())
            )
            for agent_type, factory in self._factories.items():
                await _wait(self._directory.register.remote(agent_type, factory))
            self._router = Router(
                self._directory,
                interventions=self._interventions,
                stop_grace=self._stop_grace,
                origin=self._origin,
                direct=bool(self._config["direct"]),
            )
            for sub in self._subs.values():
                reply = await _wait(self._directory.add_subscription.remote(to_json(sub)))
                if "err" in reply and reply["err"].get("type") != "ConfigurationError":
                    wire.result(reply, "add_subscription")  # an existing one is shared
        self._state = "running"

    def _host_options(self) -> dict[str, Any]:
        return {"namespace": self._namespace, **self._actor_options}

    async def stop(self) -> None:
        """Stop taking messages here (agents' actors keep what they hold)."""
        if self._state == "running":
            self._state = "stopped"

    async def wait_until_idle(self, *, timeout: float | None = None) -> None:  # noqa: ASYNC109
        """Wait until no request from here is in flight and no event is being delivered on
        the cluster (polled); `TimeoutError` past `timeout` (default: `default_timeout`)."""
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
        if self._router is None:
            return True
        if self._router.pending:
            return False
        return int(await _wait(self._directory.pending.remote())) == 0

    async def close(self) -> None:
        """Stop, close every agent's actor (saving each to the store, when there is one)
        and the directory, and shut Ray down if this runtime started it."""
        if self._state == "closed":
            return
        self._state = "closed"
        poller, self._poller = self._poller, None
        if poller is not None:
            poller.cancel()
        self._locals.clear()
        try:
            if self._directory is not None:
                grace = self._stop_grace + 60.0
                await asyncio.wait_for(_wait(self._directory.shutdown.remote()), grace)
                ray.kill(self._directory, no_restart=True)
        finally:
            if self._router is not None:
                self._router.close()
            self._directory = None
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

    # -- state and eviction -----------------------------------------------------------

    async def live_agents(self) -> list[AgentId]:
        """Ids of the agents whose actors are alive."""
        self._running("list agents")
        return [AgentId.parse(a) for a in await _wait(self._directory.live_agents.remote())]

    async def save_state(
        self, store: StateStore | None = None, *, key: str = "cantata.runtime.state"
    ) -> dict[str, Any]:
        """Agents' and subscriptions' state as JSON data (the same shape `LocalRuntime`
        writes); also written to `store[key]`. Agents evicted to the store are included."""
        router = self._running("save state")
        agents: dict[str, Any] = {}
        for name in await _wait(self._directory.live_agents.remote()):
            handle = await router.handle_for(AgentId.parse(name), None)
            agents.update(await _wait(handle.save.remote()))
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
            handle = await router.handle_for(agent_id, None)
            record = encode_agent(state, dict.fromkeys(handled))
            wire.result(await _wait(handle.load.remote(record)), f"load_state of {agent_id}")

    async def evict_idle(self, older_than: float = 0.0) -> int:
        """Save and end the actors of agents idle for `older_than` seconds; how many."""
        if self._make_store is None:
            raise ConfigurationError("eviction needs a store: RayRuntime(store=...)")
        router = self._running("evict agents")
        evicted = 0
        for name in await _wait(self._directory.live_agents.remote()):
            agent_id = AgentId.parse(name)
            handle = await router.handle_for(agent_id, None)
            if await _wait(handle.evict.remote(older_than)):
                await _wait(self._directory.retire.remote(name))
                router.forget(agent_id)
                evicted += 1
        return evicted

    async def where(self, agent_id: AgentId) -> tuple[str, int]:
        """The Ray node id and process id of `agent_id`'s actor (creating it if needed)."""
        handle = await self._running("locate an agent").handle_for(agent_id, None)
        node, pid = await _wait(handle.where.remote())
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
