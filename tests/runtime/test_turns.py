"""Turn-based agents: one message at a time per AgentId, in arrival order; different
agents run concurrently."""

from __future__ import annotations

import asyncio
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cantata.runtime import (
    AgentEvicted,
    AgentId,
    InterventionHandler,
    LocalRuntime,
    MessageContext,
    RoutedAgent,
    RuntimeEvent,
    TopicId,
    TypeSubscription,
    current_context,
    message_handler,
)
from cantata.stores import MemoryStore


@dataclass
class Step:
    n: int


@dataclass
class Meet:
    mine: asyncio.Event
    theirs: asyncio.Event


class Serial(RoutedAgent):
    def __init__(self) -> None:
        self.active = 0
        self.overlaps = 0
        self.order: list[int] = []

    @message_handler
    async def on_step(self, message: Step, ctx: MessageContext) -> int:
        self.active += 1
        self.overlaps += self.active > 1
        # Yield several times so that concurrent deliveries would interleave here.
        for _ in range(3):
            await asyncio.sleep(0)
        self.order.append(message.n)
        self.active -= 1
        return message.n

    @message_handler
    async def on_meet(self, message: Meet, ctx: MessageContext) -> None:
        message.mine.set()
        await message.theirs.wait()


async def test_messages_to_one_agent_run_one_at_a_time_in_arrival_order() -> None:
    runtime = LocalRuntime()
    await runtime.register_factory("serial", Serial)
    await runtime.add_subscription(TypeSubscription("steps", "serial"))
    await runtime.start()
    target = AgentId("serial", "x")
    calls = []
    for n in range(60):
        if n % 3 == 0:
            await runtime.publish_message(Step(n), TopicId("steps", "x"))
        else:
            calls.append(asyncio.ensure_future(runtime.send_message(Step(n), target)))
            await asyncio.sleep(0)  # let the request arrive before the next message
    serial = await runtime.get_agent(target)
    results = await asyncio.gather(*calls)
    await runtime.stop_when_idle()
    assert isinstance(serial, Serial)
    assert serial.overlaps == 0
    assert serial.order == list(range(60))
    assert results == [n for n in range(60) if n % 3]


async def test_different_agents_run_concurrently() -> None:
    runtime = LocalRuntime()
    await runtime.register_factory("serial", Serial)
    await runtime.start()
    a_ready, b_ready = asyncio.Event(), asyncio.Event()
    # Each handler waits for the other's: they finish only if they run at the same time.
    await asyncio.wait_for(
        asyncio.gather(
            runtime.send_message(Meet(a_ready, b_ready), AgentId("serial", "a")),
            runtime.send_message(Meet(b_ready, a_ready), AgentId("serial", "b")),
        ),
        timeout=30,
    )
    await runtime.stop()


async def test_idle_agents_hold_no_task_and_no_mailbox() -> None:
    runtime = LocalRuntime()
    await runtime.register_factory("serial", Serial)
    await runtime.add_subscription(TypeSubscription("steps", "serial"))
    await runtime.start()
    for key in range(200):
        await runtime.publish_message(Step(key), TopicId("steps", f"k{key}"))
        await runtime.send_message(Step(key), AgentId("serial", f"k{key}"))
    await runtime.publish_message(Step(0), TopicId("steps", "k0"))
    assert len(runtime._tasks) == 1  # a drain task exists only while events wait
    await runtime.stop_when_idle()
    assert all(task.done() for task in runtime._tasks)
    cells = list(runtime._cells.values())
    assert len(cells) == 200
    assert all(c.mailbox is None and not c.busy for c in cells)


@dataclass
class Spawn:
    go: asyncio.Event
    later: list[asyncio.Task[int]]


@dataclass
class Hold:
    started: asyncio.Event
    release: asyncio.Event


class Spawner(Serial):
    @message_handler
    async def on_spawn(self, message: Spawn, ctx: MessageContext) -> None:
        async def later() -> int:
            await message.go.wait()
            return int(await self.send_message(Step(99), self.id))

        # The task inherits this handler's context, so its request carries this turn as
        # its caller; the turn ends long before the request is sent.
        message.later.append(asyncio.ensure_future(later()))

    @message_handler
    async def on_hold(self, message: Hold, ctx: MessageContext) -> None:
        self.active += 1
        message.started.set()
        await message.release.wait()
        self.order.append(-1)
        self.active -= 1


class _Arrivals(InterventionHandler):
    def __init__(self) -> None:
        self.step = asyncio.Event()

    async def on_send(self, message: Any, ctx: MessageContext, recipient: AgentId) -> Any:
        if isinstance(message, Step):
            self.step.set()  # the request reaches the agent right after this returns
        return message


