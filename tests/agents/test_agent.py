"""The abstract Agent: a custom agent implements `run` and gets the rest."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pytest

from cantata.agents import (
    AGENT_ID_KEY,
    Agent,
    AgentResponse,
    AgentThread,
    ChatAgent,
    IntermediateCallback,
    LocalThread,
)
from cantata.agents.agent import AgentInput
from cantata.core import CancellationToken, ConfigurationError, Message, ThreadError
from cantata.models import ChatOptions, ScriptedChatClient, tool_call


class Shouter(Agent):
    """A plain-code agent: answers with the last message in capitals."""

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
        used = self._thread_for_run(thread)
        incoming = self._incoming(messages)
        await used.on_new_message(incoming)
        answer = Message("assistant", incoming[-1].text.upper(), author_name=self.name)
        await used.on_new_message(answer)
        return AgentResponse([answer], thread=used, agent_id=self.id)


async def test_custom_agent_runs_and_keeps_its_thread() -> None:
    agent = Shouter(name="shouter")
    response = await agent.run("hey")
    assert response.text == "HEY"
    stored = await response.thread.get_messages()  # type: ignore[union-attr]
    assert [m.text for m in stored] == ["hey", "HEY"]
    assert stored[0].metadata[AGENT_ID_KEY] == agent.id


async def test_default_stream_yields_each_message_whole() -> None:
    stream = Shouter(name="shouter").run_stream("hey")
    updates = [u async for u in stream]
    assert [u.text for u in updates] == ["HEY"]
    assert stream.response.text == "HEY"


async def test_custom_agent_is_usable_as_a_tool() -> None:
    client = ScriptedChatClient([[tool_call("shouter", {"task": "quiet"})], "done"])
    boss = ChatAgent(client, name="boss", tools=[Shouter(name="shouter")])
    response = await boss.run("go")
    assert response.messages[1].function_results[0].result == "QUIET"


async def test_base_deserializes_local_threads() -> None:
    thread = LocalThread()
    await thread.on_new_message(Message("user", "x"))
    restored = await Shouter(name="s").deserialize_thread(await thread.serialize())
    assert [m.text for m in await restored.get_messages()] == ["x"]


def test_explicit_id_is_kept_and_default_ids_differ() -> None:
    assert Shouter(name="s", id="fixed").id == "fixed"
    assert Shouter(name="s").id != Shouter(name="s").id


def test_name_must_be_a_tool_name() -> None:
    with pytest.raises(ConfigurationError, match="letters, digits"):
        Shouter(name="two words")


async def test_thread_type_is_checked_for_custom_agents_too() -> None:
    class Other(AgentThread):
        id = None  # type: ignore[assignment]

        async def _create(self) -> None: ...
        async def _delete(self) -> None: ...
        async def _on_new_messages(self, messages: list[Message]) -> None: ...
        async def _get_messages(self) -> list[Message]:
            return []

        async def _serialize(self) -> dict[str, Any]:
            return {}

    with pytest.raises(ThreadError, match=r"`Other`.*`shouter` of kind `Shouter`"):
        await Shouter(name="shouter").run("x", thread=Other())
