"""A turn's objects go when its last reference does, not at the next garbage collection:
the function loop's run keeps no bound method of itself (a reference cycle held the run,
its recorder and everything the turn made until the collector came, and a team's instant
turns ran 4 to 7% slower for it). Only cantata's own objects are counted: other threads of
the test process (a Ray driver's, a server's) may make garbage of their own meanwhile."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from cantata.agents import ChatAgent
from cantata.core import Message
from cantata.models import ChatOptions, ScriptedChatClient, tool_call
from cantata.teams import GroupChat, RoundRobin
from cantata.tools import tool


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@pytest.fixture
def collector_off() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


def _cantata_garbage() -> list[str]:
    """The cantata objects that only a collection frees (cyclic garbage), by type."""
    gc.garbage.clear()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        return sorted(
            type(o).__qualname__ for o in gc.garbage if type(o).__module__.startswith("cantata")
        )
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


async def test_a_chat_agent_turn_leaves_no_cyclic_garbage(collector_off: None) -> None:
    agent = ChatAgent(ScriptedChatClient(lambda messages, options: "ok"), name="a")
    thread = agent.create_thread()
    await agent.run("warm up", thread=thread)
    gc.collect()
    for _ in range(20):
        await agent.run("hello", thread=thread)
    assert _cantata_garbage() == []


async def test_a_turn_that_calls_a_tool_leaves_no_cyclic_garbage(collector_off: None) -> None:
    def script(messages: list[Message], options: ChatOptions) -> object:
        if messages[-1].role == "tool":
            return "the sum is there"
        return [tool_call("add", {"a": 1, "b": 2})]

    agent = ChatAgent(ScriptedChatClient(script), name="a", tools=[add])
    thread = agent.create_thread()
    await agent.run("warm up", thread=thread)
    gc.collect()
    for _ in range(10):
        response = await agent.run("add", thread=thread)
        assert response.text == "the sum is there"
    assert _cantata_garbage() == []


async def test_a_round_robin_of_chat_agents_leaves_no_cyclic_garbage(collector_off: None) -> None:
    team = GroupChat(
        [ChatAgent(ScriptedChatClient(lambda m, o: "ok"), name=f"a{i}") for i in range(3)],
        speaker=RoundRobin(),
        max_turns=12,
    )
    session = team.create_session()
    await session.run("start")
    gc.collect()
    result = await session.run("again")
    assert len(result.messages) == 13
    assert _cantata_garbage() == []


async def test_a_streamed_turn_leaves_no_cyclic_garbage(collector_off: None) -> None:
    agent = ChatAgent(ScriptedChatClient(lambda m, o: "ok", chunk_size=1), name="a")
    thread = agent.create_thread()
    async for _ in agent.run_stream("warm up", thread=thread):
        pass
    gc.collect()
    for _ in range(10):
        async for _ in agent.run_stream("hello", thread=thread):
            pass
    assert _cantata_garbage() == []
