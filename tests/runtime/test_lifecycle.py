"""LocalRuntime lifecycle: start, stop with grace then cancel, stop_when_idle with
cascades, stop_when, close hooks, async context manager."""

from __future__ import annotations

import asyncio
import builtins
from dataclasses import dataclass
from typing import Any

import pytest

from cantata.core import CancelledError, RuntimeStateError
from cantata.runtime import (
    AgentId,
    InterventionHandler,
    LocalRuntime,
    MessageContext,
    RoutedAgent,
    TopicId,
    TypeSubscription,
    message_handler,
)


@dataclass
class Count:
    left: int


@dataclass
class Wait:
    started: asyncio.Event
    release: asyncio.Event
    seen_cancel: asyncio.Event


class Cascade(RoutedAgent):
    handled: list[int] = []
    closed: list[str] = []

    @message_handler
    async def on_count(self, message: Count, ctx: MessageContext) -> None:
        Cascade.handled.append(message.left)
        await asyncio.sleep(0)
        if message.left > 0:
            await self.publish_message(Count(message.left - 1), TopicId("ping", self.id.key))

    @message_handler
    async def on_wait(self, message: Wait, ctx: MessageContext) -> str:
        message.started.set()
        try:
            await message.release.wait()
        except asyncio.CancelledError:
            message.seen_cancel.set()
            raise
        return "finished"

    async def close(self) -> None:
        Cascade.closed.append(str(self.id))


async def _runtime() -> LocalRuntime:
    Cascade.handled, Cascade.closed = [], []
    runtime = LocalRuntime(stop_grace=0.05)
    for name in ("left", "right"):
        await runtime.register_factory(name, Cascade)
        await runtime.add_subscription(TypeSubscription("ping", name))
    return runtime


async def test_messages_need_a_started_runtime() -> None:
    runtime = await _runtime()
    with pytest.raises(RuntimeStateError, match="start"):
        await runtime.send_message(Count(0), AgentId("left", "a"))
    with pytest.raises(RuntimeStateError, match="start"):
        await runtime.publish_message(Count(0), TopicId("ping", "a"))
    with pytest.raises(RuntimeStateError):
        await runtime.stop_when_idle()


async def test_stop_when_idle_waits_for_the_whole_cascade() -> None:
    runtime = await _runtime()
    await runtime.start()
    # Each event goes to the other side only (never back to its publisher).
    await runtime.send_message(Count(30), AgentId("left", "k"))
    await runtime.stop_when_idle()
    assert Cascade.handled == list(range(30, -1, -1))
    assert runtime.state == "stopped"
    with pytest.raises(RuntimeStateError, match="stopped"):
        await runtime.publish_message(Count(1), TopicId("ping", "k"))


async def test_stop_lets_handlers_in_flight_finish_within_the_grace_period() -> None:
    runtime = await _runtime()
    await runtime.start()
    wait = Wait(asyncio.Event(), asyncio.Event(), asyncio.Event())
    call = asyncio.ensure_future(runtime.send_message(wait, AgentId("left", "a")))
    await wait.started.wait()
    stopping = asyncio.ensure_future(runtime.stop(grace=30))
    await asyncio.sleep(0)
    assert runtime.state == "stopping"
    with pytest.raises(RuntimeStateError, match="stopping"):
        await runtime.send_message(Count(0), AgentId("left", "b"))
    wait.release.set()
    assert await call == "finished"
    await stopping
    assert runtime.state == "stopped" and not wait.seen_cancel.is_set()


async def test_stop_cancels_handlers_still_running_after_the_grace_period() -> None:
    runtime = await _runtime()
    await runtime.start()
    direct = Wait(asyncio.Event(), asyncio.Event(), asyncio.Event())
    broadcast = Wait(asyncio.Event(), asyncio.Event(), asyncio.Event())
    call = asyncio.ensure_future(runtime.send_message(direct, AgentId("left", "a")))
    await runtime.publish_message(broadcast, TopicId("ping", "b"))
    await direct.started.wait()
    await broadcast.started.wait()
    await runtime.stop(grace=0.01)
    with pytest.raises(CancelledError, match="runtime stopped"):
        await call
    assert direct.seen_cancel.is_set() and broadcast.seen_cancel.is_set()


async def test_stop_when_predicate_is_checked_after_each_message() -> None:
    runtime = await _runtime()
    await runtime.start()
    await runtime.publish_message(Count(10_000), TopicId("ping", "k"))
    await runtime.stop_when(lambda: len(Cascade.handled) >= 5)
    assert runtime.state == "stopped"
    # Stopping cancelled the cascade soon after the predicate held.
    assert 5 <= len(Cascade.handled) < 100


