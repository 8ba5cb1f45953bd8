"""RoutedAgent dispatch: by exact type, subclass, union, pydantic; rpc-only and event-only
handlers; CantHandle; lazy creation from factories; registered instances."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import BaseModel

from cantata.core import CantHandle, ConfigurationError, RuntimeStateError, Undeliverable
from cantata.runtime import (
    AgentId,
    BaseAgent,
    DeliveryFailed,
    LocalRuntime,
    MessageContext,
    RoutedAgent,
    TopicId,
    TypeSubscription,
    event,
    message_handler,
    rpc,
)


@dataclass
class Shape:
    name: str


@dataclass
class Square(Shape):
    side: int = 1


@dataclass
class Num:
    value: int


@dataclass
class Word:
    text: str


class Order(BaseModel):
    order_id: str
    qty: int


@dataclass
class Ask:
    q: str


@dataclass
class Tell:
    what: str


class Router(RoutedAgent):
    def __init__(self) -> None:
        self.events: list[Any] = []

    @message_handler
    async def on_shape(self, message: Shape, ctx: MessageContext) -> str:
        return f"shape:{message.name}"

    @message_handler
    async def on_num_or_word(self, message: Num | Word, ctx: MessageContext) -> str:
        return f"union:{type(message).__name__}"

    @message_handler
    async def on_order(self, message: Order, ctx: MessageContext) -> int:
        return message.qty * 2

    @rpc
    async def on_ask(self, message: Ask, ctx: MessageContext) -> str:
        return f"answer:{message.q}"

    @event
    async def on_tell(self, message: Tell, ctx: MessageContext) -> None:
        self.events.append(message.what)


class SpecialRouter(Router):
    @rpc
    async def on_square(self, message: Square, ctx: MessageContext) -> str:
        return f"square:{message.side}"


async def _runtime(*types: tuple[str, Any]) -> LocalRuntime:
    runtime = LocalRuntime()
    for name, factory in types:
        await runtime.register_factory(name, factory)
    await runtime.start()
    return runtime


async def test_dispatch_by_type_subclass_union_and_pydantic() -> None:
    runtime = await _runtime(("router", Router))
    to = AgentId("router", "a")
    assert await runtime.send_message(Shape("s"), to) == "shape:s"
    assert await runtime.send_message(Square("q", 3), to) == "shape:q"  # subclass via MRO
    assert await runtime.send_message(Num(1), to) == "union:Num"
    assert await runtime.send_message(Word("w"), to) == "union:Word"
    assert await runtime.send_message(Order(order_id="o", qty=4), to) == 8
    await runtime.stop()


async def test_subclass_agent_inherits_handlers_and_adds_more_specific_ones() -> None:
    runtime = await _runtime(("special", SpecialRouter))
    to = AgentId("special", "a")
    assert await runtime.send_message(Square("q", 3), to) == "square:3"
    assert await runtime.send_message(Shape("s"), to) == "shape:s"
    await runtime.stop()


async def test_rpc_handler_takes_no_events_and_event_handler_takes_no_requests() -> None:
    runtime = await _runtime(("router", Router))
    await runtime.add_subscription(TypeSubscription("chat", "router"))
    to = AgentId("router", "k")
    assert await runtime.send_message(Ask("x"), to) == "answer:x"
    with pytest.raises(CantHandle, match=r"router/k.*Tell.*@event"):
        await runtime.send_message(Tell("direct"), to)
    await runtime.publish_message(Ask("ignored"), TopicId("chat", "k"))
    await runtime.publish_message(Tell("broadcast"), TopicId("chat", "k"))
    await runtime.stop_when_idle()
    agent = runtime._cells[to].agent
    assert isinstance(agent, Router)
    assert agent.events == ["broadcast"]


async def test_unhandled_direct_message_raises_cant_handle_naming_the_agent() -> None:
    runtime = await _runtime(("router", Router))
    with pytest.raises(CantHandle, match=r"router/z .*int"):
        await runtime.send_message(42, AgentId("router", "z"))
    await runtime.stop()


async def test_unhandled_event_is_ignored_without_failure() -> None:
    failures: list[DeliveryFailed] = []
    runtime = LocalRuntime(on_error=failures.append)
    await runtime.register_factory("router", Router)
    await runtime.add_subscription(TypeSubscription("chat", "router"))
    await runtime.start()
    await runtime.publish_message(42, TopicId("chat", "k"))
    await runtime.stop_when_idle()
    assert failures == []
    assert AgentId("router", "k") in runtime.live_agents()


def test_two_handlers_of_one_kind_for_one_type_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="two rpc handlers for Num"):

        class _Twice(RoutedAgent):
            @message_handler
            async def a(self, message: Num, ctx: MessageContext) -> None: ...

            @rpc
            async def b(self, message: Num, ctx: MessageContext) -> None: ...

            @rpc
            async def c(self, message: Num, ctx: MessageContext) -> None: ...


def test_handler_needs_an_annotation_and_async_def() -> None:
    with pytest.raises(ConfigurationError, match="needs a type annotation"):

        class _Bare(RoutedAgent):
            @message_handler
            async def a(self, message, ctx: MessageContext) -> None: ...  # type: ignore[no-untyped-def]

    with pytest.raises(ConfigurationError, match="async def"):
        message_handler(lambda self, m, c: None)  # type: ignore[arg-type, return-value]


class Counter(BaseAgent):
    created = 0

    def __init__(self) -> None:
        Counter.created += 1

    async def on_message(self, message: Any, ctx: MessageContext) -> Any:
        return (str(self.id), message)


async def test_agents_are_created_lazily_once_per_id() -> None:
    Counter.created = 0
    runtime = await _runtime(("counter", Counter))
    assert Counter.created == 0
    assert await runtime.send_message(1, AgentId("counter", "a")) == ("counter/a", 1)
    await runtime.send_message(2, AgentId("counter", "a"))
    assert Counter.created == 1
    await runtime.send_message(3, AgentId("counter", "b"))
    assert Counter.created == 2
    await runtime.stop()


async def test_async_factory_creates_the_agent_before_the_first_message() -> None:
    async def make() -> Counter:
        await asyncio.sleep(0)
        return Counter()

    runtime = await _runtime(("counter", make))
    results = await asyncio.gather(
        *(runtime.send_message(i, AgentId("counter", "a")) for i in range(3))
    )
    assert results == [("counter/a", 0), ("counter/a", 1), ("counter/a", 2)]
    await runtime.stop()


async def test_factory_error_reaches_the_sender() -> None:
    def broken() -> BaseAgent:
        raise ValueError("no database")

    runtime = await _runtime(("broken", broken))
    with pytest.raises(ValueError, match="no database"):
        await runtime.send_message(1, AgentId("broken", "a"))
    assert runtime.live_agents() == []
    await runtime.stop()


async def test_registered_instance_gets_messages_and_unknown_keys_are_undeliverable() -> None:
    runtime = await _runtime()
    agent = Counter()
    await runtime.register_instance(agent, AgentId("fixed", "one"))
    assert await runtime.send_message("hi", AgentId("fixed", "one")) == ("fixed/one", "hi")
    with pytest.raises(Undeliverable, match=r"fixed/two.*only registered instances"):
        await runtime.send_message("hi", AgentId("fixed", "two"))
    with pytest.raises(ConfigurationError, match="already registered"):
        await runtime.register_instance(Counter(), AgentId("fixed", "one"))
    await runtime.stop()


async def test_unknown_agent_type_is_undeliverable_with_the_fix() -> None:
    runtime = await _runtime()
    with pytest.raises(Undeliverable, match=r"'ghost'.*register_factory\('ghost'"):
        await runtime.send_message(1, AgentId("ghost", "a"))
    await runtime.stop()


async def test_factory_that_returns_no_agent_is_a_configuration_error() -> None:
    runtime = await _runtime(("odd", lambda: object()))
    for _ in range(2):  # the failed creation leaves nothing behind
        with pytest.raises(ConfigurationError, match="not a BaseAgent"):
            await runtime.send_message(1, AgentId("odd", "a"))
    assert runtime.live_agents() == []
    await runtime.stop()


def test_unbound_agent_says_how_to_bind_it() -> None:
    with pytest.raises(RuntimeStateError, match="not bound"):
        _ = Counter().id


class CatchAll(RoutedAgent):
    @message_handler
    async def on_num(self, message: Num, ctx: MessageContext) -> str:
        return "num"

    @message_handler
    async def on_anything(self, message: Any, ctx: MessageContext) -> str:
        return f"any:{type(message).__name__}"


async def test_an_any_handler_takes_what_no_specific_handler_takes() -> None:
    runtime = await _runtime(("all", CatchAll))
    to = AgentId("all", "a")
    assert await runtime.send_message(Num(1), to) == "num"
    assert await runtime.send_message("text", to) == "any:str"
    assert await runtime.send_message(Square("s"), to) == "any:Square"
    await runtime.stop()


async def test_an_async_factory_failure_is_reported_for_queued_events() -> None:
    async def broken() -> BaseAgent:
        await asyncio.sleep(0)
        raise ValueError("cannot connect")

    failures: list[DeliveryFailed] = []
    runtime = LocalRuntime(on_error=failures.append)
    await runtime.register_factory("broken", broken)
    await runtime.add_subscription(TypeSubscription("jobs", "broken"))
    await runtime.start()
    await runtime.publish_message(Tell("a"), TopicId("jobs", "k"))
    await runtime.publish_message(Tell("b"), TopicId("jobs", "k"))
    await runtime.stop_when_idle()
    assert [(str(f.agent_id), f.message, str(f.error)) for f in failures] == [
        ("broken/k", Tell("a"), "cannot connect"),
        ("broken/k", Tell("b"), "cannot connect"),
    ]
    assert runtime.live_agents() == []


class OtherCounter(Counter):
    pass


async def test_instances_of_two_classes_under_one_type_are_refused_naming_both() -> None:
    runtime = await _runtime()
    await runtime.register_instance(Counter(), AgentId("fixed", "one"))
    with pytest.raises(
        ConfigurationError, match=r"'fixed' is Counter.*fixed/two is a OtherCounter"
    ):
        await runtime.register_instance(OtherCounter(), AgentId("fixed", "two"))
    await runtime.register_instance(Counter(), AgentId("fixed", "two"))  # same class: fine
    await runtime.stop()


async def test_a_factory_that_makes_another_class_than_declared_is_refused() -> None:
    made = iter([Counter(), OtherCounter()])
    runtime = await _runtime(("mixed", lambda: next(made)), ("declared", Router))
    assert await runtime.send_message(1, AgentId("mixed", "a")) == ("mixed/a", 1)
    with pytest.raises(
        ConfigurationError, match=r"'mixed' is Counter.*factory made a OtherCounter"
    ):
        await runtime.send_message(1, AgentId("mixed", "b"))
    await runtime.register_factory("liar", lambda: Counter(), agent_class=Router)
    with pytest.raises(ConfigurationError, match=r"'liar' is Router.*made a Counter"):
        await runtime.send_message(1, AgentId("liar", "a"))
    with pytest.raises(ConfigurationError, match="not a BaseAgent subclass"):
        await runtime.register_factory("bad", lambda: Counter(), agent_class=int)  # type: ignore[arg-type]
    await runtime.stop()


async def test_agents_take_their_description_in_the_constructor_as_autogen_does() -> None:
    class Echo(RoutedAgent):
        def __init__(self) -> None:
            super().__init__("repeats what it is sent")

        @rpc
        async def on_num(self, message: Num, ctx: MessageContext) -> int:
            return message.value

    class Plain(BaseAgent):
        pass

    assert Echo().description == "repeats what it is sent"
    assert Plain().description == ""
    assert BaseAgent("a base").description == "a base"
    runtime = await _runtime(("echo", Echo))
    assert await runtime.send_message(Num(3), AgentId("echo", "a")) == 3
    await runtime.stop()
