"""A second thread kind for the channel tests: threads that live on a (tiny, in-test) chat
server, and an agent that answers from the server's copy of the conversation. Real
objects: the server stores what it is sent and can be told to fail or to stall."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterable, Mapping
from typing import Any

from cantata.agents import (
    Agent,
    AgentInput,
    AgentResponse,
    AgentThread,
    IntermediateCallback,
    ServiceThread,
)
from cantata.core import CancellationToken, Message, StoreError
from cantata.models import ChatOptions


class ChatServer:
    """Keeps conversations by id; `fail_next` makes the next posts fail, `gate` stalls them."""

    def __init__(self) -> None:
        self.conversations: dict[str, list[Message]] = {}
        self._ids = itertools.count(1)
        self.fail_next = 0
        self.gate: asyncio.Event | None = None
        self.posts = 0

    def create(self) -> str:
        ident = f"conv-{next(self._ids)}"
        self.conversations[ident] = []
        return ident

    async def post(self, conversation: str, messages: list[Message]) -> None:
        if self.gate is not None:
            await self.gate.wait()
        if self.fail_next:
            self.fail_next -= 1
            raise StoreError(f"server refused {len(messages)} message(s) for {conversation}")
        self.posts += 1
        self.conversations[conversation].extend(messages)


class ServerThread(ServiceThread):
    """A thread whose messages live on the `ChatServer`."""

    kind = "server"

    def __init__(self, server: ChatServer, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.server = server

    async def _create_on_service(self) -> str:
        return self.server.create()

    async def _delete_on_service(self, thread_id: str) -> None:
        self.server.conversations.pop(thread_id, None)

    async def _on_new_messages(self, messages: list[Message]) -> None:
        assert self.id is not None
        await self.server.post(self.id, messages)

    async def _get_messages(self) -> list[Message]:
        return list(self.server.conversations.get(self.id or "", []))


class ServerAgent(Agent):
    """Answers ``"<name> saw <n>: <last text>"`` from the server's copy of the thread."""

    thread_type = ServerThread

    def __init__(self, server: ChatServer, *, name: str) -> None:
        super().__init__(name=name, description=f"server agent {name}")
        self.server = server

    def create_thread(self) -> ServerThread:
        return ServerThread(self.server)

    async def run(
        self,
        messages: AgentInput = None,
        *,
        thread: AgentThread | None = None,
        on_intermediate: IntermediateCallback | None = None,
        arguments: Mapping[str, Any] | None = None,
        options: ChatOptions | None = None,
        tools: Iterable[Any] | None = None,
        cancellation_token: CancellationToken | None = None,
        **kwargs: Any,
    ) -> AgentResponse:
        thread = self._thread_for_run(thread)
        incoming = self._incoming(messages)
        if incoming:
            await thread.on_new_message(incoming)
        else:
            await thread.create()
        history = await thread.get_messages()
        last = history[-1].text if history else ""
        reply = Message(
            "assistant", f"{self.name} saw {len(history)}: {last}", author_name=self.name
        )
        await thread.on_new_message([reply])  # the server keeps its own answer
        return AgentResponse([reply], thread=thread, agent_id=self.id)
