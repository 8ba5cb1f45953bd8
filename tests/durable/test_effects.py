"""ctx.effect: an effect runs once per run across a failed superstep and its resume; its
result comes back from the journal; its idempotency key is stable; bad use is typed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cantata.core import WorkflowError
from cantata.stores import SQLiteStore
from cantata.workflows import (
    EffectJournal,
    InMemoryCheckpointStore,
    StateStoreCheckpointStore,
    WorkflowBuilder,
    WorkflowContext,
    executor,
)


class Crash(Exception):
    """Stands for the process dying after the effect and before the boundary."""


def charging_workflow(charges: list[str], keys: list[str], crash: list[bool]) -> Any:
    """prepare -> charge (an effect, then maybe a crash) -> done."""

    def charge_card(amount: int, *, idempotency_key: str) -> dict[str, Any]:
        charges.append(f"charged {amount}")
        keys.append(idempotency_key)
        return {"receipt": f"r-{len(charges)}", "amount": amount}

    @executor
    def prepare(amount: int, ctx: WorkflowContext[int]) -> None:
        ctx.send_message(amount * 2)

    @executor
    async def charge(amount: int, ctx: WorkflowContext[str]) -> None:
        receipt = await ctx.effect("charge", charge_card, amount)
        if crash and crash.pop():
            raise Crash("killed between the effect and the checkpoint")
        ctx.send_message(f"{receipt['receipt']}:{receipt['amount']}")

    @executor
    def done(text: str, ctx: WorkflowContext[None, str]) -> None:
        ctx.yield_output(text)

    return WorkflowBuilder(prepare).add_chain([prepare, charge, done]).build()


async def resume_after_crash(store: Any) -> tuple[list[str], list[str], Any]:
    charges: list[str] = []
    keys: list[str] = []
    wf = charging_workflow(charges, keys, [True])
    with pytest.raises(WorkflowError, match="killed between"):
        await wf.run(21, checkpoint_store=store, run_id="run-1")
    last = (await store.list_checkpoints(run_id="run-1"))[-1]
    result = await wf.resume(last.checkpoint_id, checkpoint_store=store)
    return charges, keys, result


async def test_an_effect_journaled_before_a_crash_does_not_run_again_on_resume() -> None:
    charges, keys, result = await resume_after_crash(InMemoryCheckpointStore())
    assert charges == ["charged 42"]
    assert result.outputs == ["r-1:42"]
    assert keys == ["run-1:charge:2:charge"]


async def test_the_journal_lives_in_a_sqlite_store_across_processes(tmp_path: Path) -> None:
    path = tmp_path / "run.db"
    store = StateStoreCheckpointStore(SQLiteStore(path))
    charges, _, result = await resume_after_crash(store)
    await store.close()
    assert charges == ["charged 42"] and result.outputs == ["r-1:42"]
    reopened = SQLiteStore(path)
    try:
        assert await EffectJournal(reopened).keys("run-1") == ["run-1:charge:2:charge"]
        assert await EffectJournal(reopened).lookup("run-1:charge:2:charge") == (
            True,
            {"receipt": "r-1", "amount": 42},
        )
    finally:
        await reopened.close()


async def test_the_journal_lives_in_postgres(postgres_dsn: str) -> None:
    from cantata.core import new_id
    from cantata.stores import PostgresStore

    prefix = f"t{new_id()[:12]}_"
    store = StateStoreCheckpointStore(PostgresStore(postgres_dsn, table_prefix=prefix))
    try:
        charges, keys, result = await resume_after_crash(store)
        assert charges == ["charged 42"] and result.outputs == ["r-1:42"]
        assert await EffectJournal(store.store).keys("run-1") == keys
    finally:
        import psycopg

        await store.close()
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            names = ", ".join(
                f'"{prefix}{t}"' for t in ("meta", "log_heads", "log_entries", "values")
            )
            conn.execute(f"DROP TABLE IF EXISTS {names}".encode())


async def test_without_a_store_the_effect_runs_each_time_and_still_gets_its_key() -> None:
    charges: list[str] = []
    keys: list[str] = []
    wf = charging_workflow(charges, keys, [])
    first = await wf.run(1, run_id="a")
    second = await wf.run(1, run_id="a")
    assert first.outputs == ["r-1:2"] and second.outputs == ["r-2:2"]
    assert keys == ["a:charge:2:charge", "a:charge:2:charge"]


async def test_a_key_used_twice_in_one_call_gets_a_second_idempotency_key() -> None:
    seen: list[str] = []

    async def send(n: int, idempotency_key: str) -> int:
        seen.append(idempotency_key)
        return n

    @executor
    async def twice(n: int, ctx: WorkflowContext[None, list[int]]) -> None:
        assert ctx.idempotency_key("mail") == "r:twice:1:mail"
        a = await ctx.effect("mail", send, n)
        assert ctx.idempotency_key("mail") == "r:twice:1:mail#2"
        b = await ctx.effect("mail", send, n + 1)
        ctx.yield_output([a, b])

    store = InMemoryCheckpointStore()
    result = await WorkflowBuilder(twice).build().run(5, checkpoint_store=store, run_id="r")
    assert result.outputs == [[5, 6]] and seen == ["r:twice:1:mail", "r:twice:1:mail#2"]


async def test_a_function_without_the_keyword_is_called_with_its_arguments_only() -> None:
    @executor
    async def plain(n: int, ctx: WorkflowContext[None, int]) -> None:
        ctx.yield_output(await ctx.effect("add", lambda a, b: a + b, n, 1))

    result = await WorkflowBuilder(plain).build().run(1, checkpoint_store=InMemoryCheckpointStore())
    assert result.outputs == [2]


async def test_a_result_that_cannot_be_journaled_is_a_typed_error() -> None:
    @executor
    async def bad(n: int, ctx: WorkflowContext[None, int]) -> None:
        await ctx.effect("lock", object)

    wf = WorkflowBuilder(bad).build()
    with pytest.raises(WorkflowError, match="cannot be journaled"):
        await wf.run(1, checkpoint_store=InMemoryCheckpointStore())


async def test_a_failing_effect_is_not_journaled_and_runs_again_on_resume() -> None:
    calls: list[int] = []

    def flaky(n: int) -> int:
        calls.append(n)
        if len(calls) == 1:
            raise ConnectionResetError("reset")
        return n

    @executor
    async def once(n: int, ctx: WorkflowContext[None, int]) -> None:
        ctx.yield_output(await ctx.effect("call", flaky, n))

    wf = WorkflowBuilder(once).build()
    store = InMemoryCheckpointStore()
    with pytest.raises(WorkflowError):
        await wf.run(3, checkpoint_store=store, run_id="f")
    entry = (await store.list_checkpoints(run_id="f"))[-1]
    result = await wf.resume(entry.checkpoint_id, checkpoint_store=store)
    assert result.outputs == [3] and calls == [3, 3]


@given(key=st.one_of(st.just(""), st.integers(), st.none(), st.binary(), st.lists(st.text())))
async def test_a_key_that_is_not_a_non_empty_string_is_refused(key: Any) -> None:
    @executor
    async def keyed(n: int, ctx: WorkflowContext[None, int]) -> None:
        await ctx.effect(key, int, n)

    with pytest.raises(WorkflowError, match="non-empty string"):
        await WorkflowBuilder(keyed).build().run(1)


async def test_a_function_that_is_not_callable_is_refused() -> None:
    @executor
    async def keyed(n: int, ctx: WorkflowContext[None, int]) -> None:
        await ctx.effect("x", 42)

    with pytest.raises(WorkflowError, match="not a function to run"):
        await WorkflowBuilder(keyed).build().run(1)
