"""Agents and messages the Ray tests ship to their actors.

Imported by the tests as the top-level module `ray_agents` (this folder is put on the
path of the driver and of every Ray worker), so the factories pickle by reference and
each worker registers the message types when it imports this module.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cantata.core import RunError, register
from cantata.runtime import (
    AgentId,
    DeliveryFailed,
    MessageContext,
    RoutedAgent,
    TopicId,
    event,
    rpc,
    type_subscription,
)


class Refused(RunError):
    """A handler's own error type: not rebuilt across processes."""


@register(name="tests.ray.Add")
@dataclass
class Add:
    n: int


@register(name="tests.ray.Get")
@dataclass
class Get:
    pass


@register(name="tests.ray.Fail")
@dataclass
class Fail:
    kind: str


@register(name="tests.ray.Hang")
@dataclass
class Hang:
    marker: str = ""
    """A file the handler makes once it hangs (to know when to cancel it)."""


@register(name="tests.ray.Ask")
@dataclass
class Ask:
    to: AgentId
    n: int


@register(name="tests.ray.Relay")
@dataclass
class Relay:
    """Ask `to` to hang (a nested request that only a cancellation ends)."""

    to: AgentId
    marker: str = ""


@register(name="tests.ray.Loop")
@dataclass
class Loop:
    """Ask `to` to ask `back` for its total: A asks B, which asks A again."""

    to: AgentId
    back: AgentId


@register(name="tests.ray.Note")
@dataclass
class Note:
    text: str


@register(name="tests.ray.Shout")
@dataclass
class Shout:
    topic: TopicId
    text: str


@register(name="tests.ray.Seen")
@dataclass
class Seen:
    notes: list[str] = field(default_factory=list)
    contexts: list[dict[str, Any]] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    pid: int = 0


@register(name="tests.ray.Crash")
@dataclass
class Crash:
    pass


@type_subscription("news")
class Counter(RoutedAgent):
    """Adds numbers, records events, answers what it saw; state is the total."""

    def __init__(self) -> None:
        super().__init__()
        self.total = 0
        self.seen = Seen()

    @rpc
    async def add(self, message: Add, ctx: MessageContext) -> int:
        self.total += message.n
        self.seen.contexts.append(ctx.to_dict())
        return self.total

    @rpc
    async def get(self, message: Get, ctx: MessageContext) -> Seen:
        self.seen.pid = os.getpid()
        return Seen(
            notes=[*self.seen.notes, f"total={self.total}"],
            contexts=list(self.seen.contexts),
            cancelled=list(self.seen.cancelled),
            pid=os.getpid(),
        )

    @rpc
    async def fail(self, message: Fail, ctx: MessageContext) -> None:
        if message.kind == "value":
            raise ValueError("bad value from the handler")
        raise Refused("refused by the handler")

    @rpc
    async def hang(self, message: Hang, ctx: MessageContext) -> None:
        if message.marker:
            os.close(os.open(message.marker, os.O_CREAT | os.O_WRONLY))
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            state = "token" if ctx.cancellation_token.is_cancelled else "bare"
            self.seen.cancelled.append(f"{ctx.message_id}:{state}")
            raise

    @rpc
    async def crash(self, message: Crash, ctx: MessageContext) -> None:
        await asyncio.sleep(0.2)
        os._exit(1)

    @rpc
    async def ask(self, message: Ask, ctx: MessageContext) -> int:
        result = await self.runtime.send_message(Add(message.n), message.to)
        return int(result)

    @rpc
    async def relay(self, message: Relay, ctx: MessageContext) -> None:
        await self.runtime.send_message(Hang(message.marker), message.to)

    @rpc
    async def loop(self, message: Loop, ctx: MessageContext) -> int:
        if message.back == ctx.recipient:  # the first leg: pass it on to `to`
            return int(await self.runtime.send_message(message, message.to))
        return int(await self.runtime.send_message(Add(0), message.back))

    @rpc
    async def shout(self, message: Shout, ctx: MessageContext) -> None:
        await self.runtime.publish_message(Note(message.text), message.topic)

    @event
    async def on_note(self, message: Note, ctx: MessageContext) -> None:
        if message.text.startswith("crash-once:"):
            marker = message.text.removeprefix("crash-once:")
            if not os.path.exists(marker):  # noqa: ASYNC240 (a test's one-off marker)
                os.close(os.open(marker, os.O_CREAT | os.O_WRONLY))
                os._exit(1)  # the worker dies with the event: it is delivered again
        if message.text == f"fail:{ctx.recipient}":
            raise ValueError(f"{ctx.recipient} fails on this note")
        self.seen.notes.append(message.text)
        self.seen.contexts.append(ctx.to_dict())

    async def save_state(self) -> Mapping[str, Any]:
        return {"total": self.total, "notes": list(self.seen.notes)}

    async def load_state(self, state: Mapping[str, Any]) -> None:
        self.total = int(state["total"])
        self.seen.notes = list(state["notes"])


@dataclass(frozen=True)
class ErrorLog:
    """An `on_error` hook that appends each failed delivery to a file (the hosts call it,
    in their processes; the tests' nodes share this machine's files)."""

    path: str

    def __call__(self, failed: DeliveryFailed) -> None:
        with open(self.path, "a") as out:
            out.write(f"{failed.agent_id} {type(failed.error).__name__}: {failed.error}\n")


class DurableCounter(RoutedAgent):
    """A counter that writes its total and the message's id to the store in the handler
    (`commit_state`), so an acknowledged increment survives its host's death."""

    def __init__(self) -> None:
        super().__init__()
        self.total = 0

    @rpc
    async def add(self, message: Add, ctx: MessageContext) -> int:
        if ctx.is_redelivery:
            return self.total
        self.total += message.n
        await self.commit_state()
        return self.total

    @rpc
    async def get(self, message: Get, ctx: MessageContext) -> int:
        return self.total

    async def save_state(self) -> Mapping[str, Any]:
        return {"total": self.total}

    async def load_state(self, state: Mapping[str, Any]) -> None:
        self.total = int(state["total"])


class Unsavable(RoutedAgent):
    """A counter whose state cannot be saved while its total is 100 or more (its
    `save_state` raises): its hand-over to another host fails until it drops below."""

    def __init__(self) -> None:
        super().__init__()
        self.total = 0

    @rpc
    async def add(self, message: Add, ctx: MessageContext) -> int:
        self.total += message.n
        return self.total

    async def save_state(self) -> Mapping[str, Any]:
        if self.total >= 100:
            raise RuntimeError(f"total {self.total}: this agent refuses to be saved")
        return {"total": self.total}

    async def load_state(self, state: Mapping[str, Any]) -> None:
        self.total = int(state["total"])
