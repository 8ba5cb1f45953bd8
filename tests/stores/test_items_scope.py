"""Scopes hold: whatever is written where, a read under a prefix sees only what is under it.

Hypothesis drives puts, deletes and clears over several namespaces and checks every read
(get, list, vector, text and hybrid search, namespaces) against a plain dict model: no
item from outside the queried prefix ever comes back, and none inside it goes missing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cantata.stores import ItemStore, Namespace, SQLiteItemStore

from ._items import BACKENDS, Opener, provide

USERS = ("u1", "u2", "u10")
SPACES: list[Namespace] = [("user", u, kind) for u in USERS for kind in ("facts", "prefs")] + [
    ("team", "t1")
]
PREFIXES: list[Namespace] = [(), ("user",), ("team",), ("user", "u1"), *SPACES]
WORDS = ("tea", "coffee", "green", "blue", "whale")

_put = st.tuples(
    st.just("put"),
    st.sampled_from(SPACES),
    st.sampled_from("abcd"),
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join),
    st.integers(0, 50),
)
_delete = st.tuples(st.just("delete"), st.sampled_from(SPACES), st.sampled_from("abcd"))
_clear = st.tuples(st.just("clear"), st.sampled_from(PREFIXES[1:]))
_read = st.tuples(st.just("read"), st.sampled_from(PREFIXES), st.sampled_from(WORDS))
OPS = st.lists(st.one_of(_put, _put, _delete, _clear, _read, _read), min_size=1, max_size=25)


def _under(namespace: Namespace, prefix: Namespace) -> bool:
    return namespace[: len(prefix)] == prefix


def _vector(seed: int) -> list[float]:
    return list(np.random.default_rng(seed).normal(size=6) + 0.1)


@pytest.fixture(params=BACKENDS)
async def opener(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Opener]:
    async for found in provide(request.param, request, tmp_path):
        yield found


async def _check_reads(
    store: ItemStore, model: dict[tuple[Namespace, str], Any], prefix: Namespace, word: str
) -> None:
    expected = sorted((ns, k) for ns, k in model if _under(ns, prefix))
    listed = await store.list(prefix, limit=1000)
    assert [(i.namespace, i.key) for i in listed] == expected
    assert all(i.value == model[(i.namespace, i.key)] for i in listed)
    assert await store.namespaces(prefix) == sorted({ns for ns, _ in expected})
    for hits in (
        await store.search(prefix, vector=_vector(1), limit=50),
        await store.search(prefix, text=word, limit=50),
        await store.search(prefix, vector=_vector(2), text=word, limit=50),
        await store.search(prefix, vector=_vector(3), filter={"n": {"$gte": 25}}, limit=50),
    ):
        for hit in hits:
            assert _under(hit.item.namespace, prefix), (hit.item.namespace, prefix)
            assert (hit.item.namespace, hit.item.key) in model
    vector_hits = await store.search(prefix, vector=_vector(1), limit=50)
    assert sorted((h.item.namespace, h.item.key) for h in vector_hits) == expected
    text_hits = await store.search(prefix, text=word, limit=50)
    assert sorted((h.item.namespace, h.item.key) for h in text_hits) == sorted(
        (ns, k) for ns, k in expected if word in model[(ns, k)]["text"].split()
    )


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
async def test_reads_never_cross_scopes(opener: Opener, ops: list[tuple[Any, ...]]) -> None:
    store = await opener()
    await store.clear(())
    model: dict[tuple[Namespace, str], Any] = {}
    for op in ops:
        if op[0] == "put":
            _, ns, key, text, n = op
            value = {"text": text, "n": n}
            await store.put(ns, key, value, text=text, vector=_vector(n))
            model[(ns, key)] = value
        elif op[0] == "delete":
            _, ns, key = op
            assert await store.delete(ns, key) == ((ns, key) in model)
            model.pop((ns, key), None)
        elif op[0] == "clear":
            _, prefix = op
            gone = [k for k in model if _under(k[0], prefix)]
            assert await store.clear(prefix) == len(gone)
            for k in gone:
                del model[k]
        else:
            _, prefix, word = op
            await _check_reads(store, model, prefix, word)
    await _check_reads(store, model, ("user", "u1"), "tea")


async def test_a_second_connection_sees_writes_at_once(tmp_path: Path) -> None:
    """Vector matrices are cached per namespace; a write by another store (another process
    would do the same) bumps the namespace's version, so the next query reloads it."""
    path = tmp_path / "shared.db"
    async with SQLiteItemStore(path) as reader, SQLiteItemStore(path) as writer:
        ns = ("user", "u1")
        await writer.put(ns, "a", {}, vector=[1.0, 0.0, 0.0])
        assert [h.item.key for h in await reader.search(ns, vector=[1, 0, 0])] == ["a"]
        await writer.put(ns, "b", {}, vector=[0.0, 1.0, 0.0])
        await writer.put(ns, "a", {}, vector=[0.0, 0.0, 1.0])
        hits = await reader.search(ns, vector=[0, 1, 0], limit=1)
        assert [h.item.key for h in hits] == ["b"]
        hits = await reader.search(ns, vector=[0, 0, 1], limit=1)
        assert [h.item.key for h in hits] == ["a"] and hits[0].score == pytest.approx(1.0)
        await writer.delete(ns, "a")
        assert [h.item.key for h in await reader.search(ns, vector=[0, 0, 1])] == ["b"]
        assert reader.dimensions == 3


async def test_the_file_keeps_its_dimensions(tmp_path: Path) -> None:
    from cantata.stores import VectorSizeError

    path = tmp_path / "dims.db"
    async with SQLiteItemStore(path) as store:
        await store.put(("n",), "a", {}, vector=[1.0, 2.0])
    async with SQLiteItemStore(path) as store:
        assert store.dimensions == 2
        with pytest.raises(VectorSizeError):
            await store.put(("n",), "b", {}, vector=[1.0, 2.0, 3.0])
    with pytest.raises(VectorSizeError, match="2 dimensions"):
        await SQLiteItemStore(path, dimensions=3).open()
