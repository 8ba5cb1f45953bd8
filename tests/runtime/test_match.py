"""Routing by value: `match=` on the handler decorators, handler chains tried in order."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import pytest

from cantata.core import CantHandle, ConfigurationError
from cantata.runtime import (
    AgentId,
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
class Job:
    kind: str
    size: int = 0


@dataclass
class UrgentJob(Job):
    pass


class Dispatcher(RoutedAgent):
    def __init__(self) -> None:
        self.seen: list[str] = []

    @message_handler(match=lambda m, ctx: m.kind == "print")
    async def printing(self, message: Job, ctx: MessageContext) -> str:
        self.seen.append("printing")
        return "printed"

    @message_handler(match=lambda m, ctx: m.size > 10)
    async def big(self, message: Job, ctx: MessageContext) -> str:
        self.seen.append("big")
        return "big"

    @event(match=lambda m, ctx: m.kind == "log")
    async def logging_(self, message: Job, ctx: MessageContext) -> None:
        self.seen.append("log")


class WithFallback(Dispatcher):
    @rpc(match=lambda m, ctx: m.kind == "print" and m.size == 0)
    async def empty_print(self, message: Job, ctx: MessageContext) -> str:
        return "nothing to print"

    @rpc
    async def rest(self, message: Job, ctx: MessageContext) -> str:
        return f"rest:{message.kind}"


async def _runtime(*types: tuple[str, type[RoutedAgent]], **options: object) -> LocalRuntime:
    runtime = LocalRuntime(**options)  # type: ignore[arg-type]
    for name, cls in types:
        await runtime.register_factory(name, cls)
        await runtime.add_subscription(TypeSubscription("jobs", name))
    await runtime.start()
    return runtime


async def test_the_first_handler_whose_match_accepts_takes_the_message() -> None:
    runtime = await _runtime(("d", Dispatcher))
    to = AgentId("d", "a")
    assert await runtime.send_message(Job("print", 50), to) == "printed"  # both match: first
    assert await runtime.send_message(Job("copy", 50), to) == "big"
    assert await runtime.send_message(UrgentJob("copy", 11), to) == "big"  # subclass too
    await runtime.stop()


async def test_a_direct_message_no_match_accepts_is_cant_handle_naming_the_handlers() -> None:
    runtime = await _runtime(("d", Dispatcher))
    with pytest.raises(CantHandle, match=r"d/a.*Job.*printing, big.*match="):
        await runtime.send_message(Job("copy", 1), AgentId("d", "a"))
    await runtime.stop()


async def test_a_broadcast_no_match_accepts_is_ignored_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    failures: list[DeliveryFailed] = []
    runtime = await _runtime(("d", Dispatcher), on_error=failures.append)
    with caplog.at_level(logging.INFO, logger="cantata.runtime"):
        await runtime.publish_message(Job("copy", 1), TopicId("jobs", "a"))
        await runtime.publish_message(Job("log", 1), TopicId("jobs", "a"))
        await runtime.stop_when_idle()
    agent = await runtime.get_agent(AgentId("d", "a"))
    assert isinstance(agent, Dispatcher)
    assert agent.seen == ["log"]  # @event's match; the others were tried first and declined
    assert failures == []
    assert any("no handler's match= took broadcast Job" in r.message for r in caplog.records)


async def test_subclass_handlers_are_tried_first_and_a_plain_one_ends_the_chain() -> None:
    runtime = await _runtime(("w", WithFallback))
    to = AgentId("w", "a")
    assert await runtime.send_message(Job("print"), to) == "nothing to print"
    assert await runtime.send_message(Job("print", 3), to) == "rest:print"  # rest wins over base
    await runtime.publish_message(Job("log"), TopicId("jobs", "a"))  # events keep the base's
    await runtime.stop_when_idle()
    agent = await runtime.get_agent(to)
    assert isinstance(agent, WithFallback) and agent.seen == ["log"]


async def test_a_failing_match_reaches_the_sender() -> None:
    class Strict(RoutedAgent):
        @rpc(match=lambda m, ctx: m.size // 0 == 0)
        async def on_job(self, message: Job, ctx: MessageContext) -> None: ...

    runtime = await _runtime(("s", Strict))
    with pytest.raises(ZeroDivisionError):
        await runtime.send_message(Job("x"), AgentId("s", "a"))
    await runtime.stop()


def test_two_plain_handlers_of_one_kind_are_refused_but_a_match_makes_them_a_chain() -> None:
    with pytest.raises(ConfigurationError, match=r"two rpc handlers for Job: a and b.*match="):

        class _Twice(RoutedAgent):
            @rpc
            async def a(self, message: Job, ctx: MessageContext) -> None: ...

            @rpc
            async def b(self, message: Job, ctx: MessageContext) -> None: ...

    class _Chain(RoutedAgent):
        @rpc(match=lambda m, ctx: True)
        async def a(self, message: Job, ctx: MessageContext) -> None: ...

        @rpc
        async def b(self, message: Job, ctx: MessageContext) -> None: ...


def test_match_must_be_a_plain_predicate() -> None:
    async def later(message: object, ctx: object) -> bool:
        return True

    with pytest.raises(ConfigurationError, match="plain function"):
        message_handler(match=later)
    with pytest.raises(ConfigurationError, match="plain function"):
        rpc(match="kind == 'x'")  # type: ignore[arg-type]