async def test_a_request_from_a_finished_turn_does_not_reenter_a_later_turn() -> None:
    arrivals = _Arrivals()
    runtime = LocalRuntime(interventions=[arrivals])
    await runtime.register_factory("spawner", Spawner)
    await runtime.start()
    target = AgentId("spawner", "a")
    spawn = Spawn(asyncio.Event(), [])
    await runtime.send_message(spawn, target)
    hold = Hold(asyncio.Event(), asyncio.Event())
    holding = asyncio.ensure_future(runtime.send_message(hold, target))
    await hold.started.wait()
    spawn.go.set()
    await arrivals.step.wait()  # the late request has reached the busy agent
    hold.release.set()
    await holding
    assert await spawn.later[0] == 99
    agent = await runtime.get_agent(target)
    assert isinstance(agent, Spawner)
    assert agent.overlaps == 0
    assert agent.order == [-1, 99]
    await runtime.stop()


_setting: ContextVar[str] = ContextVar("test_setting", default="unset")


@dataclass
class SetVar:
    value: str


class Setter(RoutedAgent):
    @message_handler
    async def on_set(self, message: SetVar, ctx: MessageContext) -> str:
        seen = _setting.get()
        _setting.set(message.value)
        await asyncio.sleep(0)
        return seen


async def test_contextvars_a_handler_sets_do_not_leak_into_the_sender() -> None:
    runtime = LocalRuntime()
    await runtime.register_factory("setter", Setter)
    await runtime.start()
    _setting.set("sender's")
    # The handler sees the sender's values, but what it sets stays in its own turn.
    assert await runtime.send_message(SetVar("handler's"), AgentId("setter", "a")) == "sender's"
    assert _setting.get() == "sender's"
    assert current_context() is None
    await runtime.stop()


@dataclass
class Note:
    tag: str
    pauses: int
    then: str | None = None  # a key to publish a follow-up to, from the handler


class Recorder(RoutedAgent):
    def __init__(self) -> None:
        self.active = 0
        self.overlaps = 0
        self.handled: list[str] = []

    @message_handler
    async def on_note(self, message: Note, ctx: MessageContext) -> str:
        self.active += 1
        self.overlaps += self.active > 1
        for _ in range(message.pauses):
            await asyncio.sleep(0)
        self.handled.append(message.tag)
        self.active -= 1
        if message.then is not None:
            await self.publish_message(Note(f"{message.tag}>", 1), TopicId("notes", message.then))
        return message.tag


class _Arrival(InterventionHandler):
    """Records the order in which messages reach each agent: a message reaches the agent
    right after the interventions return, with no await in between."""

    def __init__(self) -> None:
        self.arrived: dict[str, list[str]] = {}

    async def on_send(self, message: Any, ctx: MessageContext, recipient: AgentId) -> Any:
        self.arrived.setdefault(recipient.key, []).append(message.tag)
        return message

    async def on_publish(self, message: Any, ctx: MessageContext) -> Any:
        assert ctx.topic_id is not None
        if ctx.sender != AgentId("rec", ctx.topic_id.source):  # never to the publisher
            self.arrived.setdefault(ctx.topic_id.source, []).append(message.tag)
        return message


_keys = st.sampled_from(["a", "b", "c"])
_op = st.tuples(
    st.integers(0, 2),  # which task issues it
    st.sampled_from(["send", "send-nowait", "publish", "evict"]),
    _keys,
    st.integers(0, 3),  # pauses of the sender before it, and of the handler
    st.none() | _keys,  # the handler publishes a follow-up to this key
)


