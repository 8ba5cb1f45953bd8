"""Direct requests and broadcast events: results, typed errors, timeouts, cancellation,
no self-delivery, failure reporting, and the envelope with causation."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest

from cantata.core import (
    CancellationToken,
    CancelledError,
    ConfigurationError,
    RunError,
    TimeoutError,
    UnknownTypeError,
    register,
)
from cantata.runtime import (
    AgentId,
    DeliveryFailed,
    LocalRuntime,
    MessageContext,
    RoutedAgent,
    RuntimeEvent,
    TopicId,
    TypeSubscription,
    current_context,
    message_handler,
    register_closure,
)


class Boom(RunError):
    pass


@dataclass
class Hang:
    started: asyncio.Event
    seen_cancel: asyncio.Event
    token_cancelled: list[bool] = field(default_factory=list)


@dataclass
class Fail:
    why: str


@dataclass
class Relay:
    to: AgentId | None = None
    topic: TopicId | None = None


@dataclass
class Post:
    text: str


@dataclass
class Log:
    contexts: list[tuple[str, MessageContext]] = field(default_factory=list)


LOG = Log()


class Worker(RoutedAgent):
    @message_handler
    async def on_hang(self, message: Hang, ctx: MessageContext) -> None:
        message.started.set()
        try:
            await asyncio.Event().wait()  # never fires
        except asyncio.CancelledError:
            message.token_cancelled.append(ctx.cancellation_token.is_cancelled)
            message.seen_cancel.set()
            raise

    @message_handler
    async def on_fail(self, message: Fail, ctx: MessageContext) -> None:
        raise Boom(message.why)

    @message_handler
    async def on_relay(self, message: Relay, ctx: MessageContext) -> str:
        LOG.contexts.append((str(self.id), ctx))
        if message.to is not None:
            return str(await self.send_message(Relay(), message.to))
        if message.topic is not None:
            await self.publish_message(Post("from relay"), message.topic)
        return "done"

    @message_handler
    async def on_post(self, message: Post, ctx: MessageContext) -> None:
        LOG.contexts.append((str(self.id), ctx))
        if message.text == "explode":
            raise Boom(f"{self.id} exploded")


async def _runtime(**options: Any) -> LocalRuntime:
    runtime = LocalRuntime(**options)
    await runtime.register_factory("worker", Worker)
    await runtime.start()
    return runtime


async def test_send_returns_the_result_and_raises_the_handlers_typed_error() -> None:
    runtime = await _runtime()
    assert await runtime.send_message(Relay(), AgentId("worker", "a")) == "done"
    with pytest.raises(Boom, match="disk full"):
        await runtime.send_message(Fail("disk full"), AgentId("worker", "a"))
    await runtime.stop()


async def test_timeout_raises_and_the_handler_sees_the_cancellation() -> None:
    runtime = await _runtime()
    hang = Hang(asyncio.Event(), asyncio.Event())
    with pytest.raises(TimeoutError, match=r"worker/a.*within 0.05s"):
        await runtime.send_message(hang, AgentId("worker", "a"), timeout=0.05)
    assert hang.seen_cancel.is_set()
    assert hang.token_cancelled == [True]  # the handler's token is cancelled as well
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]
    # The agent's turn was released: it takes the next message.
    assert await runtime.send_message(Relay(), AgentId("worker", "a")) == "done"
    await runtime.stop()


async def test_cancelling_the_callers_token_cancels_the_handler() -> None:
    runtime = await _runtime()
    hang = Hang(asyncio.Event(), asyncio.Event())
    token = CancellationToken()
    call = asyncio.ensure_future(
        runtime.send_message(hang, AgentId("worker", "a"), cancellation_token=token)
    )
    await hang.started.wait()
    token.cancel()
    with pytest.raises(CancelledError, match=r"worker/a.*CancellationToken"):
        await call
    assert hang.seen_cancel.is_set()
    await runtime.stop()


async def test_a_request_waiting_for_its_turn_can_time_out_without_running() -> None:
    runtime = await _runtime()
    first = Hang(asyncio.Event(), asyncio.Event())
    busy = asyncio.ensure_future(runtime.send_message(first, AgentId("worker", "a")))
    await first.started.wait()
    with pytest.raises(TimeoutError):
        await runtime.send_message(Relay(), AgentId("worker", "a"), timeout=0.02)
    busy.cancel()
    with pytest.raises(asyncio.CancelledError):
        await busy
    assert await runtime.send_message(Relay(), AgentId("worker", "a")) == "done"
    await runtime.stop()


async def test_publish_reaches_every_subscriber_but_never_the_publisher() -> None:
    LOG.contexts.clear()
    runtime = await _runtime()
    for name in ("w1", "w2", "w3"):
        await runtime.register_factory(name, Worker)
        await runtime.add_subscription(TypeSubscription("room", name))
    await runtime.send_message(Relay(topic=TopicId("room", "k")), AgentId("w1", "k"))
    await runtime.stop_when_idle()
    got = sorted(agent for agent, ctx in LOG.contexts if not ctx.is_rpc)
    assert got == ["w2/k", "w3/k"]


async def test_a_failing_subscriber_is_reported_and_does_not_block_the_others() -> None:
    LOG.contexts.clear()
    hooked: list[DeliveryFailed] = []
    heard: list[RuntimeEvent] = []
    runtime = await _runtime(on_error=hooked.append)
    runtime.add_listener(heard.append)
    for name in ("w1", "w2"):
        await runtime.register_factory(name, Worker)
        await runtime.add_subscription(TypeSubscription("room", name))
    await runtime.add_subscription(TypeSubscription("room", "worker"))
    await runtime.publish_message(Post("explode"), TopicId("room", "r"))
    await runtime.publish_message(Post("after"), TopicId("room", "r"))
    await runtime.stop_when_idle()
    assert len(hooked) == 3
    assert {str(f.agent_id) for f in hooked} == {"w1/r", "w2/r", "worker/r"}
    assert all(isinstance(f.error, Boom) for f in hooked)
    assert [e for e in heard if isinstance(e, DeliveryFailed)] == hooked
    after = [agent for agent, ctx in LOG.contexts if ctx.message_id != hooked[0].context.message_id]
    assert sorted(after) == ["w1/r", "w2/r", "worker/r"]


async def test_publish_to_an_unregistered_subscriber_type_is_reported() -> None:
    hooked: list[DeliveryFailed] = []
    runtime = await _runtime(on_error=hooked.append)
    await runtime.add_subscription(TypeSubscription("room", "ghost"))
    await runtime.publish_message(Post("x"), TopicId("room", "r"))
    await runtime.stop_when_idle()
    assert [str(f.agent_id) for f in hooked] == ["ghost/r"]


async def test_envelope_carries_ids_sender_topic_and_causation_through_handlers() -> None:
    LOG.contexts.clear()
    runtime = await _runtime()
    await runtime.register_factory("listener", Worker)
    await runtime.add_subscription(TypeSubscription("news", "listener"))
    root = await runtime.send_message(
        Relay(to=AgentId("worker", "b")), AgentId("worker", "a"), message_id="root-1"
    )
    assert root == "done"
    await runtime.send_message(Relay(topic=TopicId("news", "n")), AgentId("worker", "c"))
    await runtime.stop_when_idle()
    by_agent = {agent: ctx for agent, ctx in LOG.contexts}
    a, b = by_agent["worker/a"], by_agent["worker/b"]
    assert (a.message_id, a.correlation_id, a.causation_id, a.sender) == (
        "root-1",
        "root-1",
        None,
        None,
    )
    assert a.is_rpc and a.topic_id is None and a.timestamp > 0
    assert (b.causation_id, b.correlation_id, b.sender) == ("root-1", "root-1", a.recipient)
    c, heard = by_agent["worker/c"], by_agent["listener/n"]
    assert heard.causation_id == c.message_id and heard.correlation_id == c.correlation_id
    assert heard.sender == AgentId("worker", "c") and heard.topic_id == TopicId("news", "n")
    assert not heard.is_rpc and heard.recipient == AgentId("listener", "n")
    assert current_context() is None


class Ping(RoutedAgent):
    @message_handler
    async def on_relay(self, message: Relay, ctx: MessageContext) -> str:
        if message.to is None:
            return f"{self.id} answered"
        return str(await self.send_message(Relay(), message.to))


async def test_a_call_chain_may_come_back_to_a_waiting_agent_without_deadlock() -> None:
    runtime = LocalRuntime()
    await runtime.register_factory("ping", Ping)
    await runtime.start()
    a = AgentId("ping", "a")
    # a asks back/b; its handler asks a, which answers inside a's waiting turn. The
    # timeout only bounds a failure of this test (a deadlock); it is never reached.
    await runtime.register_factory("back", lambda: _Back(a))
    reply = await runtime.send_message(Relay(to=AgentId("back", "b")), a, timeout=30)
    assert reply == "ping/a answered"
    await runtime.stop()


class _Back(Ping):
    def __init__(self, target: AgentId) -> None:
        self.target = target

    @message_handler
    async def on_relay(self, message: Relay, ctx: MessageContext) -> str:
        return str(await self.send_message(Relay(), self.target))


async def test_addresses_must_be_ids_and_a_cancelled_token_sends_nothing() -> None:
    LOG.contexts.clear()
    runtime = await _runtime()
    with pytest.raises(ConfigurationError, match="not an AgentId"):
        await runtime.send_message(Relay(), ("worker", "a"))  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="not a TopicId"):
        await runtime.publish_message(Post("x"), "room")  # type: ignore[arg-type]
    token = CancellationToken()
    token.cancel()
    with pytest.raises(CancelledError, match="already cancelled"):
        await runtime.send_message(Relay(), AgentId("worker", "a"), cancellation_token=token)
    assert LOG.contexts == []
    await runtime.stop()


async def test_the_runtime_default_timeout_applies_to_every_request() -> None:
    runtime = await _runtime(default_timeout=0.02)
    hang = Hang(asyncio.Event(), asyncio.Event())
    with pytest.raises(TimeoutError, match=r"within 0\.02s"):
        await runtime.send_message(hang, AgentId("worker", "a"))
    assert hang.seen_cancel.is_set()
    await runtime.stop()


@register(name="tests.runtime.Bag")
@dataclass
class Bag:
    items: list[str]


class Keeper(RoutedAgent):
    @message_handler
    async def on_bag(self, message: Bag, ctx: MessageContext) -> Bag:
        message.items.append("touched by the handler")
        return message


@dataclass
class Unregistered:
    x: int


async def test_serialize_messages_copies_values_and_refuses_unregistered_types() -> None:
    runtime = LocalRuntime(serialize_messages=True)
    await runtime.register_factory("keeper", Keeper)
    await runtime.start()
    sent = Bag(["mine"])
    reply = await runtime.send_message(sent, AgentId("keeper", "a"))
    assert sent == Bag(["mine"])  # the handler worked on its own copy
    assert reply == Bag(["mine", "touched by the handler"]) and reply is not sent
    with pytest.raises(UnknownTypeError, match="Unregistered"):
        await runtime.send_message(Unregistered(1), AgentId("keeper", "a"))
    await runtime.stop()


async def test_a_subscriber_whose_factory_fails_is_reported_and_does_not_block_the_others() -> None:
    LOG.contexts.clear()
    hooked: list[DeliveryFailed] = []
    runtime = await _runtime(on_error=hooked.append)

    def broken() -> Worker:
        raise ValueError("no config for this tenant")

    await runtime.register_factory("broken", broken)
    for name in ("broken", "worker"):
        await runtime.add_subscription(TypeSubscription("room", name))
    await runtime.publish_message(Post("hello"), TopicId("room", "r"))
    await runtime.stop_when_idle()
    assert [(str(f.agent_id), type(f.error)) for f in hooked] == [("broken/r", ValueError)]
    assert [agent for agent, _ in LOG.contexts] == ["worker/r"]


@dataclass
class Forward:
    to: AgentId
    inner: Hang


class Forwarder(RoutedAgent):
    @message_handler
    async def on_forward(self, message: Forward, ctx: MessageContext) -> None:
        await self.send_message(message.inner, message.to)


async def test_a_timeout_cancels_the_tokens_of_the_requests_its_handler_is_waiting_on() -> None:
    runtime = await _runtime()
    await runtime.register_factory("forwarder", Forwarder)
    hang = Hang(asyncio.Event(), asyncio.Event())
    with pytest.raises(TimeoutError):
        await runtime.send_message(
            Forward(AgentId("worker", "a"), hang), AgentId("forwarder", "f"), timeout=0.02
        )
    assert hang.token_cancelled == [True]  # the inner handler's token says so too
    await runtime.stop()


async def test_requests_that_give_up_waiting_leave_nothing_in_a_busy_agents_mailbox() -> None:
    runtime = await _runtime()
    hang = Hang(asyncio.Event(), asyncio.Event())
    busy = asyncio.ensure_future(runtime.send_message(hang, AgentId("worker", "a")))
    await hang.started.wait()
    for _ in range(50):
        with pytest.raises(TimeoutError):
            await runtime.send_message(Relay(), AgentId("worker", "a"), timeout=0)
    assert not runtime._cells[AgentId("worker", "a")].mailbox  # bounded by live waiters
    busy.cancel()
    with pytest.raises(asyncio.CancelledError):
        await busy
    assert await runtime.send_message(Relay(), AgentId("worker", "a")) == "done"
    await runtime.stop()


@dataclass
class GiveUp:
    pass


class Quitter(RoutedAgent):
    @message_handler
    async def on_give_up(self, message: GiveUp, ctx: MessageContext) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        future.cancel()
        await future  # raises asyncio.CancelledError, though nobody cancelled this task


async def test_a_handler_that_raises_cancelled_error_itself_is_a_failure_not_a_cancellation() -> (
    None
):
    LOG.contexts.clear()
    hooked: list[DeliveryFailed] = []
    runtime = await _runtime(on_error=hooked.append)
    await runtime.register_factory("quitter", Quitter)
    await runtime.add_subscription(TypeSubscription("room", "quitter"))
    with pytest.raises(CancelledError, match="quitter/a"):  # typed, not asyncio's
        await runtime.send_message(GiveUp(), AgentId("quitter", "a"))
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]
    await runtime.publish_message(GiveUp(), TopicId("room", "r"))
    await runtime.stop_when_idle()
    assert [(str(f.agent_id), type(f.error)) for f in hooked] == [
        ("quitter/r", asyncio.CancelledError)
    ]


async def test_a_publisher_that_never_awaits_gives_way_to_its_subscribers() -> None:
    published = 0
    seen_at: list[int] = []

    async def note(message: int, ctx: MessageContext) -> None:
        seen_at.append(published)

    runtime = LocalRuntime()
    for s in range(10):
        await register_closure(runtime, f"sub{s}", note, subscriptions=["flood"])
    await runtime.start()
    for i in range(5_000):
        await runtime.publish_message(i, TopicId("flood", "k"))
        published += 1
    await runtime.stop_when_idle()
    assert len(seen_at) == 50_000
    # the subscribers ran while the loop went on: the backlog stays bounded
    assert seen_at[0] < 1_000
