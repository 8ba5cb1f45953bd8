"""The host actor: one of a fixed pool per node, holding many agents (`PoolHost`).

A host runs one `LocalRuntime` (`_HostRuntime`) for every agent the membership places on
it, so turns, timeouts, cancellation, dedup, interventions, state save and restore from
the store, and idle eviction are the local engine's own; an agent is a few hundred bytes
in a host's memory, not a process. What an agent sends to an agent of another host goes
through the host's `Router` straight to that host; to an agent of its own host, through
the local engine (no copy over the network).

A message comes as a JSON envelope over the host's direct stream (or, where no stream can
be opened, as a Ray call), is checked for its wire version, admitted in the order its
router numbered it (`ReorderBuffer`, one sequence per router and host), then checked for
ownership: a host takes a message only for an agent the membership it has committed puts
on it, and, while a new membership is being prepared, that one too; anything else is
refused with ``{"moved": version}`` (nothing ran; the router reads the membership again
and sends it on). A request carries the ids of the requests waiting on it (its chain): one
that comes back to an agent whose turn waits on it (A asks B, B asks A) runs within that
turn, as `LocalRuntime` does.

A publication reaches a host once, naming the host's subscribers; the host puts it in
each one's mailbox as the local engine's publish does (each with its own copy of the
message; a handler that fails goes to `on_error`, as in `LocalRuntime`) and answers when
all have handled it, listing those no longer its own.

When the membership changes, `prepare` deactivates the agents the new one puts elsewhere
(saving each to the store, in its turn) before any other host may activate them, and
`commit` makes the new one current (see runtime.py): one activation per agent.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import time
from collections.abc import Callable, Coroutine, Iterable
from types import MethodType
from typing import Any

import ray

from ...core import CancellationToken, ConfigurationError, from_json, loads
from ...stores import StateStore
from ..context import MessageContext, _current
from ..events import DeliveryFailed
from ..ids import AgentId, TopicId
from ..local import LocalRuntime
from ..protocol import LOCAL_TYPE
from ..state import SCHEMA_VERSION, encode_agent
from ..subscriptions import Subscription
from . import wire
from .direct import DirectServer, node_ip
from .membership import Membership, Records
from .reorder import ReorderBuffer
from .router import Router

__all__: list[str] = []

_log = logging.getLogger("cantata.runtime.ray")
DEFAULT_STREAM_LIMIT = 1024  # requests in flight per direct stream before the host stops reading it


class _HostRuntime(LocalRuntime):
    """The engine of one host: its agents here; everything else through the router."""

    def __init__(self, host: PoolHost, router: Router, **options: Any) -> None:
        super().__init__(**options)
        self._host = host
        self._router = router
        # The requests in flight here, by message id: their contexts and chains.
        self._held: dict[str, tuple[MessageContext, list[str]]] = {}

    async def send_message(
        self,
        message: Any,
        recipient: AgentId,
        *,
        sender: AgentId | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 (the fixed API)
        cancellation_token: CancellationToken | None = None,
        message_id: str | None = None,
    ) -> Any:
        if (
            isinstance(recipient, AgentId)
            and recipient.type != LOCAL_TYPE  # a callback in some driver: its directory's
            and self._host.owns(str(recipient))
        ):
            return await super().send_message(
                message,
                recipient,
                sender=sender,
                timeout=timeout,
                cancellation_token=cancellation_token,
                message_id=message_id,
            )
        parent = _current.get()
        chain: list[str] = []
        if parent is not None:
            sender = sender if sender is not None else parent.recipient
            held = self._held.get(parent.message_id)
            chain = [*held[1], parent.message_id] if held is not None else [parent.message_id]
        return await self._router.request(
            message,
            recipient,
            sender=sender,
            parent=parent,
            timeout=self._default_timeout if timeout is None else timeout,
            token=cancellation_token,
            message_id=message_id,
            chain=chain,
        )

    async def publish_message(
        self,
        message: Any,
        topic_id: TopicId,
        *,
        sender: AgentId | None = None,
        message_id: str | None = None,
    ) -> None:
        parent = _current.get()
        if sender is None and parent is not None:
            sender = parent.recipient
        await self._router.publish(
            message, topic_id, sender=sender, parent=parent, message_id=message_id
        )

    async def add_subscription(self, subscription: Subscription) -> None:
        await self._router.add_subscription(subscription)

    async def remove_subscription(self, subscription_id: str) -> None:
        await self._router.remove_subscription(subscription_id)

    async def release_agents(self, agent_ids: Iterable[AgentId]) -> int:
        """Release the agents of this host here, the others through their hosts."""
        ids = list(agent_ids)
        mine = [a for a in ids if self._host.owns(str(a))]
        others = [a for a in ids if not self._host.owns(str(a))]
        released = await super().release_agents(mine)
        if others:
            released += await self._router.release(others)
        return released

    async def deliver(
        self, message: Any, env: wire.Envelope, recipient: AgentId, token: CancellationToken
    ) -> Any:
        """Run `recipient`'s handler for the request `message` in its turn, as
        `send_message` would; `token` is its context's (cancelling it cancels the
        handler)."""
        got = env.get("chain")
        chain = [str(m) for m in got] if got else []
        caller = None  # the turn here that waits on this request, if one does
        for waiting in reversed(chain):
            held = self._held.get(waiting)
            if held is not None:
                caller = held[0]
                break
        ctx = _context_of(env, recipient, token, caller)
        timeout = env.get("timeout")
        cell = self._cells.get(recipient)
        if cell is None:
            cell = self._activate(recipient)
        self._pending += 1
        self._held[ctx.message_id] = (ctx, chain)
        try:
            bound = self._bound(math.inf if timeout is None else timeout)
            return await self._guarded_call(cell, message, ctx, bound, None, None)
        finally:
            self._held.pop(ctx.message_id, None)
            self._done_one()

    def enqueue_event(self, env: wire.Envelope, recipients: list[AgentId]) -> asyncio.Future[None]:
        """Queue the publication `env` for each of `recipients` (agents of this host), each
        with its own copy of the message (it crossed a process, as JSON); a future done when
        every one has handled it. Failures go to `on_error`, as `LocalRuntime`'s do."""
        raw = env["msg"]
        message = loads(raw)
        ctx = _context_of(env, None, self._events_token)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        batch = _Batch(len(recipients), done)
        cells = self._cells
        for i, agent_id in enumerate(recipients):
            item = ctx._copy_for(agent_id)
            item._message = message if i == 0 else loads(raw)
            item._done = batch
            cell = cells.get(agent_id)
            if cell is None:
                try:
                    cell = self._activate(agent_id)
                except Exception as exc:  # no such type, or its factory failed
                    self._report(DeliveryFailed(agent_id, item._message, item, exc))
                    batch()
                    continue
            self._enqueue(cell, item)
        return done

    async def deactivate(self, agent_id: AgentId) -> bool:
        """Save `agent_id` to the store in its turn and take it out of memory; whether it
        was here. Without a store it is dropped (its next activation starts afresh)."""
        cell = self._cells.get(agent_id)
        if cell is None:
            return False
        cell, agent, held = await self._acquire(agent_id)
        try:
            if self._store is not None:
                async with self._bounded(f"handing agent {agent_id} over"):
                    state = await agent.save_state()
                    record = encode_agent(state, cell.handled)
                    await self._store.put(self._prefix + str(agent_id), record)
            if self._cells.get(agent_id) is cell:
                del self._cells[agent_id]
        finally:
            if held:
                self._release(cell)
        try:
            async with self._bounded(f"close() of agent {agent_id}"):
                await agent.close()
        except Exception:
            _log.exception("close() of agent %s failed as it moved", agent_id)
        return True


