"""Countdown: two agents pass a number back and forth until it reaches 1.

The example from AutoGen's core quick start, written with cantata's runtime. The modifier
takes one off the number, the checker decides whether to go on. Both subscribe to the
same topic; a published message never returns to its publisher, so each message goes to
the other agent. The checker receives the first number as a direct message.

Run it with ``python examples/countdown.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from cantata.runtime import (
    AgentId,
    LocalRuntime,
    MessageContext,
    RoutedAgent,
    TopicId,
    message_handler,
    type_subscription,
)

TOPIC = TopicId("countdown", "default")


@dataclass
class Number:
    value: int


@type_subscription("countdown")
class Modifier(RoutedAgent):
    """Applies `modify` to every number it hears and publishes the result."""

    def __init__(self, modify: Callable[[int], int]) -> None:
        self.modify = modify

    @message_handler
    async def on_number(self, message: Number, ctx: MessageContext) -> None:
        value = self.modify(message.value)
        print(f"{'-' * 40}\nModifier:\nModified {message.value} to {value}")
        await self.publish_message(Number(value), TOPIC)


@type_subscription("countdown")
class Checker(RoutedAgent):
    """Publishes the number on while `done` is false; stops the exchange once it is true."""

    def __init__(self, done: Callable[[int], bool]) -> None:
        self.done = done

    @message_handler
    async def on_number(self, message: Number, ctx: MessageContext) -> None:
        if self.done(message.value):
            print(f"{'-' * 40}\nChecker:\n{message.value} failed the check, stopping.")
            return
        print(f"{'-' * 40}\nChecker:\n{message.value} passed the check, continue.")
        await self.publish_message(Number(message.value), TOPIC)


async def main(start: int = 10) -> None:
    """Count down from `start` to 1, then stop when no message is left."""
    runtime = LocalRuntime()
    await runtime.register_factory(
        "modifier", lambda: Modifier(lambda x: x - 1), agent_class=Modifier
    )
    await runtime.register_factory(
        "checker", lambda: Checker(lambda x: x <= 1), agent_class=Checker
    )
    await runtime.start()
    await runtime.send_message(Number(start), AgentId("checker", "default"))
    await runtime.stop_when_idle()
    await runtime.close()


if __name__ == "__main__":
    asyncio.run(main())
