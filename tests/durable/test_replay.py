"""replay and fork: a recorded run replayed from any checkpoint with the network blocked
(a network model client, effect tools that would fail) ends with the same outputs and
acts on nothing; a fork continues as a new run whose effects and model calls happen anew."""

from __future__ import annotations

import socket
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from test_agent_journal import billing_agent, flow

from cantata.agents import ChatAgent
from cantata.core import ConfigurationError, WorkflowError
from cantata.models import OpenAIChatClient
from cantata.stores import SQLiteStore
from cantata.tools import tool
from cantata.workflows import (
    EffectJournal,
    StateStoreCheckpointStore,
    WorkflowBuilder,
)


def offline_agent() -> ChatAgent:
    """The same agent, but its model is across a network that is blocked, and its effect
    tool fails if called."""

    @tool(effect=True)
    def charge(cents: int) -> str:
        """Charge the card."""
        raise ConnectionError("the replay called the payment service")

    @tool
    def look_up(name: str) -> str:
        """Find a customer (no side effect)."""
        return f"{name} is a customer"

    client = OpenAIChatClient(model="m", base_url="http://127.0.0.1:9/v1", api_key="x")
    return ChatAgent(client, name="biller", tools=[look_up, charge])


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    tried: list[Any] = []

    def refuse(self: socket.socket, address: Any) -> None:
        tried.append(address)
        raise OSError("network blocked by the test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    return tried


async def recorded(tmp_path: Path) -> tuple[StateStoreCheckpointStore, Any, list[int]]:
    charged: list[int] = []
    agent, _ = billing_agent(charged, [])
    store = StateStoreCheckpointStore(SQLiteStore(tmp_path / "rec.db"))
    result = await flow(agent, []).run("bill ada", checkpoint_store=store, run_id="rec")
    return store, result, charged


async def test_replay_from_every_checkpoint_offline_ends_with_the_same_outputs(
    tmp_path: Path, no_network: list[Any]
) -> None:
    store, original, charged = await recorded(tmp_path)
    try:
        wf = flow(offline_agent(), [])
        checkpoints = await store.list_checkpoints(run_id="rec")
        assert len(checkpoints) == 3
        for ckpt in checkpoints:
            replayed = await wf.replay(ckpt.checkpoint_id, checkpoint_store=store)
            assert [r.text for r in replayed.outputs] == [r.text for r in original.outputs]
        assert no_network == [] and charged == [500]
        assert len(await store.list_checkpoints(run_id="rec")) == 3  # replay wrote none
    finally:
        await store.close()


async def test_replay_without_the_journal_entry_fails_instead_of_acting(
    tmp_path: Path, no_network: list[Any]
) -> None:
    store, _, _ = await recorded(tmp_path)
    try:
        for key in await EffectJournal(store.store).keys("rec"):
            if key.endswith(":model#2"):
                await store.store.delete(f"wf:fx:{key}")
        entry = (await store.list_checkpoints(run_id="rec"))[0]
        with pytest.raises(WorkflowError, match="did not journal"):
            await flow(offline_agent(), []).replay(entry.checkpoint_id, checkpoint_store=store)
        assert no_network == []
    finally:
        await store.close()


async def test_fork_continues_as_a_new_run_with_new_effects(tmp_path: Path) -> None:
    store, original, charged = await recorded(tmp_path)
    try:
        again: list[int] = []
        agent, client = billing_agent(again, [])
        entry = (await store.list_checkpoints(run_id="rec"))[0]
        forked = await flow(agent, []).fork(entry.checkpoint_id, checkpoint_store=store)
        assert forked.run_id != "rec"
        assert [r.text for r in forked.outputs] == [r.text for r in original.outputs]
        assert again == [500] and len(client.calls) == 2  # acted anew
        first = (await store.list_checkpoints(run_id=forked.run_id))[0]
        assert first.parent_id == entry.checkpoint_id  # lineage
        assert charged == [500]
    finally:
        await store.close()


async def test_replay_needs_a_store_with_a_journal() -> None:
    wf = WorkflowBuilder(offline_agent()).build()
    with pytest.raises(ConfigurationError, match="no checkpoint store"):
        await wf.replay("c1")