@settings(max_examples=120, deadline=None)
@given(ops=st.lists(_op, max_size=24))
async def test_random_interleavings_keep_each_agents_arrival_order(
    ops: list[tuple[int, str, str, int, str | None]],
) -> None:
    arrival = _Arrival()
    runtime = LocalRuntime(interventions=[arrival], store=MemoryStore())
    await runtime.register_factory("rec", Recorder)
    await runtime.add_subscription(TypeSubscription("notes", "rec"))
    await runtime.start()
    handled: dict[str, list[str]] = {}
    overlaps = 0

    def collect(event: RuntimeEvent) -> None:
        nonlocal overlaps
        if isinstance(event, AgentEvicted):
            agent = evicted[event.agent_id]
            handled.setdefault(event.agent_id.key, []).extend(agent.handled)
            overlaps += agent.overlaps

    evicted: dict[AgentId, Recorder] = {}
    runtime.add_listener(collect)
    original_evict = runtime.evict_idle

    async def evict() -> None:
        for agent_id in runtime.live_agents():
            cell = runtime._cells[agent_id]
            if isinstance(cell.agent, Recorder):
                evicted[agent_id] = cell.agent
        await original_evict()

    spawned: list[asyncio.Future[Any]] = []

    async def issue(task: int) -> None:
        for n, (who, kind, key, pauses, then) in enumerate(ops):
            if who != task:
                continue
            for _ in range(pauses):
                await asyncio.sleep(0)
            note = Note(f"{task}.{n}", pauses, then)
            if kind == "send":
                await runtime.send_message(note, AgentId("rec", key))
            elif kind == "send-nowait":
                spawned.append(
                    asyncio.ensure_future(runtime.send_message(note, AgentId("rec", key)))
                )
            elif kind == "publish":
                await runtime.publish_message(note, TopicId("notes", key))
            else:
                await evict()

    await asyncio.wait_for(asyncio.gather(*(issue(t) for t in range(3)), *spawned), 30)
    await asyncio.wait_for(asyncio.gather(*spawned), 30)
    await asyncio.wait_for(runtime.stop_when_idle(), 30)  # bounds a failure (a hang) only
    for agent_id in runtime.live_agents():
        agent = runtime._cells[agent_id].agent
        assert isinstance(agent, Recorder)
        handled.setdefault(agent_id.key, []).extend(agent.handled)
        overlaps += agent.overlaps
    assert overlaps == 0
    assert handled == {key: tags for key, tags in arrival.arrived.items() if tags}


@dataclass
class ReadVar:
    seen: list[str]


class Reader(RoutedAgent):
    @message_handler
    async def on_read(self, message: ReadVar, ctx: MessageContext) -> None:
        message.seen.append(_setting.get())
        _setting.set("set by a subscriber")


async def test_an_event_handler_sees_its_publishers_contextvars_and_keeps_its_own() -> None:
    runtime = LocalRuntime()
    await runtime.register_factory("reader", Reader)
    await runtime.add_subscription(TypeSubscription("reads", "reader"))
    await runtime.start()
    seen: list[str] = []

    async def publish(tenant: str) -> None:
        _setting.set(tenant)
        await runtime.publish_message(ReadVar(seen), TopicId("reads", "k"))

    # Both events queue for one agent, so one drain task handles them in turn.
    await asyncio.gather(publish("tenant-1"), publish("tenant-2"))
    await runtime.stop_when_idle()
    assert seen == ["tenant-1", "tenant-2"]


@dataclass
class Announce:
    release: asyncio.Event


@dataclass
class Query:
    pass


class Registry(RoutedAgent):
    def __init__(self) -> None:
        self.active = 0
        self.overlaps = 0

    @message_handler
    async def on_announce(self, message: Announce, ctx: MessageContext) -> None:
        self.active += 1
        await self.publish_message(Query(), TopicId("hello", "n"))  # creates a newcomer
        await message.release.wait()
        self.active -= 1

    @message_handler
    async def on_query(self, message: Query, ctx: MessageContext) -> str:
        self.active += 1
        self.overlaps += self.active > 1
        self.active -= 1
        return "config"


class _QueryArrival(InterventionHandler):
    def __init__(self) -> None:
        self.arrived = asyncio.Event()

    async def on_send(self, message: Any, ctx: MessageContext, recipient: AgentId) -> Any:
        if isinstance(message, Query):
            self.arrived.set()
        return message


async def test_a_factory_creating_an_agent_for_a_publisher_cannot_reenter_its_turn() -> None:
    arrival = _QueryArrival()
    runtime = LocalRuntime(interventions=[arrival])
    registry = AgentId("registry", "r")

    async def newcomer() -> Recorder:
        # Created by the registry's event, but not part of the registry's call chain.
        assert await runtime.send_message(Query(), registry) == "config"
        return Recorder()

    await runtime.register_factory("registry", Registry)
    await runtime.register_factory("newcomer", newcomer)
    await runtime.add_subscription(TypeSubscription("hello", "newcomer"))
    await runtime.start()
    announce = Announce(asyncio.Event())
    announcing = asyncio.ensure_future(runtime.send_message(announce, registry))
    await arrival.arrived.wait()
    announce.release.set()
    await announcing
    await runtime.stop_when_idle()
    agent = runtime._cells[registry].agent
    assert isinstance(agent, Registry) and agent.overlaps == 0
