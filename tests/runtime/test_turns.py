"""Turn-based agents: one message at a time per AgentId, in arrival order; different
agents run concurrently."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from cantata.runtime import (
    AgentId,
    LocalRuntime,
    MessageContext,
    RoutedAgent,
    TopicId,
    TypeSubscription,
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