class _Batch:
    """The deliveries of one publication on a host: its future is done after the last."""

    __slots__ = ("done", "left")

    def __init__(self, left: int, done: asyncio.Future[None]) -> None:
        self.left, self.done = left, done

    def __call__(self) -> None:
        self.left -= 1
        if self.left <= 0 and not self.done.done():
            self.done.set_result(None)


class PoolHost:
    """A host of the pool (made a Ray actor class by `host_class()`); see the module.

    Ray wraps every method of the actor class it makes (a subclass of this one) in a
    tracing layer, an extra coroutine or call per method even with tracing off; the
    direct stream's message path calls its methods through `PoolHost` itself, which Ray
    leaves as is."""

    def __init__(self, pool: str, name: str, config: dict[str, Any]) -> None:
        self._pool = pool
        self._name = name
        self._config = config
        self._records = Records(pool, str(config["namespace"]))
        self._committed = self._records.membership() or Membership(0, (name,))
        self._prepared: Membership | None = None
        self._runtime: _HostRuntime | None = None
        self._starting: asyncio.Future[_HostRuntime] | None = None
        self._store: StateStore | None = None
        self._reorder = ReorderBuffer(float(config["reorder_wait"]))
        self._tokens: dict[str, CancellationToken] = {}
        self._direct: DirectServer | None = None
        self._via = {"ray": 0, "direct": 0}  # messages taken by each path (tests, operators)
        self._inflight = 0
        self._closed = False

    # -- ownership ------------------------------------------------------------------------

    def owns(self, agent: str) -> bool:
        """Whether this host may run `agent` now (see the module docstring)."""
        if self._committed.owner(agent) != self._name:
            return False
        prepared = self._prepared
        return prepared is None or prepared.owner(agent) == self._name

    def _refresh(self, seen: int) -> None:
        """Read the membership again when a router has seen a newer version than ours."""
        if seen > self._committed.version:
            found = self._records.membership()
            if found is not None and found.version > self._committed.version:
                self._adopt(found)

    def _adopt(self, membership: Membership) -> None:
        self._committed = membership
        if self._prepared is not None and self._prepared.version <= membership.version:
            self._prepared = None
        if self._runtime is not None:
            self._runtime._router.adopt(membership)

    async def prepare(self, data: bytes) -> dict[str, Any]:
        """Stop taking the agents `data` (the next membership) puts elsewhere, and hand
        each live one over: saved to the store, out of memory. How many moved, and the
        agents whose hand-over failed (still here, unsaved: the keeper must not commit)."""
        membership = Membership.from_bytes(data)
        if membership.version <= self._committed.version:
            return {"moved": 0, "failed": []}
        self._prepared = membership
        if self._runtime is None:
            return {"moved": 0, "failed": []}
        runtime = self._runtime
        leaving = [a for a in list(runtime._cells) if membership.owner(str(a)) != self._name]
        moved = 0
        failed: list[str] = []
        for agent_id in leaving:
            try:
                moved += await runtime.deactivate(agent_id)
            except Exception:
                _log.exception("host %s: handing agent %s over failed", self._name, agent_id)
                failed.append(str(agent_id))
        return {"moved": moved, "failed": failed}

    def abort(self, version: int) -> None:
        """Forget the prepared membership `version` (the keeper did not commit it): the
        agents it would have moved are this host's again."""
        if self._prepared is not None and self._prepared.version == version:
            self._prepared = None

    def commit(self, data: bytes) -> None:
        """Make `data` the current membership (the keeper wrote it to the store first)."""
        membership = Membership.from_bytes(data)
        if membership.version > self._committed.version:
            self._adopt(membership)

    # -- the engine -----------------------------------------------------------------------

    async def _rt(self) -> _HostRuntime:
        if self._runtime is not None:
            return self._runtime
        if self._starting is None:
            self._starting = asyncio.get_running_loop().create_future()
            try:
                self._starting.set_result(await self._make())
            except BaseException as exc:
                self._starting.set_exception(exc)
                self._starting = None
                raise
        return await asyncio.shield(self._starting)

    async def _make(self) -> _HostRuntime:
        config = self._config
        make_store: Callable[[], StateStore] | None = config["store"]
        stored = await asyncio.to_thread(self._records.config)
        router = Router(
            pool=self._pool,
            namespace=str(config["namespace"]),
            interventions=list(config["interventions"]),
            stop_grace=float(config["stop_grace"]),
            direct=bool(config.get("direct", True)),
            host=self,
            name=self._name,
        )
        router.adopt(self._committed)
        self._store = None if make_store is None else make_store()
        runtime = _HostRuntime(
            self,
            router,
            interventions=list(config["interventions"]),  # for sends to agents on this host
            store=self._store,
            evict_after=config["evict_after"],
            dedup_window=int(config["dedup_window"]),
            default_timeout=config["default_timeout"],
            stop_grace=float(config["stop_grace"]),
            on_error=config["on_error"],
            state_prefix=str(config["state_prefix"]),
        )
        runtime._factories.update(stored["factories"])  # no default subscriptions here
        for data in stored["subscriptions"].values():
            router.subscribe(_subscription(data))
        await runtime.start()
        self._runtime = runtime
        return runtime

    def register(self, agent_type: str, factory: Any) -> None:
        """A factory registered after this host started."""
        if self._runtime is not None:
            self._runtime._factories[agent_type] = factory

    def subscribe(self, data: Any) -> None:
        if self._runtime is not None:
            self._runtime._router.subscribe(_subscription(data))

    def unsubscribe(self, subscription_id: str) -> None:
        if self._runtime is not None:
            self._runtime._router.unsubscribe(subscription_id)

    # -- messages -------------------------------------------------------------------------

    async def request(self, env: Any) -> wire.Envelope:
        self._via["ray"] += 1
        return await self.handle(env, "q")

    async def event(self, env: Any) -> wire.Envelope:
        self._via["ray"] += 1
        return await self.handle(env, "e")

    async def direct_address(self) -> tuple[str, int, str] | None:
        """Where this host takes messages directly (listening from the first ask on); None
        when the runtime turned the direct path off or no port could be opened."""
        if self._closed or not self._config.get("direct", True):
            return None
        if self._direct is None:
            server = DirectServer(
                MethodType(PoolHost._direct_message, self),
                self._direct_cancel,
                on_lost=self._direct_lost,
                limit=int(self._config.get("stream_limit") or DEFAULT_STREAM_LIMIT),
            )
            try:
                await server.start(node_ip())
            except OSError:
                _log.warning(
                    "host %s: no direct stream (Ray calls only)", self._name, exc_info=True
                )
                return None
            self._direct = server
        return self._direct.address

    def _direct_message(self, frame: dict[str, Any]) -> Coroutine[Any, Any, wire.Envelope]:
        """The handling of a frame's message (a coroutine: no layer of its own)."""
        self._via["direct"] += 1
        return PoolHost.handle(self, frame.get("env"), str(frame["t"]))

    def _direct_cancel(self, frame: dict[str, Any]) -> None:
        self.cancel(str(frame.get("id")))

    def _direct_lost(self, frame: dict[str, Any]) -> None:
        """A request whose stream ended before its answer: nobody will read that answer, so
        its handler is cancelled as its caller's cancellation would."""
        env = frame.get("env")
        if isinstance(env, dict) and "id" in env:
            self.cancel(str(env["id"]))

    async def close_direct(self) -> None:
        """Stop taking messages directly (routers fall back to Ray calls)."""
        self._config = {**self._config, "direct": False}
        server, self._direct = self._direct, None
        if server is not None:
            await server.close()

    def paths(self) -> dict[str, int]:
        """How many messages came by Ray call and how many by the direct stream."""
        return dict(self._via)

    async def handle(self, env: Any, kind: str) -> wire.Envelope:
        """Run one delivered envelope (`kind` ``"q"``, a request, or ``"e"``, an event) on
        its agent here, in its sequence; what a Ray call, the direct stream and a router in
        this host (`Router._submit`) all hand it."""
        if self._closed:
            return {"v": wire.WIRE_VERSION, "moved": self._committed.version}
        self._inflight += 1
        mid = ""
        token: CancellationToken | None = None
        try:
            env = wire.check(env, "message")
            runtime = self._runtime if self._runtime is not None else await self._rt()
            waiting = self._reorder.admit(str(env["stream"]), int(env["seq"]))
            if waiting is not None:
                await waiting
            PoolHost._refresh(self, int(env.get("mv") or 0))
            if kind == "e":
                return await PoolHost._event(self, runtime, env)
            recipient = str(env["recipient"])
            if not PoolHost.owns(self, recipient):
                return {"v": wire.WIRE_VERSION, "moved": self._committed.version}
            mid = str(env["id"])
            token = self._tokens[mid] = CancellationToken()
            message = loads(env["msg"])
            return wire.ok(await runtime.deliver(message, env, AgentId.parse(recipient), token))
        except Exception as exc:
            return wire.failed(exc)
        finally:
            if token is not None and self._tokens.get(mid) is token:
                del self._tokens[mid]  # not a later delivery's of the same id
            self._inflight -= 1

    async def _event(self, runtime: _HostRuntime, env: wire.Envelope) -> wire.Envelope:
        """Put a publication in the mailbox of each of this host's recipients it names, as
        `LocalRuntime.publish_message` does, and answer once each has handled it (a host
        that dies before then loses nothing: its router sends the event again). The reply
        lists the recipients that are not this host's (nothing ran for them)."""
        moved: list[str] = []
        mine: list[AgentId] = []
        for r in env["recipients"]:
            if self.owns(str(r)):
                mine.append(AgentId.parse(str(r)))
            else:
                moved.append(str(r))
        if mine:
            await runtime.enqueue_event(env, mine)
        return {"v": wire.WIRE_VERSION, "ok": "null", "moved": moved}

    def cancel(self, message_id: str) -> None:
        """Cancel the handler of `message_id` (through its token), if still running."""
        token = self._tokens.get(message_id)
        if token is not None:
            token.cancel()

    # -- state, eviction, operators ---------------------------------------------------------

    async def save(self) -> dict[str, Any]:
        """The saved records of this host's live agents, each taken in its turn."""
        runtime = await self._rt()
        agents: dict[str, Any] = {}
        for agent_id in list(runtime._cells):
            cell, agent, held = await runtime._acquire(agent_id)
            try:
                agents[str(agent_id)] = encode_agent(await agent.save_state(), cell.handled)
            finally:
                if held:
                    runtime._release(cell)
        return agents

    async def load(self, name: str, record: dict[str, Any]) -> wire.Envelope:
        try:
            if not self.owns(name):
                raise ConfigurationError(f"agent {name} is not on host {self._name}")
            data = {"schema_version": SCHEMA_VERSION, "agents": {name: record}}
            await (await self._rt()).load_state({**data, "subscriptions": []})
            return wire.ok(None)
        except Exception as exc:
            return wire.failed(exc)

    async def release(self, names: list[str]) -> int:
        """Release these agents of this host (their run is over): out of memory, unsaved,
        their store records deleted; how many left memory at once."""
        runtime = await self._rt()
        return await LocalRuntime.release_agents(runtime, [AgentId.parse(n) for n in names])

    async def evict(self, older_than: float) -> int:
        """Save and drop this host's agents idle for `older_than` seconds; how many."""
        if self._runtime is None:
            return 0
        return await self._runtime.evict_idle(older_than)

    def live_agents(self) -> list[str]:
        return [] if self._runtime is None else [str(a) for a in self._runtime._cells]

    def pending(self) -> int:
        """Messages in flight here: being handled, or sent on from here and unanswered."""
        runtime = self._runtime
        if runtime is None:
            return self._inflight
        return self._inflight + runtime._pending + runtime._router.pending

    def stats(self) -> dict[str, Any]:
        """This host's place and load (for operators: `RayRuntime.placement()`)."""
        runtime = self._runtime
        return {
            "host": self._name,
            "node": ray.get_runtime_context().get_node_id(),
            "pid": os.getpid(),
            "agents": 0 if runtime is None else len(runtime._cells),
            "membership": self._committed.version,
            "paths": dict(self._via),
        }

    def where(self) -> tuple[str, int]:
        """The node id and process id this host runs in (for tests and operators)."""
        return ray.get_runtime_context().get_node_id(), os.getpid()

    async def shutdown(self) -> None:
        """Close every agent (saving each to the store when there is one); refuse from
        now on."""
        self._closed = True
        runtime, self._runtime = self._runtime, None
        if runtime is not None:
            try:
                await runtime.close()
            finally:
                runtime._router.close()
        store, self._store = self._store, None
        if store is not None:
            await store.close()
        server, self._direct = self._direct, None
        if server is not None:
            await server.close()


