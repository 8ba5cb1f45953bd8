"""The directory actor: one per runtime name on a cluster.

It knows the registered factories and the subscriptions, creates agents' actors (named
`<runtime name>/<agent id>`, created with get-if-exists, so there is one per agent on the
whole cluster whoever asks first), and delivers events: each publication is numbered per
publisher and subscriber, then handed to each subscriber's actor. An event whose actor
dies before it answers is delivered again to a new actor with the same message id (at
least once; the agent sees `ctx.is_redelivery` when it had recorded that id).

Events reach an actor over its direct stream when it reports one (see direct.py), else as
Ray calls; a stream that breaks with an event on it is a death once Ray confirms it
(delivered again to a new actor), and otherwise the event goes again by Ray call (its
message id is the same, so an actor that had it sees a redelivery). The directory has a
stream of its own, where routers hand it publications and requests to local subscribers.

Local subscribers (callbacks in a driver, which hosts no actor) have an inbox here per
process (its router's origin): their events, and direct requests to them with a future for
the answer, wait there until that process takes them (`take`, a bounded long poll) and
acknowledges them with its next poll: a poll's reply lost with its stream, or its Ray call,
is handed out again (see _inbox.py). A poll or local request whose stream ends before its
answer is ended (the server's `on_lost`).
"""

from __future__ import annotations

import asyncio
import builtins
import logging
from collections import OrderedDict
from typing import Any

from ray.exceptions import ActorDiedError, RayActorError

import ray

from ...core import ConfigurationError, TimeoutError, Undeliverable, from_json
from ..ids import AgentId, TopicId
from ..protocol import LOCAL_TYPE, AgentFactory
from ..subscriptions import Subscription
from . import wire
from ._inbox import Inbox
from .direct import (
    DIRECT_LIMIT,
    Address,
    DirectClient,
    DirectServer,
    Lost,
    Refused,
    address_of,
    died,
    node_ip,
)

__all__: list[str] = []

_log = logging.getLogger("cantata.runtime.ray")
_LOCAL_PREFIX = LOCAL_TYPE + "/"
_REDELIVERIES = 3
_RETIRED_MEMORY = 4096
_WAITING = "_task"  # a direct frame's key for the task answering it (not sent on)


def _remember(seen: OrderedDict[str, None], actor_id: str) -> None:
    seen[actor_id] = None
    while len(seen) > _RETIRED_MEMORY:
        seen.popitem(last=False)


