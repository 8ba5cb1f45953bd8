"""Idempotent delivery: a handler sees whether its agent already handled a message id."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from cantata.runtime import AgentId, LocalRuntime, MessageContext, RoutedAgent, message_handler
from cantata.stores import MemoryStore


@dataclass
class Charge:
    cents: int
    fail: bool = False


class Billing(RoutedAgent):
    def __init__(self) -> None:
        self.charged = 0

    @message_handler
    async def on_charge(self, message: Charge, ctx: MessageContext) -> int:
        if ctx.is_redelivery:
            return self.charged  # already done: do not charge twice
        if message.fail:
            raise RuntimeError("card declined")
        self.charged += message.cents
        return self.charged

    async def save_state(self) -> Mapping[str, Any]:
        return {"charged": self.charged}

    async def load_state(self, state: Mapping[str, Any]) -> None:
        self.charged = state["charged"]


async def _runtime(**options: object) -> LocalRuntime:
    runtime = LocalRuntime(**options)  # type: ignore[arg-type]
    await runtime.register_factory("billing", Billing)
    await runtime.start()
    return runtime


async def test_redelivered_message_is_flagged_and_work_is_not_repeated() -> None:
    runtime = await _runtime()
    to = AgentId("billing", "a")
    assert await runtime.send_message(Charge(100), to, message_id="pay-1") == 100
    assert await runtime.send_message(Charge(100), to, message_id="pay-1") == 100
    assert await runtime.send_message(Charge(5), to, message_id="pay-2") == 105
    # Another agent has its own window.
    assert await runtime.send_message(Charge(7), AgentId("billing", "b"), message_id="pay-1") == 7
    await runtime.close()


async def test_a_failed_delivery_is_not_remembered_so_a_retry_does_the_work() -> None:
    runtime = await _runtime()
    to = AgentId("billing", "a")
    with pytest.raises(RuntimeError):
        await runtime.send_message(Charge(100, fail=True), to, message_id="pay-1")
    assert await runtime.send_message(Charge(100), to, message_id="pay-1") == 100
    await runtime.close()


async def test_the_window_is_bounded() -> None:
    runtime = await _runtime(dedup_window=3)
    to = AgentId("billing", "a")
    for n in range(5):
        await runtime.send_message(Charge(1), to, message_id=f"m{n}")
    assert await runtime.send_message(Charge(1), to, message_id="m4") == 5  # remembered
    assert await runtime.send_message(Charge(1), to, message_id="m0") == 6  # forgotten
    await runtime.close()


async def test_the_window_survives_eviction() -> None:
    runtime = await _runtime(store=MemoryStore())
    to = AgentId("billing", "a")
    await runtime.send_message(Charge(10), to, message_id="once")
    assert await runtime.evict_idle() == 1
    assert await runtime.send_message(Charge(10), to, message_id="once") == 10
    await runtime.close()


def test_the_handled_window_keeps_at_least_the_last_ids_and_stays_bounded() -> None:
    from cantata.runtime.cell import Cell

    cell = Cell(None)
    for i in range(1_000):
        cell.remember(f"m{i}", 8)
        assert isinstance(cell.handled, str) or len(cell.handled) <= 12
        assert all(cell.seen(f"m{j}") for j in range(max(0, i - 7), i + 1))
    assert not cell.seen("m0")
    cell.trim(8)
    assert isinstance(cell.handled, dict) and list(cell.handled) == [
        f"m{j}" for j in range(992, 1000)
    ]