def _context_of(
    env: wire.Envelope,
    recipient: AgentId | None,
    token: CancellationToken,
    caller: MessageContext | None = None,
) -> MessageContext:
    """The context of an envelope's delivery here: a request's to `recipient`, or (no
    recipient) a publication's, shared by its deliveries."""
    sender, topic = env.get("sender"), env.get("topic")
    return MessageContext(
        message_id=str(env["id"]),
        correlation_id=str(env.get("corr") or env["id"]),
        causation_id=env.get("cause"),
        sender=None if sender is None else AgentId.parse(sender),
        recipient=recipient,
        topic_id=None if topic is None else TopicId.parse(topic),
        timestamp=time.time(),
        cancellation_token=token,
        is_rpc=recipient is not None,
        caller=caller,
        trace_context=env.get("tp"),
    )


def _subscription(data: Any) -> Subscription:
    sub = from_json(data)
    if not isinstance(sub, Subscription):
        raise ConfigurationError(f"{sub!r} does not implement Subscription")
    return sub


_HOST: Any = None
_DIRECTORY: Any = None


def host_class() -> Any:
    """`PoolHost` as a Ray actor class (made once, on first use)."""
    global _HOST
    if _HOST is None:
        _HOST = ray.remote(PoolHost)
    return _HOST


def directory_class() -> Any:
    """`Directory` (local subscribers' inboxes) as a Ray actor class (made once)."""
    global _DIRECTORY
    if _DIRECTORY is None:
        from .directory import Directory

        _DIRECTORY = ray.remote(Directory)
    return _DIRECTORY