class Directory:
    """Factories, subscriptions, actor creation and event fan-out (see the module)."""

    def __init__(self, name: str, config: dict[str, Any], host_options: dict[str, Any]) -> None:
        self._name = name
        self._config = config
        self._host_options = host_options
        self._factories: dict[str, AgentFactory] = {}
        self._subs: dict[str, Subscription] = {}
        self._live: dict[str, Any] = {}
        self._retired: OrderedDict[str, None] = OrderedDict()  # ended by the runtime
        self._incarnations: dict[str, int] = {}
        self._seq: dict[str, dict[str, int]] = {}
        self._pending = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._locals: dict[str, str] = {}  # local subscriber key -> its process's origin
        self._inboxes: dict[str, Inbox] = {}
        self._closed_end = 0  # where every closed inbox's numbers had got to
        self._asks: dict[str, tuple[str, asyncio.Future[Any]]] = {}  # by message id
        self._server: DirectServer | None = None
        self._direct = DirectClient()
        self._addresses: dict[str, Address | None] = {}  # by agent id, its live actor's
        # The actor bounds each handler by default_timeout; this is the wait for its answer.
        timeout = config["default_timeout"]
        self._bound = None if timeout is None else float(timeout) + float(config["stop_grace"]) + 5

    def register(self, agent_type: str, factory: AgentFactory) -> None:
        self._factories[agent_type] = factory

    def add_subscription(self, data: Any) -> wire.Envelope:
        try:
            sub = from_json(data)
            if not isinstance(sub, Subscription):
                raise ConfigurationError(f"{sub!r} does not implement Subscription")
            if sub.id in self._subs:
                raise ConfigurationError(
                    f"a subscription with id {sub.id!r} already exists; remove it first"
                )
            self._subs[sub.id] = sub
            return wire.ok(None)
        except Exception as exc:
            return wire.failed(exc)

    def remove_subscription(self, subscription_id: str) -> wire.Envelope:
        if self._subs.pop(subscription_id, None) is None:
            return wire.failed(
                ConfigurationError(
                    f"no subscription with id {subscription_id!r}; known: {sorted(self._subs)}"
                )
            )
        return wire.ok(None)

    def subscriptions(self) -> list[Any]:
        from ...core import to_json

        return [to_json(s) for s in self._subs.values()]

    def ensure(self, agent_id: str) -> list[Any] | wire.Envelope:
        """The actor handle of `agent_id` (in a list), created if needed.

        The actor's name carries an incarnation number, raised each time an actor of the
        agent ends: the cluster keeps a dead actor's name for a while, and get-if-exists
        would hand the dead one back."""
        handle = self._live.get(agent_id)
        if handle is not None:
            return [handle]
        factory = self._factories.get(AgentId.parse(agent_id).type)
        if factory is None:
            return wire.failed(
                Undeliverable(
                    f"no agent type {AgentId.parse(agent_id).type!r} is registered (message to "
                    f"{agent_id}); register it with runtime.register_factory(...)"
                )
            )
        from .host import host_class

        me = ray.get_runtime_context().current_actor
        incarnation = self._incarnations.get(agent_id, 0)
        handle = (
            host_class()
            .options(
                name=f"{self._name}/{agent_id}#{incarnation}",
                get_if_exists=True,
                max_concurrency=1000,
                **self._host_options,
            )
            .remote(agent_id, factory, self._config, me)
        )
        self._live[agent_id] = handle
        self._addresses.pop(agent_id, None)
        self._seq[agent_id] = {}  # a new actor: sequences start again at 0
        return [handle]

    def forget(self, agent_id: str, actor_id: str) -> bool:
        """Drop a dead actor from the table; whether the runtime itself retired it."""
        handle = self._live.get(agent_id)
        if handle is not None and handle._actor_id.hex() == actor_id:
            del self._live[agent_id]
            self._addresses.pop(agent_id, None)
            self._incarnations[agent_id] = self._incarnations.get(agent_id, 0) + 1
        return actor_id in self._retired

    def retire(self, agent_id: str) -> None:
        """End an evicted agent's actor (it answers "gone" until then)."""
        handle = self._live.pop(agent_id, None)
        self._addresses.pop(agent_id, None)
        if handle is not None:
            _remember(self._retired, handle._actor_id.hex())
            self._incarnations[agent_id] = self._incarnations.get(agent_id, 0) + 1
            ray.kill(handle, no_restart=True)

    def live_agents(self) -> list[str]:
        return list(self._live)

    def pending(self) -> int:
        return self._pending

    def publish(self, env: Any) -> wire.Envelope:
        """Number the event for each subscriber and start its deliveries; answers at once."""
        try:
            env = wire.check(env, "event")
            topic = TopicId.parse(str(env["topic"]))
            sender = env.get("sender")
            found = [s.map_to_agent(topic) for s in self._subs.values() if s.is_match(topic)]
            stream = f"dir:{env['stream']}"
            for agent_id in dict.fromkeys(str(a) for a in found):
                if agent_id == sender:
                    continue
                if agent_id.startswith(_LOCAL_PREFIX):
                    self._to_local(agent_id, {"event": {**env, "recipient": agent_id}})
                    continue
                item = {**env, "recipient": agent_id, "stream": stream}
                self._pending += 1
                task = asyncio.get_running_loop().create_task(self._deliver(agent_id, item))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            return wire.ok(None)
        except Exception as exc:
            return wire.failed(exc)

    async def _deliver(self, agent_id: str, env: wire.Envelope) -> None:
        try:
            for _ in range(_REDELIVERIES + 1):
                reply = self.ensure(agent_id)
                if isinstance(reply, dict):
                    _log.error("event %s to %s: %s", env["id"], agent_id, reply["err"]["text"])
                    return
                handle = reply[0]
                streams = self._seq.setdefault(agent_id, {})
                env["seq"] = streams.get(env["stream"], 0)
                streams[env["stream"]] = env["seq"] + 1
                try:
                    answer = await self._event(agent_id, handle, env)
                except builtins.TimeoutError:
                    _log.error(
                        "event %s to %s: no answer within %ss", env["id"], agent_id, self._bound
                    )
                    return
                except (ActorDiedError, RayActorError):
                    self.forget(agent_id, handle._actor_id.hex())
                    continue  # deliver it again to a new actor, same message id
                except Lost:
                    if await died(handle, 60.0):
                        self.forget(agent_id, handle._actor_id.hex())
                    elif self._live.get(agent_id) is handle:
                        self._addresses[agent_id] = None  # by Ray calls from now on
                    continue  # deliver it again, same message id
                if answer.get("gone") is True:
                    self.forget(agent_id, handle._actor_id.hex())
                    await asyncio.sleep(0.02)
                    continue
                if "err" in answer:
                    _log.debug("event %s to %s failed: %s", env["id"], agent_id, answer["err"])
                return
            _log.error("event %s to %s: its actor kept dying; given up", env["id"], agent_id)
        finally:
            self._pending -= 1

    async def _event(self, agent_id: str, handle: Any, env: wire.Envelope) -> wire.Envelope:
        """Hand `env` to the actor, over its stream when it has one; bounded; raises Ray's
        errors, `Lost` (the stream broke with it) or the builtin `TimeoutError`."""
        if agent_id not in self._addresses:
            found = await address_of(handle, self._bound or 60.0)
            if self._live.get(agent_id) is handle:
                self._addresses[agent_id] = found
        address = self._addresses.get(agent_id)
        if address is not None and len(env["msg"]) < DIRECT_LIMIT:
            try:
                conn = await self._direct.connection(address, self._bound)
                waiter = await conn.call("e", env)
            except Refused:
                if self._live.get(agent_id) is handle:
                    self._addresses[agent_id] = None
            else:
                try:
                    return await asyncio.wait_for(waiter, self._bound)
                except builtins.TimeoutError:
                    conn.cancel(env["id"])
                    raise
        ref = handle.event.remote(env)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(ref.future()), self._bound)
        except builtins.TimeoutError:
            handle.cancel.remote(env["id"])
            raise

    # -- the directory's own stream --------------------------------------------------------

    async def direct_address(self) -> Address | None:
        """Where routers hand this directory publications and local requests (listening
        from the first ask on); None when the runtime turned the direct path off."""
        if not self._config.get("direct", True):
            return None
        if self._server is None:
            server = DirectServer(
                self._direct_message,
                self._direct_answer,
                answers=frozenset("qep"),
                notes=frozenset("a"),
                on_lost=self._direct_lost,
            )
            try:
                await server.start(node_ip())
            except OSError:
                _log.warning("directory %s: no direct stream", self._name, exc_info=True)
                return None
            self._server = server
        return self._server.address

    async def _direct_message(self, frame: dict[str, Any]) -> Any:
        kind, wait = frame["t"], frame.get("w")
        if kind == "e":
            return self.publish(frame.get("env"))
        if kind == "p":
            frame[_WAITING] = asyncio.current_task()  # for _direct_lost
            ack = int(frame.get("k") or 0)
            return await self.take(str(frame.get("origin")), ack, float(wait or 0.0))
        frame[_WAITING] = asyncio.current_task()
        return await self.ask(frame.get("env"), None if wait is None else float(wait))

    def _direct_lost(self, frame: dict[str, Any]) -> None:
        """A poll or local request whose stream ended before its answer: nobody reads that
        answer, so its wait ends here (a poll would otherwise sit on its inbox's wake-up;
        what it would have handed out stays in the inbox, unacknowledged)."""
        task = frame.get(_WAITING)
        if isinstance(task, asyncio.Task):
            task.cancel()

    def _direct_answer(self, frame: dict[str, Any]) -> None:
        reply = frame.get("reply")
        if isinstance(reply, dict):
            self.answer(str(frame.get("id")), reply)

    # -- local subscribers --------------------------------------------------------------

    def open_local(self, origin: str, key: str) -> None:
        """Route what is sent to local subscriber `key` to the inbox of process `origin`."""
        self._locals[key] = origin
        self._inbox(origin)

    def _inbox(self, origin: str) -> Inbox:
        box = self._inboxes.get(origin)
        if box is None:
            box = self._inboxes[origin] = Inbox(self._closed_end)
        return box

    def close_local(self, key: str) -> None:
        """Forget local subscriber `key`; what is sent to it from now on is refused, and
        requests still waiting for it are answered with an error."""
        self._locals.pop(key, None)
        for mid, (recipient, future) in list(self._asks.items()):
            if recipient == _LOCAL_PREFIX + key and not future.done():
                gone = Undeliverable(
                    f"local subscriber {recipient} was removed before it answered {mid}"
                )
                future.set_result(wire.failed(gone))

    def close_inbox(self, origin: str) -> None:
        """Forget a process's inbox and its subscribers (it is closing)."""
        for key in [k for k, o in self._locals.items() if o == origin]:
            self.close_local(key)
        box = self._inboxes.pop(origin, None)
        if box is not None:
            self._closed_end = max(self._closed_end, box.end)
            if box.wake is not None:
                box.wake.set()

    def _to_local(self, agent_id: str, item: dict[str, Any]) -> bool:
        origin = self._locals.get(agent_id[len(_LOCAL_PREFIX) :])
        box = None if origin is None else self._inboxes.get(origin)
        if box is None:
            return False
        box.put(item)
        return True

    async def take(self, origin: str, ack: int, wait: float) -> list[Any]:
        """What waits for process `origin`'s local subscribers and it has not acknowledged
        (`ack`: the number it expects next), as ``[first number, *items]``; waits up to
        `wait` seconds for something when nothing does (see _inbox.py)."""
        return await self._inbox(origin).take(ack, wait)

    async def ask(self, env: Any, wait: float | None) -> wire.Envelope:
        """A direct request to a local subscriber: queued in its process's inbox; the
        answer comes back through `answer` (within `wait` seconds, else a typed error)."""
        try:
            env = wire.check(env, "request")
            recipient, mid = str(env["recipient"]), str(env["id"])
            future = asyncio.get_running_loop().create_future()
            self._asks[mid] = (recipient, future)
            try:
                if not self._to_local(recipient, {"ask": env}):
                    raise Undeliverable(
                        f"no local subscriber {recipient} (its process removed it or closed)"
                    )
                try:
                    reply: wire.Envelope = await asyncio.wait_for(future, wait)
                except builtins.TimeoutError:
                    raise TimeoutError(
                        f"local subscriber {recipient} did not answer {mid} within {wait}s "
                        "(its process is gone or busy)"
                    ) from None
                return reply
            finally:
                self._asks.pop(mid, None)
        except Exception as exc:
            return wire.failed(exc)

    def answer(self, mid: str, reply: wire.Envelope) -> None:
        """The answer of a local subscriber to request `mid`."""
        found = self._asks.get(mid)
        if found is not None and not found[1].done():
            found[1].set_result(reply)

    async def shutdown(self) -> None:
        """Close every agent's actor (each saves to the store when there is one)."""
        self._direct.close()
        if self._server is not None:
            await self._server.close()
        handles = list(self._live.values())
        self._live.clear()
        results = [asyncio.wrap_future(h.shutdown.remote().future()) for h in handles]
        if results:
            await asyncio.wait_for(
                asyncio.gather(*results, return_exceptions=True),
                float(self._config["stop_grace"]) + 30.0,
            )
        for handle in handles:
            ray.kill(handle, no_restart=True)
