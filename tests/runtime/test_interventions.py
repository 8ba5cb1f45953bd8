"""Interventions on send, publish and response: observe, rewrite, drop."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import pytest

from cantata.core import MessageDropped
from cantata.runtime import (
    DROP,
    AgentId,
    InterventionHandler,
    LocalRuntime,
    MessageContext,
    MessageWasDropped,
    RoutedAgent,
    RuntimeEvent,
    TopicId,
    TypeSubscription,
    message_handler,
)


@dataclass
class Text:
    body: str


class Echo(RoutedAgent):
    heard: list[str] = []

    @message_handler
    async def on_text(self, message: Text, ctx: MessageContext) -> str:
        Echo.heard.append(message.body)
        if message.body.startswith("relay"):
            await self.publish_message(Text("secret from handler"), TopicId("room", "r"))
        return f"echo:{message.body}"


class Policy(InterventionHandler):
    def __init__(self) -> None:
        self.seen: list[tuple[str, Any]] = []

    async def on_send(self, message: Any, ctx: MessageContext, recipient: AgentId) -> Any:
        self.seen.append(("send", message))
        if message.body == "drop":
            return DROP
        return replace(message, body=message.body.upper()) if message.body == "shout" else message

    async def on_publish(self, message: Any, ctx: MessageContext) -> Any:
        self.seen.append(("publish", message))
        if message.body == "whisper":
            return Text("WHISPER")
        return DROP if "secret" in message.body else message

    async def on_response(self, message: Any, ctx: MessageContext, responder: AgentId) -> Any:
        self.seen.append(("response", message))
        if message == "echo:hide":
            return DROP
        return message + "!" if message == "echo:SHOUT" else message


async def _runtime(policy: Policy) -> tuple[LocalRuntime, list[RuntimeEvent]]:
    Echo.heard = []
    events: list[RuntimeEvent] = []
    runtime = LocalRuntime(interventions=[policy])
    runtime.add_listener(events.append)
    await runtime.register_factory("echo", Echo)
    await runtime.add_subscription(TypeSubscription("room", "echo"))
    await runtime.start()
    return runtime, events


async def test_interventions_observe_and_rewrite_requests_and_responses() -> None:
    policy = Policy()
    runtime, _ = await _runtime(policy)
    assert await runtime.send_message(Text("shout"), AgentId("echo", "a")) == "echo:SHOUT!"
    assert Echo.heard == ["SHOUT"]
    assert policy.seen == [("send", Text("shout")), ("response", "echo:SHOUT")]
    await runtime.stop()


async def test_a_dropped_direct_message_raises_message_dropped_to_the_sender() -> None:
    policy = Policy()
    runtime, events = await _runtime(policy)
    with pytest.raises(MessageDropped, match=r"echo/a.*Policy"):
        await runtime.send_message(Text("drop"), AgentId("echo", "a"))
    assert Echo.heard == []
    assert [(e.stage, e.message) for e in events if isinstance(e, MessageWasDropped)] == [
        ("send", Text("drop"))
    ]
    await runtime.stop()


async def test_a_dropped_response_raises_message_dropped_after_the_handler_ran() -> None:
    runtime, _ = await _runtime(Policy())
    with pytest.raises(MessageDropped, match="response of echo/a"):
        await runtime.send_message(Text("hide"), AgentId("echo", "a"))
    assert Echo.heard == ["hide"]
    await runtime.stop()


async def test_dropped_publish_reaches_nobody_and_stop_when_idle_does_not_hang() -> None:
    runtime, events = await _runtime(Policy())
    await runtime.publish_message(Text("secret plan"), TopicId("room", "r"))
    # A handler's publish is dropped mid-cascade as well.
    await runtime.send_message(Text("relay"), AgentId("echo", "x"))
    await runtime.stop_when_idle()
    assert Echo.heard == ["relay"]
    assert [e.stage for e in events if isinstance(e, MessageWasDropped)] == [
        "publish",
        "publish",
    ]


async def test_an_intervention_rewrites_a_published_message() -> None:
    runtime, _ = await _runtime(Policy())
    await runtime.publish_message(Text("whisper"), TopicId("room", "r"))
    await runtime.stop_when_idle()
    assert Echo.heard == ["WHISPER"]
