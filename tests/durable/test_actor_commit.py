"""Runtime actors: an agent that commits its state with the id of the message it handled
(one store write) keeps both across a kill -9: a fresh runtime on the store has the state
and flags the redelivered message."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from actor_child import Billing, Charge

from cantata.core import ConfigurationError, RuntimeStateError
from cantata.runtime import AgentId, LocalRuntime
from cantata.stores import SQLiteStore

CHILD = Path(__file__).with_name("actor_child.py")


def handle_then_kill(db: Path, *extra: str) -> None:
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), str(db), *extra], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "handled"
    finally:
        proc.kill()  # SIGKILL: no close, no save at exit
        proc.wait(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()


async def redeliver(db: Path, commit: bool) -> list[int]:
    Billing.commit = commit
    # The runtime saves into the store but does not own it: close the store after the
    # runtime. (Left open, its aiosqlite connection was collected in a later test and its
    # worker thread reported to that test's closed event loop.)
    async with SQLiteStore(db) as store, LocalRuntime(store=store) as runtime:
        await runtime.register_factory("billing", Billing)
        to = AgentId("billing", "a")
        other = await runtime.send_message(Charge(5), to, message_id="pay-2")
        again = await runtime.send_message(Charge(100), to, message_id="pay-1")
    return [other, again]


async def test_a_committed_message_is_a_redelivery_after_a_kill(tmp_path: Path) -> None:
    handle_then_kill(tmp_path / "rt.db")
    # the state survived the kill (100 + 5) and pay-1 again is a redelivery: no charge
    assert await redeliver(tmp_path / "rt.db", True) == [105, 105]


async def test_without_the_commit_the_kill_loses_the_state_and_the_id(tmp_path: Path) -> None:
    handle_then_kill(tmp_path / "rt.db", "--no-commit")
    assert await redeliver(tmp_path / "rt.db", False) == [5, 105]


async def test_commit_without_a_store_is_a_configuration_error() -> None:
    Billing.commit = True
    async with LocalRuntime() as runtime:
        await runtime.register_factory("billing", Billing)
        with pytest.raises(ConfigurationError, match="has no store"):
            await runtime.send_message(Charge(1), AgentId("billing", "a"))


async def test_commit_outside_a_handler_is_refused(tmp_path: Path) -> None:
    agent = Billing()
    async with SQLiteStore(tmp_path / "x.db") as store, LocalRuntime(store=store) as runtime:
        await runtime.register_instance(agent, AgentId("billing", "solo"))
        with pytest.raises(RuntimeStateError, match="outside its own handler"):
            await agent.commit_state()
