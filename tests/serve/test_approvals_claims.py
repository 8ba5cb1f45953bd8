"""The claim primitive an answer takes (`take_claim`): one holder per key across processes,
a lease after which a dead holder's claim is taken over by one caller only, and a settled
claim held for good."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from cantata.stores import SQLiteStore, held_claim, settle_claim, take_claim


async def test_one_of_many_callers_takes_a_claim_and_a_settled_one_is_kept(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "a.db") as one, SQLiteStore(tmp_path / "a.db") as two:
        taken = await asyncio.gather(
            *(take_claim(s, "k", {"who": i}, lease=60) for i, s in enumerate([one, two] * 4))
        )
        assert taken.count(True) == 1
        assert await held_claim(two, "k") == {"who": taken.index(True) % 2}
        await settle_claim(one, "k", {"answered": "r1"})
        assert not await take_claim(two, "k", lease=60)
        assert await held_claim(two, "k") == {"answered": "r1"}
        assert await held_claim(two, "other") is None


async def test_an_expired_claim_is_taken_over_by_one_caller(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "b.db") as one, SQLiteStore(tmp_path / "b.db") as two:
        await one.put("k", {"until": time.time() - 1})  # its holder died
        taken = await asyncio.gather(
            *(take_claim(s, "k", {"who": i}, lease=60) for i, s in enumerate([one, two] * 4))
        )
        assert taken.count(True) == 1
        assert not await take_claim(one, "k", lease=60)  # the new holder's lease runs
        await one.put("k", {"answering": True})  # held without a deadline: held for good
        assert not await take_claim(two, "k", lease=0.001)


async def test_a_dead_holders_session_claim_goes_to_one_of_many_answers(tmp_path: Path) -> None:
    from cantata.core import AlreadyAnsweredError
    from cantata.workflows import StateStoreCheckpointStore

    async with SQLiteStore(tmp_path / "c.db") as one, SQLiteStore(tmp_path / "c.db") as two:
        await one.put("wf:ckpt:c1", {"a": 1})  # a checkpoint waits (its record is there)
        await one.put("wf:claim:c1", {"until": time.time() - 1})  # its holder died
        stores = [StateStoreCheckpointStore(s, claim_lease=60) for s in (one, two)]
        results = await asyncio.gather(
            *(stores[i % 2].claim("c1") for i in range(8)), return_exceptions=True
        )
        assert results.count(None) == 1, results
        assert all(isinstance(r, AlreadyAnsweredError) for r in results if r is not None)
