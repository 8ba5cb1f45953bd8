"""Runtime state: save/load round trips (memory and SQLite), schema versions, eviction of
idle agents and their reactivation from the store, 10,000 tenants on one subscription."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cantata.core import (
    CantataError,
    RuntimeStateError,
    SchemaVersionError,
    TimeoutError,
    Undeliverable,
    register,
)
from cantata.runtime import (
    AgentEvicted,
    AgentId,
    LocalRuntime,
    MessageContext,
    RoutedAgent,
    RuntimeEvent,
    TopicId,
    TypePrefixSubscription,
    TypeSubscription,
    message_handler,
)
from cantata.stores import MemoryStore, SQLiteStore, StateStore


@register(name="tests.runtime.Deposit")
@dataclass
class Deposit:
    amount: int


@dataclass
class Balance:
    pass


class Account(RoutedAgent):
    def __init__(self) -> None:
        self.total = 0
        self.history: list[Deposit] = []

    @message_handler
    async def on_deposit(self, message: Deposit, ctx: MessageContext) -> int:
        self.total += message.amount
        self.history.append(message)
        return self.total

    @message_handler
    async def on_balance(self, message: Balance, ctx: MessageContext) -> int:
        return self.total

    async def save_state(self) -> Mapping[str, Any]:
        return {"total": self.total, "history": self.history}

    async def load_state(self, state: Mapping[str, Any]) -> None:
        self.total = state["total"]
        self.history = list(state["history"])


async def _runtime(**options: Any) -> LocalRuntime:
    runtime = LocalRuntime(**options)
    await runtime.register_factory("account", Account)
    await runtime.start()
    return runtime


async def _round_trip(store: StateStore) -> None:
    first = await _runtime()
    await first.add_subscription(TypeSubscription("deposits", "account"))
    await first.add_subscription(TypePrefixSubscription("audit.", "account"))
    await first.send_message(Deposit(5), AgentId("account", "alice"))
    await first.send_message(Deposit(7), AgentId("account", "bob"))
    await first.save_state(store)
    await first.close()

    second = await _runtime()
    await second.load_state(store)
    assert await second.send_message(Balance(), AgentId("account", "alice")) == 5
    bob = await second.get_agent(AgentId("account", "bob"))
    assert isinstance(bob, Account) and bob.history == [Deposit(7)]
    assert {s.id for s in second.subscriptions()} == {
        "type:deposits->account",
        "prefix:audit.->account",
    }
    await second.close()


async def test_save_and_load_round_trip_through_a_memory_store() -> None:
    await _round_trip(MemoryStore(copy=True))


async def test_save_and_load_round_trip_through_sqlite(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runtime.db")
    try:
        await _round_trip(store)
    finally:
        await store.close()
    # The state is in the file: a new store on the same path reads it back.
    reopened = SQLiteStore(tmp_path / "runtime.db")
    try:
        runtime = await _runtime()
        await runtime.load_state(reopened)
        assert await runtime.send_message(Balance(), AgentId("account", "bob")) == 7
        await runtime.close()
    finally:
        await reopened.close()


async def test_unknown_schema_version_and_missing_state_are_refused() -> None:
    runtime = await _runtime()
    data = await runtime.save_state()
    with pytest.raises(SchemaVersionError, match="schema_version 99"):
        await runtime.load_state({**data, "schema_version": 99})
    with pytest.raises(RuntimeStateError, match="no runtime state"):
        await runtime.load_state(MemoryStore())
    saved = {**data, "agents": {"ghost/x": {"schema_version": 1, "state": {}, "handled": []}}}
    with pytest.raises(Undeliverable, match="ghost"):
        await runtime.load_state(saved)
    await runtime.close()


async def test_evicted_agents_leave_memory_and_come_back_with_their_state() -> None:
    store = MemoryStore()
    runtime = await _runtime(store=store)
    for key in ("a", "b"):
        await runtime.send_message(Deposit(10), AgentId("account", key))
    await runtime.send_message(Deposit(1), AgentId("account", "a"), message_id="m-1")
    assert await runtime.evict_idle() == 2
    assert runtime.live_agents() == []
    assert sorted(await store.keys("cantata.runtime.agent:")) == [
        "cantata.runtime.agent:account/a",
        "cantata.runtime.agent:account/b",
    ]
    assert await runtime.send_message(Deposit(1), AgentId("account", "a")) == 12
    assert runtime.live_agents() == [AgentId("account", "a")]
    agent = await runtime.get_agent(AgentId("account", "a"))
    assert isinstance(agent, Account) and agent.history == [Deposit(10), Deposit(1), Deposit(1)]
    await runtime.close()


async def test_eviction_runs_by_itself_after_the_idle_time() -> None:
    evicted = asyncio.Event()

    def on_event(event: RuntimeEvent) -> None:
        if isinstance(event, AgentEvicted):
            evicted.set()

    runtime = await _runtime(store=MemoryStore(), evict_after=0.01)
    runtime.add_listener(on_event)
    await runtime.send_message(Deposit(3), AgentId("account", "idle"))
    await evicted.wait()
    assert runtime.live_agents() == []
    assert await runtime.send_message(Balance(), AgentId("account", "idle")) == 3
    await runtime.close()


class _GatedStore(MemoryStore):
    """A store whose writes wait for a gate, to hold an eviction in the middle."""

    def __init__(self) -> None:
        super().__init__()
        self.writing = asyncio.Event()
        self.gate = asyncio.Event()

    async def put(self, key: str, value: Any) -> None:
        self.writing.set()
        await self.gate.wait()
        await super().put(key, value)


async def test_an_agent_that_gets_a_message_while_being_evicted_stays() -> None:
    store = _GatedStore()
    runtime = await _runtime(store=store)
    await runtime.send_message(Deposit(2), AgentId("account", "busy"))
    eviction = asyncio.ensure_future(runtime.evict_idle())
    await store.writing.wait()  # eviction holds the agent's turn while it saves
    reply = asyncio.ensure_future(runtime.send_message(Deposit(3), AgentId("account", "busy")))
    await asyncio.sleep(0)
    assert not reply.done()
    store.gate.set()
    assert await eviction == 0
    assert await reply == 5
    assert runtime.live_agents() == [AgentId("account", "busy")]
    await runtime.close()


async def test_ten_thousand_tenants_through_one_type_subscription() -> None:
    runtime = await _runtime()
    await runtime.add_subscription(TypeSubscription("deposits", "account"))
    for tenant in range(10_000):
        await runtime.publish_message(Deposit(tenant), TopicId("deposits", f"t{tenant}"))
    await runtime.stop_when_idle()
    assert len(runtime.live_agents()) == 10_000
    for tenant in (0, 4_321, 9_999):
        agent = runtime._cells[AgentId("account", f"t{tenant}")].agent
        assert isinstance(agent, Account) and agent.total == tenant


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
_agent_record = st.fixed_dictionaries(
    {"schema_version": st.just(1) | _json, "state": _json, "handled": _json}
)
_damaged_state = st.fixed_dictionaries(
    {
        "schema_version": st.just(1) | _json,
        "agents": st.dictionaries(
            st.sampled_from(["account/a", "account/b", "bad", "/x", "ghost/k"])
            | st.text(max_size=6),
            _agent_record | _json,
            max_size=3,
        )
        | _json,
        "subscriptions": st.lists(_json, max_size=3) | _json,
    }
)


@settings(max_examples=150, deadline=None)
@given(data=_damaged_state | _json)
async def test_damaged_runtime_state_raises_a_cantata_error_or_loads(data: Any) -> None:
    runtime = await _runtime()
    try:
        await runtime.load_state(data)
    except CantataError:
        pass
    finally:
        await runtime.close()


async def test_eviction_into_sqlite_survives_a_new_runtime(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "agents.db")
    try:
        first = await _runtime(store=store)
        for key in ("a", "b", "c"):
            await first.send_message(Deposit(ord(key)), AgentId("account", key))
        assert await first.evict_idle() == 3
        await first.close()
        # A fresh runtime on the same store reactivates each agent with its state.
        second = await _runtime(store=store)
        assert await second.send_message(Deposit(1), AgentId("account", "b")) == ord("b") + 1
        assert second.live_agents() == [AgentId("account", "b")]
        await second.close()
    finally:
        await store.close()


async def test_saved_state_includes_evicted_agents() -> None:
    runtime = await _runtime(store=MemoryStore())
    await runtime.send_message(Deposit(10), AgentId("account", "gone"))
    await runtime.send_message(Deposit(3), AgentId("account", "here"))
    assert await runtime.evict_idle() == 2
    await runtime.send_message(Deposit(4), AgentId("account", "here"))  # live again: newer
    # A snapshot does not depend on whether the sweeper happened to evict an agent.
    data = await runtime.save_state()
    await runtime.close()
    assert sorted(data["agents"]) == ["account/gone", "account/here"]
    fresh = await _runtime()  # no eviction store: everything comes from the snapshot
    await fresh.load_state(data)
    assert await fresh.send_message(Balance(), AgentId("account", "gone")) == 10
    assert await fresh.send_message(Balance(), AgentId("account", "here")) == 7
    await fresh.close()


@dataclass
class Reload:
    data: dict[str, Any]


class Restorer(Account):
    @message_handler
    async def on_reload(self, message: Reload, ctx: MessageContext) -> int:
        # Its own turn is in progress: it must not wait for it (that would never end).
        await self.runtime.load_state(message.data)
        assert await self.runtime.get_agent(self.id) is self
        return self.total


async def test_a_handler_may_load_state_that_includes_its_own_agent() -> None:
    runtime = LocalRuntime()
    await runtime.register_factory("restorer", Restorer)
    await runtime.start()
    me = AgentId("restorer", "me")
    await runtime.send_message(Deposit(5), me)
    data = await runtime.save_state()
    await runtime.send_message(Deposit(1), me)
    # The timeout only bounds a failure of this test (waiting for its own turn).
    assert await runtime.send_message(Reload(data), me, timeout=30) == 5
    await runtime.close()


class Farewell(Account):
    gate: asyncio.Event
    closing: asyncio.Event
    heard: list[str] = []

    @message_handler
    async def on_text(self, message: str, ctx: MessageContext) -> None:
        Farewell.heard.append(message)

    async def close(self) -> None:
        Farewell.closing.set()
        await Farewell.gate.wait()
        await self.publish_message(f"bye from {self.id.key}", TopicId("bye", "k"))


async def test_stop_when_idle_waits_for_the_close_hook_of_an_agent_being_evicted() -> None:
    Farewell.gate, Farewell.closing, Farewell.heard = asyncio.Event(), asyncio.Event(), []
    runtime = LocalRuntime(store=MemoryStore())
    await runtime.register_factory("farewell", Farewell)
    await runtime.add_subscription(TypeSubscription("bye", "farewell"))
    await runtime.start()
    await runtime.send_message(Deposit(1), AgentId("farewell", "x"))
    evicting = asyncio.ensure_future(runtime.evict_idle())
    await Farewell.closing.wait()
    stopping = asyncio.ensure_future(runtime.stop_when_idle())
    Farewell.gate.set()
    await asyncio.gather(evicting, stopping)
    assert Farewell.heard == ["bye from x"]


@dataclass
class Stall:
    started: asyncio.Event


class Staller(Account):
    @message_handler
    async def on_stall(self, message: Stall, ctx: MessageContext) -> None:
        message.started.set()
        await asyncio.Event().wait()  # never finishes; cancelled by the stop


async def test_waiting_for_a_stuck_agents_turn_is_bounded_by_the_default_timeout() -> None:
    runtime = LocalRuntime(default_timeout=3600, stop_grace=0)
    await runtime.register_factory("staller", Staller)
    await runtime.start()
    stall = Stall(asyncio.Event())
    stuck = asyncio.ensure_future(runtime.send_message(stall, AgentId("staller", "s")))
    await stall.started.wait()
    runtime._default_timeout = 0.01  # the request above keeps its hour
    for wait in (
        runtime.get_agent(AgentId("staller", "s")),
        runtime.save_state(),
        runtime.load_state({"schema_version": 1, "agents": {"staller/s": {"schema_version": 1}}}),
    ):
        with pytest.raises(TimeoutError, match=r"staller/s"):
            await wait
    assert not runtime._cells[AgentId("staller", "s")].mailbox
    await runtime.stop()
    with pytest.raises(CantataError):
        await stuck


async def test_close_saves_live_agents_so_the_store_never_holds_stale_state() -> None:
    store = MemoryStore()
    first = await _runtime(store=store)
    await first.send_message(Deposit(10), AgentId("account", "a"))
    assert await first.evict_idle() == 1  # the store now holds 10
    await first.send_message(Deposit(5), AgentId("account", "a"))  # live again: 15
    await first.send_message(Deposit(1), AgentId("account", "never-evicted"))
    await first.close()
    second = await _runtime(store=store)
    assert await second.send_message(Balance(), AgentId("account", "a")) == 15
    assert await second.send_message(Balance(), AgentId("account", "never-evicted")) == 1
    await second.close()
