"""Agents are async context managers that close what they own, and nothing else."""

from __future__ import annotations

import asyncio

import pytest

from cantata.agents import ChatAgent
from cantata.agents.closing import close_client
from cantata.core import TimeoutError, UsageError
from cantata.models import ScriptedChatClient
from cantata.tools import FunctionInvokingChatClient


class ClosableClient(ScriptedChatClient):
    """A scripted client that records being closed, as network clients close."""

    def __init__(self, *args: object) -> None:
        super().__init__(["hi", "again"])
        self.closes = 0

    async def aclose(self) -> None:
        self.closes += 1


async def test_an_agent_leaves_a_client_it_does_not_own_open() -> None:
    client = ClosableClient()
    async with ChatAgent(client, name="a") as agent:
        assert (await agent.run("x")).text == "hi"
    assert agent.closed and client.closes == 0
    other = ChatAgent(client, name="b")  # the client still serves other agents
    assert (await other.run("y")).text == "again"


async def test_an_agent_that_owns_its_client_closes_it_once() -> None:
    client = ClosableClient()
    async with ChatAgent(client, name="a", owns_client=True) as agent:
        await agent.run("x")
    await agent.aclose()
    assert client.closes == 1


async def test_a_closed_agent_refuses_to_run_and_stream() -> None:
    agent = ChatAgent(ClosableClient(), name="a")
    await agent.aclose()
    with pytest.raises(UsageError, match="`a` was closed"):
        await agent.run("x")
    with pytest.raises(UsageError, match="was closed"):
        async for _ in agent.run_stream("x"):
            pass


async def test_the_client_inside_a_function_loop_is_closed() -> None:
    inner = ClosableClient()
    agent = ChatAgent(FunctionInvokingChatClient(inner), name="a", owns_client=True)
    async with agent:
        pass
    assert inner.closes == 1


async def test_a_client_that_never_closes_ends_the_wait_with_a_typed_timeout() -> None:
    class Stuck(ClosableClient):
        async def aclose(self) -> None:
            await asyncio.Event().wait()

    with pytest.raises(TimeoutError, match=r"`a`: its client Stuck did not close"):
        await close_client(Stuck(), owner="a", limit=0.01)
