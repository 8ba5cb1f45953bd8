"""`LocalRuntime`: the actor runtime in one process, on one asyncio loop.

The delivery mechanism (turns, mailboxes, activation) is in `engine.py`; this module is
the public surface: registration, messages, interventions, lifecycle, state, eviction and
release.
`send_message` and `publish_message` each build their `MessageContext` inline, on purpose:
they are the hot path, and the two differ in recipient, topic, token and rpc flag.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from contextvars import Context, copy_context
from types import TracebackType
from typing import Any

from ..core import (
    CancellationToken,
    CancelledError,
    ConfigurationError,
    MessageDropped,
    RuntimeStateError,
    dumps,
    loads,
    new_id,
    to_json,
    tracing,
)
from ..stores import StateStore
from .agent import BaseAgent
from .cell import Cell
from .context import MessageContext, _current, _start_send
from .engine import State
from .events import AgentEvicted, AgentReleased, DeliveryFailed, MessageWasDropped, RuntimeEvent
from .ids import _TYPE_RE, AgentId, TopicId, _check_type
from .interventions import DROP, InterventionHandler
from .lifecycle import DEFAULT_TIMEOUT, Lifecycle
from .protocol import AgentFactory, _LocalSubscribers
from .state import SCHEMA_VERSION, decode_runtime, encode_agent, restore
from .subscriptions import Subscription, default_subscriptions

__all__ = ["LocalRuntime"]

_log = logging.getLogger("cantata.runtime")
_TOPIC_CACHE_LIMIT = 4096
_BACKLOG = 1000  # deliveries in flight beyond which a publish yields to the subscribers


class LocalRuntime(_LocalSubscribers, Lifecycle):
    """Runs agents in this process: lazily created by type, one message at a time each.

    Options: `interventions` (see `InterventionHandler`), `on_error` (called with a
    `DeliveryFailed` when a broadcast handler fails), `store` and `evict_after` (seconds an
    agent may stay idle before its state is saved to the store and it leaves memory),
    `dedup_window` (how many handled message ids each agent remembers), `default_timeout`
    (seconds, `DEFAULT_TIMEOUT` unless set: bounds direct requests without a `timeout`,
    broadcast handlers, `wait_until_idle`, `stop_when`, the runtime's waits for an agent's
    turn and the agents' hooks; `None` for no bound), `stop_grace` (seconds `stop()` lets
    handlers finish, and a cancelled handler gets to end before it is abandoned) and
    `serialize_messages` (pass every message and result through JSON and the core type
    registry, as a runtime across processes must: catches unregistered message types and
    handlers that share mutable messages, in tests, before they reach Ray).

    A direct request runs its handler in the sender's task, in a copy of the sender's
    context: the handler sees the sender's contextvars, and what it sets stays its own.
    A direct request that comes back to an agent whose turn in progress is waiting on
    that same call chain (A asks B, B asks A) runs within A's waiting turn instead of
    deadlocking; any other message to A waits for A's turn to end.
    """

    def __init__(
        self,
        *,
        interventions: list[InterventionHandler] | None = None,
        on_error: Callable[[DeliveryFailed], object] | None = None,
        store: StateStore | None = None,
        evict_after: float | None = None,
        dedup_window: int = 128,
        default_timeout: float | None = DEFAULT_TIMEOUT,
        stop_grace: float = 5.0,
        serialize_messages: bool = False,
        state_prefix: str = "cantata.runtime.agent:",
    ) -> None:
        if evict_after is not None and store is None:
            raise ConfigurationError(
                "evict_after needs a store to save evicted agents into: pass store=MemoryStore()"
                " or SQLiteStore(path)"
            )
        super().__init__(
            on_error=on_error,
            store=store,
            dedup_window=dedup_window,
            state_prefix=state_prefix,
            default_timeout=default_timeout,
            stop_grace=stop_grace,
        )
        self._subs: dict[str, Subscription] = {}
        self._topic_cache: dict[TopicId, tuple[AgentId, ...]] = {}
        self._interventions = list(interventions or ())
        self._serialize = serialize_messages
        self._evict_after = evict_after
        # Set while a close is in progress, so a second caller waits for it.
        self._closing: asyncio.Future[None] | None = None

    # -- registration -----------------------------------------------------------------

    async def register_factory(
        self,
        agent_type: str,
        factory: AgentFactory,
        *,
        agent_class: type[BaseAgent] | None = None,
    ) -> None:
        """Create agents of `agent_type` with `factory()` on their first message.

        When `factory` is the agent class itself (or `agent_class` names it), the class's
        default subscriptions (`@type_subscription`) are added for this type.
        """
        _check_type(agent_type, _TYPE_RE, "agent type", "checker")
        if agent_type in self._factories or agent_type in self._instance_types:
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
        if cls is not None:
            self._classes[agent_type] = cls
            for sub in default_subscriptions(cls, agent_type):
                if sub.id not in self._subs:
                    await self.add_subscription(sub)

    async def register_instance(self, agent: BaseAgent, agent_id: AgentId) -> None:
        """Register a ready-made instance at `agent_id` (its type then takes no factory)."""
        if not isinstance(agent, BaseAgent):
            raise ConfigurationError(f"{agent!r} is not a BaseAgent; it cannot be registered")
        if not isinstance(agent_id, AgentId):
            raise ConfigurationError(f"{agent_id!r} is not an AgentId: use AgentId(type, key)")
        if agent_id.type in self._factories:
            raise ConfigurationError(
                f"agent type {agent_id.type!r} has a factory; register instances under "
                "another type name"
            )
        if agent_id in self._cells:
            raise ConfigurationError(f"an agent is already registered at {agent_id}")
        self._check_class(agent_id.type, type(agent), f"the instance for {agent_id} is")
        agent._bind(self, agent_id)
        first = agent_id.type not in self._instance_types
        self._instance_types.add(agent_id.type)
        self._cells[agent_id] = Cell(agent)
        if first:
            for sub in default_subscriptions(type(agent), agent_id.type):
                if sub.id not in self._subs:
                    await self.add_subscription(sub)

    async def add_subscription(self, subscription: Subscription) -> None:
        """Route topics matching `subscription` to its agents."""
        if not isinstance(subscription, Subscription):
            raise ConfigurationError(f"{subscription!r} does not implement Subscription")
        if subscription.id in self._subs:
            raise ConfigurationError(
                f"a subscription with id {subscription.id!r} already exists; remove it first"
            )
        self._subs[subscription.id] = subscription
        self._topic_cache.clear()

    async def remove_subscription(self, subscription_id: str) -> None:
        """Remove the subscription with this id; unknown ids raise `ConfigurationError`."""
        if self._subs.pop(subscription_id, None) is None:
            raise ConfigurationError(
                f"no subscription with id {subscription_id!r}; known: {sorted(self._subs)}"
            )
        self._topic_cache.clear()

    def subscriptions(self) -> list[Subscription]:
        """The current subscriptions, in the order they were added."""
        return list(self._subs.values())

    def add_intervention(self, handler: InterventionHandler) -> None:
        """Append an intervention; it sees every later message."""
        self._interventions.append(handler)

    def add_listener(self, listener: Callable[[RuntimeEvent], object]) -> None:
        """Call `listener` with each runtime event (failures, drops, activations, evictions)."""
        self._listeners.append(listener)

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
        """Deliver a direct request and return the handler's result or raise its error.

        Raises `Undeliverable` for an unknown agent type, `CantHandle` when no handler
        takes the message, `TimeoutError` after `timeout` seconds (default: the runtime's
        `default_timeout`; `math.inf` for no bound) and `CancelledError` when
        `cancellation_token` is cancelled (both cancel the handler), `MessageDropped` when
        an intervention drops the request or its response.
        """
        parent = _current.get()
        if self._state != "running":
            self._refuse(parent, f"send a {type(message).__name__} to {recipient}")
        if not isinstance(recipient, AgentId):
            raise ConfigurationError(
                f"recipient {recipient!r} is not an AgentId: use AgentId(type, key)"
            )
        if cancellation_token is not None and cancellation_token.is_cancelled:
            raise CancelledError(
                f"{type(message).__name__} to {recipient} was not sent: its "
                "CancellationToken is already cancelled"
            )
        if sender is None and parent is not None:
            sender = parent.recipient
        mid = message_id or new_id()
        ctx = MessageContext(
            message_id=mid,
            correlation_id=mid if parent is None else parent.correlation_id,
            causation_id=None if parent is None else parent.message_id,
            sender=sender,
            recipient=recipient,
            topic_id=None,
            timestamp=time.time(),
            cancellation_token=CancellationToken(),
            is_rpc=True,
            caller=parent,
        )
        # While tracing is on, the send span's traceparent rides in the envelope (the
        # handler's span joins it there). Off, this test is all a message pays: it reads
        # what `tracing.enabled()` returns without the call (a measurable part of a
        # request's cost).
        span = None if tracing._tracer is None else _start_send(ctx, message)
        try:
            if self._interventions:
                message = await self._intervene_send(message, ctx, recipient)
                if self._state != "running":  # it stopped while the interventions ran
                    self._refuse(parent, f"send a {type(message).__name__} to {recipient}")
            if self._serialize:
                message = loads(dumps(message))
            cell = self._cells.get(recipient)
            if cell is None:
                cell = self._activate(recipient)
            self._pending += 1
            try:
                result = await self._guarded_call(
                    cell,
                    message,
                    ctx,
                    self._default_timeout if timeout is None else self._bound(timeout),
                    cancellation_token,
                    parent,
                )
            finally:
                self._done_one()
            if self._interventions:
                result = await self._intervene_response(result, ctx, recipient)
            return loads(dumps(result)) if self._serialize else result
        except BaseException as exc:
            if span is not None:
                tracing.end_span(span, exc)
                span = None
            raise
        finally:
            if span is not None:
                span.end()

    async def publish_message(
        self,
        message: Any,
        topic_id: TopicId,
        *,
        sender: AgentId | None = None,
        message_id: str | None = None,
    ) -> None:
        """Deliver an event to every subscriber of `topic_id` but the sender; returns at once
        (after one step of the event loop when many deliveries are already waiting).

        A subscriber's failure goes to the `on_error` hook and listeners as `DeliveryFailed`
        and never blocks the other subscribers.
        """
        parent = _current.get()
        if not isinstance(topic_id, TopicId):
            raise ConfigurationError(
                f"topic {topic_id!r} is not a TopicId: use TopicId(type, source)"
            )
        if self._state != "running":
            self._refuse(parent, f"publish a {type(message).__name__} on {topic_id}")
            # A handler finishing during stop() may publish; new events are not taken.
            _log.debug("runtime stopping: dropped %s on %s", type(message).__name__, topic_id)
            return
        if sender is None and parent is not None:
            sender = parent.recipient
        mid = message_id or new_id()
        ctx = MessageContext(
            message_id=mid,
            correlation_id=mid if parent is None else parent.correlation_id,
            causation_id=None if parent is None else parent.message_id,
            sender=sender,
            recipient=None,
            topic_id=topic_id,
            timestamp=time.time(),
            cancellation_token=self._events_token,
            is_rpc=False,
        )
        span = None if tracing._tracer is None else _start_send(ctx, message)
        try:
            ctx._context = copy_context()
            if self._interventions:
                message = await self._intervene_publish(message, ctx)
                if message is DROP:
                    return
                if self._state != "running":  # it stopped while the interventions ran
                    self._refuse(parent, f"publish a {type(message).__name__} on {topic_id}")
                    return
            recipients = self._topic_cache.get(topic_id)
            if recipients is None:
                recipients = self._recipients(topic_id)
            ctx._message = message  # the publication every subscriber's mailbox shares
            cells = self._cells
            for agent_id in recipients:
                if agent_id == sender:
                    continue
                cell = cells.get(agent_id)
                if cell is None:
                    try:
                        cell = self._activate(agent_id)
                    except Exception as exc:  # no such type, or its factory failed
                        self._report(
                            DeliveryFailed(agent_id, message, ctx._copy_for(agent_id), exc)
                        )
                        continue
                if self._serialize:  # each subscriber gets its own copy of the message
                    item = ctx._copy_for(agent_id)
                    item._message = loads(dumps(message))
                    self._enqueue(cell, item)
                else:
                    self._enqueue(cell, ctx)
            if self._pending > _BACKLOG:
                # Backpressure: a publisher that never awaits anything else would queue
                # without end; a backlog of live deliveries also makes every garbage
                # collection slower. One step of the loop lets the subscribers drain it.
                await asyncio.sleep(0)
        except BaseException as exc:
            if span is not None:
                tracing.end_span(span, exc)
                span = None
            raise
        finally:
            if span is not None:
                span.end()

    def _recipients(self, topic_id: TopicId) -> tuple[AgentId, ...]:
        found = [s.map_to_agent(topic_id) for s in self._subs.values() if s.is_match(topic_id)]
        recipients = tuple(dict.fromkeys(found)) if len(found) > 1 else tuple(found)
        if all(s.by_topic_type for s in self._subs.values()):
            if len(self._topic_cache) >= _TOPIC_CACHE_LIMIT:
                self._topic_cache.clear()
            self._topic_cache[topic_id] = recipients
        return recipients

    def _refuse(self, parent: MessageContext | None, what: str) -> None:
        # While stopping, handlers in flight may still send (they wait for the answer to
        # finish), and their publishes are dropped; everyone else is refused.
        if self._state == "stopping" and parent is not None:
            return
        hint = {
            "new": "call `await runtime.start()` (or use `async with runtime:`) first",
            "stopping": "the runtime is stopping; start it again after stop() returns",
            "stopped": "the runtime is stopped; call start() again",
            "closed": "the runtime is closed; create a new LocalRuntime",
        }.get(self._state, "")
        raise RuntimeStateError(f"cannot {what}: {hint}")

    async def get_agent(self, agent_id: AgentId) -> BaseAgent:
        """The live instance at `agent_id`, created (or reactivated) if needed."""
        cell, agent, held = await self._acquire(agent_id)
        if held:
            self._release(cell)
        return agent

    # -- interventions ----------------------------------------------------------------

    async def _intervene_send(self, message: Any, ctx: MessageContext, recipient: AgentId) -> Any:
        for handler in self._interventions:
            async with self._bounded(f"intervention {type(handler).__name__}.on_send"):
                changed = await handler.on_send(message, ctx, recipient)
            if changed is DROP:
                self._report(MessageWasDropped("send", message, ctx))
                raise MessageDropped(
                    f"direct message {ctx.message_id} to {recipient} was dropped by "
                    f"intervention {type(handler).__name__}"
                )
            message = changed
        return message

    async def _intervene_publish(self, message: Any, ctx: MessageContext) -> Any:
        for handler in self._interventions:
            async with self._bounded(f"intervention {type(handler).__name__}.on_publish"):
                changed = await handler.on_publish(message, ctx)
            if changed is DROP:
                self._report(MessageWasDropped("publish", message, ctx))
                return DROP
            message = changed
        return message

    async def _intervene_response(
        self, result: Any, ctx: MessageContext, responder: AgentId
    ) -> Any:
        for handler in self._interventions:
            async with self._bounded(f"intervention {type(handler).__name__}.on_response"):
                changed = await handler.on_response(result, ctx, responder)
            if changed is DROP:
                self._report(MessageWasDropped("response", result, ctx))
                raise MessageDropped(
                    f"the response of {responder} to message {ctx.message_id} was dropped by "
                    f"intervention {type(handler).__name__}"
                )
            result = changed
        return result

    # -- lifecycle --------------------------------------------------------------------

    async def start(self) -> None:
        """Start taking messages (and, with `evict_after`, the eviction sweep)."""
        if self._state == "closed":
            raise RuntimeStateError("this LocalRuntime is closed; create a new one")
        if self._state in ("running", "stopping"):
            raise RuntimeStateError("the runtime is already running; stop() it first")
        self._state = "running"
        self._events_token = CancellationToken()
        if self._evict_after is not None:
            loop = asyncio.get_running_loop()  # in a fresh context, like the engine's tasks
            self._sweeper = loop.create_task(self._sweep(self._evict_after), context=Context())

    async def close(self) -> None:
        """Stop, then run every live agent's `close()` hook; the runtime cannot restart.
        A close while another is in progress waits for it (outside handlers).

        With a `store`, live agents made by factories are saved into it first, as if
        evicted: the store then holds every agent's latest state, never a stale record
        from an earlier eviction, and a new runtime on it picks up where this one ended.
        Saving, and each hook, is bounded by `default_timeout` (a hook past it is logged).
        """
        if self._closing is not None:
            if _current.get() is None:
                await asyncio.shield(self._closing)  # bounded: stop, save and hooks are
            return
        if self._state == "closed":
            return
        done = self._closing = asyncio.get_running_loop().create_future()
        try:
            await self.stop()
            self._state = "closed"
            failed: Exception | None = None
            if self._store is not None:
                try:
                    async with self._bounded("saving the live agents at close"):
                        await self._save_live(self._store)
                except Exception as exc:  # the hooks still run; the caller hears it after
                    failed = exc
            for agent_id, cell in list(self._cells.items()):
                if cell.agent is not None:
                    try:
                        async with self._bounded(f"close() of agent {agent_id}"):
                            await cell.agent.close()
                    except Exception:
                        _log.exception("close() of agent %s failed", agent_id)
            self._cells.clear()
            if failed is not None:
                raise failed
        finally:
            self._state = "closed"
            done.set_result(None)

    async def __aenter__(self) -> LocalRuntime:
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

    async def save_state(
        self, store: StateStore | None = None, *, key: str = "cantata.runtime.state"
    ) -> dict[str, Any]:
        """Agents' and subscriptions' state as JSON data; also written to `store[key]`.

        Each agent is saved in its own turn, so no handler is half-way through. (Called
        from inside a handler, it reads agents as they are, since waiting for turns there
        could deadlock.) Agents evicted to the runtime's store are included, read back
        from it, so what a snapshot holds never depends on when the sweeper last ran.
        """
        in_handler = _current.get() is not None
        agents: dict[str, Any] = {}
        for agent_id, cell in list(self._cells.items()):
            if in_handler or cell.agent is None:
                if cell.agent is not None:
                    async with self._bounded(f"save_state() of agent {agent_id}"):
                        state = await cell.agent.save_state()
                    agents[str(agent_id)] = encode_agent(state, cell.handled)
                continue
            cell, agent, held = await self._acquire(agent_id)
            try:
                async with self._bounded(f"save_state() of agent {agent_id}"):
                    state = await agent.save_state()
                agents[str(agent_id)] = encode_agent(state, cell.handled)
            finally:
                if held:
                    self._release(cell)
        if self._store is not None:
            await self._save_evicted(self._store, agents)
        data: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "agents": agents,
            "subscriptions": [to_json(s) for s in self._subs.values()],
        }
        if store is not None:
            await store.put(key, data)
        return data

    async def _save_live(self, store: StateStore) -> None:
        records: dict[str, Any] = {}
        for agent_id, cell in list(self._cells.items()):
            agent = cell.agent
            if agent is None or agent_id.type in self._instance_types:
                continue
            try:
                state = await agent.save_state()
                records[self._prefix + str(agent_id)] = encode_agent(state, cell.handled)
            except Exception:
                _log.exception(
                    "saving agent %s at close failed; its store record is older", agent_id
                )
        if records:
            await store.put_many(records)

    async def _save_evicted(self, store: StateStore, agents: dict[str, Any]) -> None:
        """Add the records of agents evicted to `store` (a live agent's newer state wins)."""
        prefix = self._prefix
        for key in await store.keys(prefix):
            name = key[len(prefix) :]
            if name not in agents:
                record = await store.get(key)
                if record is not None:
                    agents[name] = record

    async def load_state(
        self, source: StateStore | Mapping[str, Any], *, key: str = "cantata.runtime.state"
    ) -> None:
        """Restore what `save_state` wrote: add missing subscriptions, create each agent
        (its type must be registered) and hand it its state, in its own turn.

        Everything is decoded and checked first, so bad data changes nothing.
        """
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
            if agent_id.type not in self._factories and agent_id not in self._cells:
                raise self._undeliverable(agent_id)
        for sub in subs:
            if sub.id not in self._subs:
                await self.add_subscription(sub)
        for agent_id, state, handled in agents:
            cell, agent, held = await self._acquire(agent_id)
            try:
                async with self._bounded(f"load_state() of agent {agent_id}"):
                    await restore(agent, state, agent_id)
                cell.restore_handled(handled, self._window)
            finally:
                if held:
                    self._release(cell)

    async def evict_idle(self, older_than: float = 0.0) -> int:
        """Save and remove agents idle for at least `older_than` seconds; returns how many.

        Registered instances stay. An evicted agent comes back from the store on its next
        message.
        """
        store = self._store
        if store is None:
            raise ConfigurationError("eviction needs a store: LocalRuntime(store=...)")
        now = time.monotonic()
        victims = [
            (agent_id, cell, cell.agent)
            for agent_id, cell in self._cells.items()
            if not cell.busy
            and cell.agent is not None
            and now - cell.last_used >= older_than
            and agent_id.type not in self._instance_types
        ]
        evicted = 0
        for agent_id, cell, agent in victims:
            if cell.busy or self._cells.get(agent_id) is not cell or agent is None:
                continue
            cell.busy = True  # hold the turn while saving
            try:
                async with self._bounded(f"evicting agent {agent_id}"):
                    state = await agent.save_state()
                    await store.put(self._prefix + str(agent_id), encode_agent(state, cell.handled))
                if cell.mailbox:
                    continue  # a message arrived meanwhile: keep the agent
                del self._cells[agent_id]
            finally:
                if self._cells.get(agent_id) is cell:
                    self._release(cell)
            evicted += 1
            self._pending += 1  # its close hook may still send: not idle until it is done
            try:
                async with self._bounded(f"close() of evicted agent {agent_id}"):
                    await agent.close()
            except Exception:
                _log.exception("close() of evicted agent %s failed", agent_id)
            finally:
                self._done_one()
            if self._listeners:
                self._report(AgentEvicted(agent_id))
        return evicted

    async def release_agents(self, agent_ids: Iterable[AgentId]) -> int:
        """Take these agents out of memory for good, because the work they were made for
        is over (the actors of a run whose call returned): nothing is saved, their records
        leave the runtime's store, their `close()` hooks run, and a later message to one
        creates it afresh. An agent in the middle of a turn, or with messages waiting,
        leaves once it is idle (no wait here); ids of agents not in memory, and registered
        instances, are skipped. Returns how many left memory at once.
        """
        ids = list(agent_ids)
        for agent_id in ids:
            if not isinstance(agent_id, AgentId):
                raise ConfigurationError(
                    f"{agent_id!r} is not an AgentId: release_agents takes AgentId(type, key)s"
                )
        gone: list[tuple[AgentId, BaseAgent]] = []
        for agent_id in ids:
            if agent_id.type in self._instance_types:
                continue
            cell = self._cells.get(agent_id)
            if cell is None:
                continue
            if cell.busy:
                cell.doomed = True  # `_release` drops it when its turn ends
                continue
            del self._cells[agent_id]
            if cell.agent is not None:
                gone.append((agent_id, cell.agent))
        store = self._store
        if store is not None and ids:
            async with self._bounded("deleting the store records of released agents"):
                for agent_id in ids:
                    if agent_id.type not in self._instance_types:
                        await store.delete(self._prefix + str(agent_id))
        for agent_id, agent in gone:
            if type(agent).close is not BaseAgent.close:
                self._pending += 1  # its close hook may still send: not idle until done
                try:
                    async with self._bounded(f"close() of released agent {agent_id}"):
                        await agent.close()
                except Exception:
                    _log.exception("close() of released agent %s failed", agent_id)
                finally:
                    self._done_one()
            if self._listeners:
                self._report(AgentReleased(agent_id))
        return len(gone)

    async def _sweep(self, evict_after: float) -> None:
        # Runs until stop() cancels it; each round is bounded (see evict_idle).
        while True:
            await asyncio.sleep(max(evict_after / 2, 0.01))
            try:
                await self.evict_idle(evict_after)
            except Exception:
                _log.exception("evicting idle agents failed")

    # -- introspection ----------------------------------------------------------------

    @property
    def state(self) -> State:
        """Lifecycle state: new, running, stopping, stopped or closed."""
        return self._state

    def live_agents(self) -> list[AgentId]:
        """Ids of the agents in memory (not the evicted ones)."""
        return list(self._cells)
