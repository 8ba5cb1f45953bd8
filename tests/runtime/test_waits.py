"""Every wait of the runtime has a bound (issue 9): the default timeout, the idle and
predicate waits, handlers that ignore their cancellation, hooks that never return."""

from __future__ import annotations

import asyncio
import logging
import math
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cantata.core import CancelledError, ConfigurationError, TimeoutError
from cantata.runtime import (
    DEFAULT_TIMEOUT,
    AgentId,
    BaseAgent,
    DeliveryFailed,
    LocalRuntime,
    MessageContext,
    RoutedAgent,
    TopicId,
    TypeSubscription,
    message_handler,
)


@dataclass
class Hang:
    """Handled by sleeping `seconds`, swallowing cancellation `swallow` times."""

    seconds: float = 3600
    swallow: int = 0


@dataclass
class Ask:
    inner_timeout: float


class Stubborn(RoutedAgent):
    def __init__(self) -> None:
        self.cancelled = 0
        self.handled: list[Any] = []

    @message_handler
    async def on_hang(self, message: Hang, ctx: MessageContext) -> str:
        left = message.swallow
        while True:
            try:
                await asyncio.sleep(message.seconds)
                return "woke"
            except asyncio.CancelledError:
                self.cancelled += 1
                if left == 0:
                    raise
                left -= 1

    @message_handler
    async def on_ask(self, message: Ask, ctx: MessageContext) -> str:
        """Asks a stubborn agent with a timeout; answers with what it got."""
        try:
            await self.send_message(
                Hang(swallow=99), AgentId("stubborn", "inner"), timeout=message.inner_timeout
            )
        except TimeoutError as exc:
            return f"inner timed out: {exc}"
        return "inner answered"

    @message_handler
    async def on_int(self, message: int, ctx: MessageContext) -> int:
        self.handled.append(message)
        return message


async def _runtime(**options: Any) -> LocalRuntime:
    runtime = LocalRuntime(**options)
    await runtime.register_factory("stubborn", Stubborn)
    await runtime.add_subscription(TypeSubscription("work", "stubborn"))
    await runtime.start()
    return runtime


def test_the_default_timeout_is_finite_and_none_opts_out() -> None:
    assert math.isfinite(DEFAULT_TIMEOUT) and DEFAULT_TIMEOUT >= 60
    assert LocalRuntime()._default_timeout == DEFAULT_TIMEOUT
    assert LocalRuntime(default_timeout=None)._default_timeout is None
    assert LocalRuntime(default_timeout=math.inf)._default_timeout is None


@given(st.one_of(st.floats(allow_nan=True), st.integers(), st.text(), st.none(), st.booleans()))
def test_durations_are_checked(value: Any) -> None:
    for name in ("default_timeout", "stop_grace"):
        if name == "default_timeout" and value is None:
            continue
        ok = not isinstance(value, bool) and isinstance(value, int | float) and value >= 0
        if ok:
            LocalRuntime(**{name: value})
        else:
            with pytest.raises(ConfigurationError, match=name):
                LocalRuntime(**{name: value})


async def test_a_request_without_timeout_is_bounded_by_the_default() -> None:
    runtime = await _runtime(default_timeout=0.05)
    with pytest.raises(TimeoutError, match=r"stubborn/a within 0.05s"):
        await runtime.send_message(Hang(), AgentId("stubborn", "a"))
    with pytest.raises(ConfigurationError, match="timeout"):
        await runtime.send_message(Hang(), AgentId("stubborn", "a"), timeout=-1)
    # math.inf: this request has no bound, though the runtime's default is tiny
    assert (
        await runtime.send_message(Hang(seconds=0.1), AgentId("stubborn", "b"), timeout=math.inf)
        == "woke"
    )
    await runtime.stop()


async def test_wait_until_idle_and_stop_when_are_bounded_and_leave_the_runtime_running() -> None:
    runtime = await _runtime(stop_grace=0.01)
    await runtime.publish_message(Hang(), TopicId("work", "slow"))
    with pytest.raises(TimeoutError, match=r"still busy after 0.05s.*stubborn/slow"):
        await runtime.wait_until_idle(timeout=0.05)
    with pytest.raises(TimeoutError, match=r"<lambda> was still false after 0.05s"):
        await runtime.stop_when(lambda: False, timeout=0.05)
    assert runtime.state == "running"
    assert await runtime.send_message(7, AgentId("stubborn", "other")) == 7
    await runtime.stop()


