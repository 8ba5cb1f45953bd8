"""What a memory provider adds to an agent turn: 100,000 memories in 1,000 users' scopes
(100 each, in one `InMemoryItemStore`, deterministic hashing embeddings), a `ChatAgent` on
an instant scripted model with and without a `MemoryProvider` (recall only, top 5 by
hybrid search in the caller's scope), median turn time of each and the difference (the
goal: under 1 ms). No peer has this workload as one call, so no peer row: the figure to
watch is the difference.

Not run by `run.py`: ``PYTHONPATH=src .venv/bin/python benchmarks/memory_turn.py``.
Measured twice on the shared 2-core machine, with a test run going on beside it: turn p50
without 0.025 and 0.036 ms, with 0.283 and 0.464 ms, difference 0.26 and 0.43 ms.
"""

from __future__ import annotations

import asyncio
import statistics
import time

from cantata.agents import ChatAgent, Memory, MemoryProvider
from cantata.models import ScriptedChatClient
from cantata.models.embeddings import HashEmbeddingClient
from cantata.stores import InMemoryItemStore, ItemWrite

USERS, PER_USER, TURNS = 1_000, 100, 300


async def _turns(agent: ChatAgent, n: int) -> list[float]:
    out = []
    for k in range(n):
        start = time.perf_counter()
        await agent.run(f"what about topic {k % 37}?", tool_kwargs={"user_id": str(k % USERS)})
        out.append(time.perf_counter() - start)
    return out


async def main() -> None:
    embedder = HashEmbeddingClient()
    store = InMemoryItemStore()
    texts = [
        f"user {u} fact {i} likes topic {i % 37}" for u in range(USERS) for i in range(PER_USER)
    ]
    vectors = await embedder.embed(texts)
    writes = [
        ItemWrite(("user", str(n // PER_USER), "facts"), str(n), {"fact": t}, text=t, vector=v)
        for n, (t, v) in enumerate(zip(texts, vectors, strict=True))
    ]
    for i in range(0, len(writes), 5_000):
        await store.put_many(writes[i : i + 5_000])
    memory = Memory(store, embedder, ("user", "{user_id}", "facts"))
    plain = ChatAgent(ScriptedChatClient(lambda m, o: "ok"))
    remembering = ChatAgent(
        ScriptedChatClient(lambda m, o: "ok"), context_providers=[MemoryProvider(memory)]
    )
    await _turns(plain, 50)  # warm-up
    await _turns(remembering, 50)
    without = statistics.median(await _turns(plain, TURNS)) * 1e3
    with_memory = statistics.median(await _turns(remembering, TURNS)) * 1e3
    print(
        f"{len(texts):,} memories in {USERS:,} scopes: turn p50 without {without:.3f} ms, "
        f"with {with_memory:.3f} ms, difference {with_memory - without:.3f} ms"
    )
    await store.close()


if __name__ == "__main__":
    asyncio.run(main())
