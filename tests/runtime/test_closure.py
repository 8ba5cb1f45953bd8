"""Closure agents: a function registered as an agent type."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest

from cantata.core import CantHandle, ConfigurationError
from cantata.runtime import (
    AgentId,
    ClosureAgent,
    LocalRuntime,
    MessageContext,
    RoutedAgent,
    TopicId,
    TypeSubscription,
    message_handler,
    register_closure,
)


@dataclass
class Result:
    value: int


@dataclass
class Task:
    n: int


class Worker(RoutedAgent):
    @message_handler
    async def on_task(self, message: Task, ctx: MessageContext) -> None:
        await self.publish_message(Result(message.n * 2), TopicId("results", self.id.key))


async def test_a_closure_collects_what_agents_publish_into_a_queue() -> None:
    queue: asyncio.Queue[tuple[Result, str]] = asyncio.Queue()

    def collect(message: Result, ctx: MessageContext) -> None:
        queue.put_nowait((message, str(ctx.sender)))

    async with LocalRuntime() as runtime:
        await runtime.register_factory("worker", Worker)
        await runtime.add_subscription(TypeSubscription("tasks", "worker"))
        await register_closure(runtime, "collector", collect, subscriptions=["results"])
        for n in range(3):
            await runtime.publish_message(Task(n), TopicId("tasks", "job"))
        await runtime.publish_message("not a result", TopicId("results", "job"))  # ignored
        await runtime.wait_until_idle()
    got = [queue.get_nowait() for _ in range(queue.qsize())]
    assert got == [(Result(0), "worker/job"), (Result(2), "worker/job"), (Result(4), "worker/job")]


async def test_an_async_closure_answers_requests_and_can_publish_as_itself() -> None:
    seen: list[tuple[Any, str | None]] = []

    async def echo(message: Task | Result, ctx: MessageContext) -> int:
        await runtime.publish_message(Result(-1), TopicId("log", "x"))
        return message.n if isinstance(message, Task) else message.value

    async def log(message: Result, ctx: MessageContext) -> None:
        seen.append((message, str(ctx.sender)))

    runtime = LocalRuntime()
    await register_closure(runtime, "echo", echo)
    await register_closure(runtime, "log", log, subscriptions=[TypeSubscription("log", "log")])
    await runtime.start()
    assert await runtime.send_message(Task(7), AgentId("echo", "a")) == 7
    assert await runtime.send_message(Result(8), AgentId("echo", "b")) == 8
    with pytest.raises(CantHandle, match=r"closure agent echo/a takes Task \| Result.*str"):
        await runtime.send_message("text", AgentId("echo", "a"))
    await runtime.stop_when_idle()
    assert seen == [(Result(-1), "echo/a"), (Result(-1), "echo/b")]
    agent = await runtime.get_agent(AgentId("echo", "a"))
    assert isinstance(agent, ClosureAgent)
    await runtime.close()


async def test_closure_registration_refuses_bad_functions_and_foreign_subscriptions() -> None:
    runtime = LocalRuntime()
    with pytest.raises(ConfigurationError, match="needs a function"):
        await register_closure(runtime, "c", "not callable")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"must take \(message, ctx\), not 1"):
        await register_closure(runtime, "c", lambda m: None)  # type: ignore[arg-type,misc]
    with pytest.raises(ConfigurationError, match=r"routes to agent type 'other'"):
        await register_closure(
            runtime, "c", lambda m, ctx: None, subscriptions=[TypeSubscription("t", "other")]
        )
    assert runtime.subscriptions() == []