async def test_close_runs_close_hooks_and_the_runtime_works_as_a_context_manager() -> None:
    runtime = await _runtime()
    async with runtime:
        assert runtime.state == "running"
        await runtime.send_message(Count(0), AgentId("left", "a"))
        await runtime.send_message(Count(0), AgentId("right", "b"))
    assert runtime.state == "closed"
    assert sorted(Cascade.closed) == ["left/a", "right/b"]
    with pytest.raises(RuntimeStateError, match="closed"):
        await runtime.start()


async def test_a_stopped_runtime_can_start_again() -> None:
    runtime = await _runtime()
    await runtime.start()
    await runtime.stop()
    await runtime.start()
    await runtime.send_message(Count(0), AgentId("left", "a"))
    await runtime.stop_when_idle()
    assert Cascade.handled == [0]


async def test_agents_work_again_after_a_stop_that_cancelled_their_handlers() -> None:
    runtime = await _runtime()
    await runtime.start()
    direct = Wait(asyncio.Event(), asyncio.Event(), asyncio.Event())
    broadcast = Wait(asyncio.Event(), asyncio.Event(), asyncio.Event())
    call = asyncio.ensure_future(runtime.send_message(direct, AgentId("left", "a")))
    await runtime.publish_message(broadcast, TopicId("ping", "b"))
    await runtime.publish_message(Count(0), TopicId("ping", "b"))  # queued behind it
    await direct.started.wait()
    await broadcast.started.wait()
    await runtime.stop(grace=0)
    with pytest.raises(CancelledError):
        await call
    await runtime.start()
    await runtime.send_message(Count(0), AgentId("left", "a"))
    await runtime.send_message(Count(0), AgentId("left", "b"))
    await runtime.stop_when_idle()
    assert Cascade.handled == [0, 0]  # the queued event was dropped by the stop


async def test_a_failing_stop_predicate_raises_to_the_waiter() -> None:
    runtime = await _runtime()
    await runtime.start()

    def predicate() -> bool:
        if Cascade.handled:
            raise ValueError("bad predicate")
        return False

    waiter = asyncio.ensure_future(runtime.stop_when(predicate))
    await asyncio.sleep(0)
    await runtime.publish_message(Count(0), TopicId("ping", "k"))
    with pytest.raises(ValueError, match="bad predicate"):
        await waiter
    await runtime.stop()


async def test_wait_until_idle_waits_for_the_cascade_and_keeps_running() -> None:
    runtime = await _runtime()
    await runtime.start()
    await runtime.publish_message(Count(10), TopicId("ping", "k"))
    await runtime.wait_until_idle()
    assert len(Cascade.handled) == 22  # both sides hear the first event, then it alternates
    assert runtime.state == "running"
    await runtime.send_message(Count(0), AgentId("left", "k"))
    await runtime.wait_until_idle()
    assert Cascade.handled[-1] == 0
    await runtime.close()


@dataclass
class StopNow:
    pass


class Stopper(RoutedAgent):
    finished: list[str] = []
    done = asyncio.Event()

    @message_handler
    async def on_stop(self, message: StopNow, ctx: MessageContext) -> str:
        await self.runtime.stop()
        Stopper.finished.append(str(self.id))
        Stopper.done.set()
        return "stopped"


async def test_stop_from_inside_a_handler_does_not_wait_for_that_handler() -> None:
    Stopper.finished = []
    runtime = LocalRuntime(stop_grace=3600)
    await runtime.register_factory("stopper", Stopper)
    await runtime.start()
    # With a grace of an hour, a stop waiting for its own handler would hang; the
    # timeout only bounds a failure of this test.
    reply = await asyncio.wait_for(runtime.send_message(StopNow(), AgentId("stopper", "a")), 30)
    assert reply == "stopped" and Stopper.finished == ["stopper/a"]
    assert runtime.state == "stopped"
    await runtime.start()  # not stuck in "stopping"
    await runtime.close()