async def test_a_handler_that_swallows_cancellation_at_stop_does_not_keep_its_sender_waiting() -> (
    None
):
    runtime = await _runtime(stop_grace=0.05)
    sender = asyncio.create_task(runtime.send_message(Hang(swallow=1000), AgentId("stubborn", "a")))
    await asyncio.sleep(0.01)
    await asyncio.wait_for(runtime.stop(), 5)
    with pytest.raises(
        CancelledError, match=r"runtime stopped; its handler did not end.*abandoned"
    ):
        await asyncio.wait_for(sender, 5)
    agent = await runtime.get_agent(AgentId("stubborn", "a"))
    assert isinstance(agent, Stubborn) and agent.cancelled >= 1


async def test_a_handler_that_swallows_its_timeout_is_abandoned_and_the_sender_told() -> None:
    runtime = await _runtime(stop_grace=0.05)
    call = runtime.send_message(Hang(swallow=1000), AgentId("stubborn", "a"), timeout=0.02)
    with pytest.raises(TimeoutError, match=r"within 0.02s; the handler was cancelled; .*abandoned"):
        await asyncio.wait_for(call, 5)
    # the agent's turn was given back: it takes the next message
    assert await runtime.send_message(1, AgentId("stubborn", "a")) == 1
    await runtime.stop()


async def test_abandoning_a_nested_request_leaves_the_handler_that_sent_it_running() -> None:
    runtime = await _runtime(stop_grace=0.05)
    answer = await asyncio.wait_for(
        runtime.send_message(Ask(0.02), AgentId("stubborn", "outer")), 5
    )
    assert answer.startswith("inner timed out") and "abandoned" in answer
    await runtime.stop()


async def test_a_stuck_broadcast_handler_is_bounded_and_reported() -> None:
    failures: list[DeliveryFailed] = []
    runtime = await _runtime(default_timeout=0.05, stop_grace=0.05, on_error=failures.append)
    await runtime.publish_message(Hang(), TopicId("work", "k"))
    await runtime.publish_message(Hang(swallow=1000), TopicId("work", "k"))
    await runtime.publish_message(5, TopicId("work", "k"))
    await asyncio.wait_for(runtime.stop_when_idle(timeout=5), 5)
    assert [type(f.error) for f in failures] == [TimeoutError, TimeoutError]
    assert "default_timeout of 0.05s" in str(failures[0].error)
    assert "abandoned" in str(failures[1].error)
    agent = await runtime.get_agent(AgentId("stubborn", "k"))
    assert isinstance(agent, Stubborn) and agent.handled == [5]


async def test_stop_ends_even_when_a_broadcast_handler_swallows_cancellation() -> None:
    runtime = await _runtime(stop_grace=0.02)
    await runtime.publish_message(Hang(swallow=1000), TopicId("work", "k"))
    await asyncio.sleep(0.01)
    await asyncio.wait_for(runtime.stop(), 5)
    assert runtime.state == "stopped"
    assert not [t for t in runtime._tasks if not t.done()]


class SlowClose(BaseAgent):
    async def on_message(self, message: Any, ctx: MessageContext) -> Any:
        return message

    async def close(self) -> None:
        await asyncio.sleep(3600)


async def test_a_close_hook_that_never_returns_is_bounded_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    runtime = LocalRuntime(default_timeout=0.05)
    await runtime.register_factory("slow", SlowClose)
    await runtime.start()
    await runtime.send_message(1, AgentId("slow", "a"))
    with caplog.at_level(logging.ERROR, logger="cantata.runtime"):
        await asyncio.wait_for(runtime.close(), 5)
    assert runtime.state == "closed"
    assert any("close() of agent slow/a" in r.getMessage() for r in caplog.records)


async def test_an_async_factory_that_never_returns_fails_the_activation() -> None:
    async def never() -> BaseAgent:
        await asyncio.sleep(3600)
        raise AssertionError

    failures: list[DeliveryFailed] = []
    runtime = LocalRuntime(default_timeout=0.05, on_error=failures.append)
    await runtime.register_factory("never", never)
    await runtime.add_subscription(TypeSubscription("t", "never"))
    await runtime.start()
    await runtime.publish_message(1, TopicId("t", "a"))
    await asyncio.wait_for(runtime.wait_until_idle(timeout=5), 5)
    assert len(failures) == 1
    assert "creating agent never/a" in str(failures[0].error)
    assert isinstance(failures[0].error, TimeoutError)
    await runtime.stop()
