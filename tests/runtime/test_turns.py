"""Turn-based agents: one message at a time per AgentId, in arrival order; different
agents run concurrently."""

from __future__ import annotations

import asyncio
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from cantata.runtime import (
    AgentId,
    InterventionHandler,
    LocalRuntime,
    MessageContext,
    RoutedAgent,
    TopicId,
    TypeSubscription,
    current_context,
    message_handler,
)


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