async def test_stop_from_an_event_handler_finishes_the_stop() -> None:
    Stopper.finished = []
    runtime = LocalRuntime(stop_grace=0.01)
    await runtime.register_factory("stopper", Stopper)
    await runtime.add_subscription(TypeSubscription("halt", "stopper"))
    await runtime.start()
    Stopper.done = asyncio.Event()
    await runtime.publish_message(StopNow(), TopicId("halt", "a"))
    await asyncio.wait_for(Stopper.done.wait(), 30)  # bounds a failure (a stuck stop) only
    await asyncio.gather(*runtime._tasks)  # the drain task ends after its handler
    assert Stopper.finished == ["stopper/a"]
    assert runtime.state == "stopped" and runtime._pending == 0
    await runtime.close()


async def test_close_during_a_stop_waits_for_it_and_stays_closed() -> None:
    runtime = await _runtime()
    await runtime.start()
    order: list[str] = []
    wait = Wait(asyncio.Event(), asyncio.Event(), asyncio.Event())
    call = asyncio.ensure_future(runtime.send_message(wait, AgentId("left", "a")))
    await wait.started.wait()
    stopping = asyncio.ensure_future(runtime.stop(grace=30))
    closing = asyncio.ensure_future(runtime.close())
    wait.release.set()
    assert await call == "finished"
    order.append("handler finished")
    await asyncio.gather(stopping, closing)
    order.extend(Cascade.closed)
    assert order == ["handler finished", "left/a"]  # close hooks ran after the handler
    assert runtime.state == "closed"
    with pytest.raises(RuntimeStateError, match="closed"):
        await runtime.start()


class _Gate(InterventionHandler):
    """Holds every message in its intervention until the gate opens."""

    def __init__(self) -> None:
        self.holding = asyncio.Event()
        self.gate = asyncio.Event()

    async def on_send(self, message: Any, ctx: MessageContext, recipient: AgentId) -> Any:
        self.holding.set()
        await self.gate.wait()
        return message

    async def on_publish(self, message: Any, ctx: MessageContext) -> Any:
        self.holding.set()
        await self.gate.wait()
        return message


@pytest.mark.parametrize("kind", ["publish", "send"])
async def test_a_message_held_by_an_intervention_is_not_delivered_after_stop(kind: str) -> None:
    runtime = await _runtime()
    gate = _Gate()
    runtime.add_intervention(gate)
    await runtime.start()
    if kind == "publish":
        pending = runtime.publish_message(Count(0), TopicId("ping", "k"))
    else:
        pending = runtime.send_message(Count(0), AgentId("left", "k"))
    held = asyncio.ensure_future(pending)
    await gate.holding.wait()
    await runtime.stop()
    gate.gate.set()
    with pytest.raises(RuntimeStateError, match="stopped"):
        await held
    assert Cascade.handled == []
    assert all(task.done() for task in runtime._tasks)
    assert runtime._pending == 0


@dataclass
class Conduct:
    pass


class Conductor(RoutedAgent):
    @message_handler
    async def on_conduct(self, message: Conduct, ctx: MessageContext) -> int:
        await self.publish_message(Count(5), TopicId("ping", "k"))
        # Idle means: everything but this handler's own call chain is done.
        await self.runtime.stop_when_idle()
        return len(Cascade.handled)


async def test_stop_when_idle_from_inside_a_handler_waits_for_the_rest_then_stops() -> None:
    runtime = await _runtime()
    await runtime.register_factory("conductor", Conductor)
    await runtime.start()
    # The timeout only bounds a failure of this test (waiting for its own handler).
    handled = await asyncio.wait_for(runtime.send_message(Conduct(), AgentId("conductor", "c")), 30)
    assert handled == 12  # both sides hear the first event, then it alternates down to 0
    assert runtime.state == "stopped"


async def test_a_stop_cancelled_during_its_grace_period_still_cancels_what_runs() -> None:
    runtime = await _runtime()
    await runtime.start()
    direct = Wait(asyncio.Event(), asyncio.Event(), asyncio.Event())
    broadcast = Wait(asyncio.Event(), asyncio.Event(), asyncio.Event())
    call = asyncio.ensure_future(runtime.send_message(direct, AgentId("left", "a")))
    await runtime.publish_message(broadcast, TopicId("ping", "b"))
    await direct.started.wait()
    await broadcast.started.wait()
    # The caller gives up on the stop long before its grace period ends.
    with pytest.raises(builtins.TimeoutError):
        await asyncio.wait_for(runtime.stop(grace=3600), 0.01)
    assert runtime.state == "stopped"
    with pytest.raises(CancelledError):
        await asyncio.wait_for(call, 30)  # the timeout bounds a failure (a leak) only
    await asyncio.wait_for(broadcast.seen_cancel.wait(), 30)
    await asyncio.gather(*runtime._tasks)
