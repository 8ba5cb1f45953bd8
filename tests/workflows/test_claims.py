"""Claims on waiting runs: one answer goes on; under a lease, a dead holder's claim expires."""

from __future__ import annotations

import time

import pytest

from cantata.core import AlreadyAnsweredError, ConfigurationError
from cantata.stores import MemoryStore
from cantata.workflows import StateStoreCheckpointStore


async def _waiting(lease: float | None) -> tuple[MemoryStore, StateStoreCheckpointStore]:
    store = MemoryStore()
    await store.put("wf:ckpt:c1", {"a": "checkpoint"})  # claim only looks that it exists
    return store, StateStoreCheckpointStore(store, claim_lease=lease)


async def test_a_second_answer_is_refused_and_without_a_lease_a_claim_never_expires() -> None:
    store, checkpoints = await _waiting(None)
    await checkpoints.claim("c1")
    with pytest.raises(AlreadyAnsweredError, match="answered by another request"):
        await checkpoints.claim("c1")
    await store.put("wf:claim:c1", {"until": time.time() - 3600})  # old, yet no lease
    with pytest.raises(AlreadyAnsweredError):
        await checkpoints.claim("c1")


async def test_under_a_lease_the_claim_of_a_holder_that_died_is_taken_over() -> None:
    store, checkpoints = await _waiting(30.0)
    await checkpoints.claim("c1")
    with pytest.raises(AlreadyAnsweredError):
        await checkpoints.claim("c1")  # its holder is within its lease
    await store.put("wf:claim:c1", {"until": time.time() - 1})  # the holder died long ago
    await checkpoints.claim("c1")
    held = await store.get("wf:claim:c1")
    assert held["until"] > time.time() + 25
    with pytest.raises(AlreadyAnsweredError):
        await checkpoints.claim("c1")
    await checkpoints.release("c1")
    await checkpoints.claim("c1")


async def test_a_claim_on_a_run_that_finished_is_refused_even_under_a_lease() -> None:
    store, checkpoints = await _waiting(30.0)
    await store.delete("wf:ckpt:c1")  # answered and ended: its checkpoints are gone
    with pytest.raises(AlreadyAnsweredError):
        await checkpoints.claim("c1")
    assert await store.get("wf:claim:c1") is None


@pytest.mark.parametrize("lease", [0, -1.0, float("nan")])
def test_a_lease_must_be_positive(lease: float) -> None:
    with pytest.raises(ConfigurationError, match="claim_lease"):
        StateStoreCheckpointStore(MemoryStore(), claim_lease=lease)
