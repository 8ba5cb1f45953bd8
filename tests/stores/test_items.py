"""The item store contract, on every backend: the same test, the same answer."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest

from cantata.core import StoreError, UsageError
from cantata.stores import (
    FilterError,
    ItemStore,
    ItemWrite,
    NamespaceError,
    StoreClosedError,
    VectorSizeError,
    open_item_store,
)

from ._items import BACKENDS, Clock, Opener, provide

NS = ("user", "u1", "facts")


@pytest.fixture(params=BACKENDS)
async def opener(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Opener]:
    async for found in provide(request.param, request, tmp_path):
        yield found


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def store(opener: Opener, clock: Clock) -> ItemStore:
    return await opener(clock=clock)


def _vec(seed: int, dims: int = 8) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=dims)


async def test_put_get_replace(store: ItemStore, clock: Clock) -> None:
    await store.put(NS, "a", {"kind": "fact", "n": 1}, text="Alice likes tea")
    first = await store.get(NS, "a")
    assert first is not None
    assert (first.namespace, first.key, first.value, first.text) == (
        NS,
        "a",
        {"kind": "fact", "n": 1},
        "Alice likes tea",
    )
    clock.advance(5)
    await store.put(NS, "a", {"kind": "fact", "n": 2})
    second = await store.get(NS, "a")
    assert second is not None
    assert second.value == {"kind": "fact", "n": 2} and second.text is None
    assert second.created_at == first.created_at and second.updated_at == first.updated_at + 5
    assert await store.get(NS, "missing") is None
    assert await store.get(("user", "u2", "facts"), "a") is None


async def test_a_returned_value_is_a_copy(store: ItemStore) -> None:
    await store.put(NS, "a", {"tags": ["x"]})
    item = await store.get(NS, "a")
    assert item is not None
    item.value["tags"].append("y")
    again = await store.get(NS, "a")
    assert again is not None and again.value == {"tags": ["x"]}


async def test_delete_and_clear(store: ItemStore) -> None:
    await store.put(NS, "a", {})
    await store.put(("user", "u1", "prefs"), "b", {})
    await store.put(("user", "u2", "facts"), "c", {})
    assert await store.delete(NS, "a") is True
    assert await store.delete(NS, "a") is False
    assert await store.clear(("user", "u1")) == 1
    assert [i.key for i in await store.list(())] == ["c"]
    assert await store.namespaces() == [("user", "u2", "facts")]


async def test_prefix_is_by_component(store: ItemStore) -> None:
    await store.put(("a",), "1", {})
    await store.put(("ab",), "2", {})
    await store.put(("a", "b"), "3", {})
    assert [i.key for i in await store.list(("a",))] == ["1", "3"]
    assert [i.key for i in await store.list(("ab",))] == ["2"]
    assert await store.namespaces(("a",)) == [("a",), ("a", "b")]
    hits = await store.search(("a",), text="anything")
    assert hits == []


async def test_list_orders_and_pages(store: ItemStore) -> None:
    for ns in (("n", "2"), ("n", "1")):
        for key in ("b", "a"):
            await store.put(ns, key, {"ns": ns[1]})
    listed = await store.list(("n",))
    assert [(i.namespace[1], i.key) for i in listed] == [
        ("1", "a"),
        ("1", "b"),
        ("2", "a"),
        ("2", "b"),
    ]
    page = await store.list(("n",), limit=2, offset=1)
    assert [(i.namespace[1], i.key) for i in page] == [("1", "b"), ("2", "a")]


FILTER_ITEMS = {
    "a": {"kind": "fact", "n": 3, "flag": True, "meta": {"lang": "en"}},
    "b": {"kind": "pref", "n": 5.5, "flag": False, "meta": {"lang": "fr"}},
    "c": {"kind": "fact", "n": "6", "flag": 1},
    "d": {"kind": None, "n": 10},
    "e": {"other": "x"},
}
FILTER_CASES = [
    ({"kind": "fact"}, "ac"),
    ({"kind": {"$eq": "fact"}}, "ac"),
    ({"kind": {"$ne": "fact"}}, "bde"),
    ({"kind": None}, "d"),
    ({"n": {"$gt": 3}}, "bd"),
    ({"n": {"$gte": 3, "$lt": 10}}, "ab"),
    ({"n": {"$lte": 5.5}}, "ab"),
    ({"n": {"$gt": "5"}}, "c"),
    ({"flag": True}, "a"),
    ({"flag": 1}, "c"),
    ({"kind": {"$in": ["pref", None]}}, "bd"),
    ({"kind": {"$nin": ["fact"]}}, "bde"),
    ({"kind": {"$in": []}}, ""),
    ({"meta.lang": "fr"}, "b"),
    ({"kind": "fact", "n": {"$gt": 4}}, ""),
]


@pytest.mark.parametrize(("filter", "expected"), FILTER_CASES)
async def test_filters(store: ItemStore, filter: dict[str, object], expected: str) -> None:
    for key, value in FILTER_ITEMS.items():
        await store.put(NS, key, value, text="same words", vector=_vec(ord(key)))
    assert "".join(i.key for i in await store.list(NS, filter=filter)) == expected
    hits = await store.search(NS, vector=_vec(1), filter=filter, limit=10)
    assert sorted(h.item.key for h in hits) == list(expected)
    hits = await store.search(NS, text="words", filter=filter, limit=10)
    assert sorted(h.item.key for h in hits) == list(expected)


@pytest.mark.parametrize(
    "bad",
    [
        {"n": {"$regex": "x"}},
        {"n": {"$gt": True}},
        {"n": {"$gt": None}},
        {"n": {"$in": "abc"}},
        {"n": {"$eq": [1]}},
        {"n": {}},
        {"": 1},
        {"$n": 1},
        {"a..b": 1},
        {"n": {"$eq": float("nan")}},
    ],
)
async def test_bad_filters_raise(store: ItemStore, bad: dict[str, object]) -> None:
    with pytest.raises(FilterError):
        await store.list(NS, filter=bad)
    with pytest.raises(FilterError):
        await store.search(NS, text="x", filter=bad)


async def test_unknown_operator_names_it(store: ItemStore) -> None:
    with pytest.raises(FilterError, match=r"\$regex.*\$eq") as caught:
        await store.list(NS, filter={"n": {"$regex": "x"}})
    assert caught.value.operator == "$regex"  # type: ignore[attr-defined]
    assert isinstance(caught.value, UsageError) and isinstance(caught.value, ValueError)


async def test_ttl(store: ItemStore, clock: Clock) -> None:
    await store.put(NS, "short", {"n": 1}, text="fleeting words", vector=_vec(1), ttl=10)
    await store.put(NS, "long", {"n": 2}, text="lasting words", vector=_vec(2))
    item = await store.get(NS, "short")
    assert item is not None and item.expires_at == clock.now + 10
    clock.advance(10)
    assert await store.get(NS, "short") is None
    assert [i.key for i in await store.list(NS)] == ["long"]
    assert [h.item.key for h in await store.search(NS, vector=_vec(1))] == ["long"]
    assert [h.item.key for h in await store.search(NS, text="words fleeting")] == ["long"]
    assert await store.delete(NS, "short") is False  # expired: not live
    await store.put(("tmp",), "x", {}, ttl=1)
    clock.advance(1)
    assert await store.namespaces() == [NS]
    assert await store.sweep() == 1
    await store.put(NS, "long", {"n": 3}, ttl=5)
    clock.advance(6)
    await store.put(NS, "long", {"n": 4})
    again = await store.get(NS, "long")
    assert again is not None and again.created_at == clock.now  # a new item, not a renewal


async def test_vector_size_and_norm(opener: Opener, clock: Clock) -> None:
    store = await opener(clock=clock, dimensions=8)
    assert store.dimensions == 8
    with pytest.raises(VectorSizeError, match=r"3 dimensions.*8"):
        await store.put(NS, "a", {}, vector=[1.0, 2.0, 3.0])
    with pytest.raises(VectorSizeError, match="norm"):
        await store.put(NS, "a", {}, vector=[0.0] * 8)
    with pytest.raises(VectorSizeError):
        await store.search(NS, vector=[1.0] * 9)
    assert await store.list(NS) == []


async def test_first_vector_fixes_the_size(store: ItemStore) -> None:
    assert store.dimensions is None
    await store.put(NS, "a", {}, vector=_vec(1, 4))
    assert store.dimensions == 4
    with pytest.raises(VectorSizeError):
        await store.put(NS, "b", {}, vector=_vec(1, 5))


async def test_put_many_is_all_or_nothing(store: ItemStore) -> None:
    good = [ItemWrite(NS, str(i), {"i": i}, vector=_vec(i)) for i in range(3)]
    with pytest.raises(VectorSizeError):
        await store.put_many([*good, ItemWrite(NS, "bad", {}, vector=_vec(9, 3))])
    with pytest.raises(UsageError):
        await store.put_many([*good, ItemWrite(NS, "bad", ["not", "a", "dict"])])  # type: ignore[arg-type]
    assert await store.list(NS) == []
    await store.put_many(good)
    assert [i.key for i in await store.list(NS)] == ["0", "1", "2"]


@pytest.mark.parametrize(
    "namespace", [(), ("",), ["user"], ("a\x1fb",), ("a\x00",), ("x", 3), "user"]
)
async def test_bad_namespaces(store: ItemStore, namespace: object) -> None:
    with pytest.raises(NamespaceError):
        await store.put(namespace, "k", {})  # type: ignore[arg-type]


async def test_bad_arguments(store: ItemStore) -> None:
    with pytest.raises(NamespaceError):
        await store.put(NS, "", {})
    with pytest.raises(UsageError):
        await store.put(NS, "k", {}, ttl=0)
    with pytest.raises(UsageError):
        await store.list(NS, limit=0)
    with pytest.raises(StoreError, match="not JSON"):
        await store.put(NS, "k", {"x": float("inf")})
    with pytest.raises(NamespaceError):
        await store.list(["user"])  # type: ignore[arg-type]


async def test_exact_top_k_equals_brute_force(store: ItemStore) -> None:
    rng = np.random.default_rng(7)
    matrix = rng.normal(size=(600, 16)).astype(np.float32)
    spaces = [("user", str(u), "facts") for u in range(3)]
    await store.put_many(
        [
            ItemWrite(spaces[i % 3], f"k{i}", {"i": i, "even": i % 2 == 0}, vector=row)
            for i, row in enumerate(matrix)
        ]
    )
    unit = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
    for q in range(5):
        query = rng.normal(size=16)
        scores = unit @ (query / np.linalg.norm(query))
        for prefix, rows in (
            (spaces[1], [i for i in range(600) if i % 3 == 1]),
            (("user",), list(range(600))),
        ):
            chosen = np.array(rows)
            best = chosen[np.argsort(-scores[chosen])[:10]]
            hits = await store.search(prefix, vector=query, limit=10)
            assert [h.item.key for h in hits] == [f"k{i}" for i in best], q
            assert np.allclose([h.score for h in hits], scores[best], atol=1e-5)
        evens = np.array([i for i in range(600) if i % 2 == 0])
        best = evens[np.argsort(-scores[evens])[:10]]
        hits = await store.search(("user",), vector=query, filter={"even": True}, limit=10)
        assert [h.item.key for h in hits] == [f"k{i}" for i in best]


async def test_text_search_ranks_and_folds(store: ItemStore) -> None:
    await store.put(NS, "both", {}, text="Green tea in the morning")
    await store.put(NS, "one", {}, text="a cup of tea")
    await store.put(NS, "none", {}, text="coffee, black")
    await store.put(NS, "accent", {}, text="Crème brûlée")
    await store.put(("user", "u2", "facts"), "other", {}, text="green tea")
    hits = await store.search(NS, text="GREEN tea")
    assert [h.item.key for h in hits] == ["both", "one"]
    assert hits[0].score > hits[1].score and hits[0].text_score == hits[0].score
    assert [h.item.key for h in await store.search(NS, text="creme brulee")] == ["accent"]
    assert await store.search(NS, text="!!! ...") == []


async def test_hybrid_search_fuses_ranks(store: ItemStore) -> None:
    query = _vec(1)
    await store.put(NS, "near-and-named", {}, text="the blue whale", vector=query + 0.01)
    await store.put(NS, "near", {}, text="something else", vector=query + 0.5)
    await store.put(NS, "named", {}, text="blue whale facts", vector=-query)
    await store.put(NS, "neither", {}, text="nothing", vector=-query + 0.5)
    hits = await store.search(NS, vector=query, text="blue whale", limit=3)
    assert hits[0].item.key == "near-and-named"
    assert {h.item.key for h in hits[1:]} == {"near", "named"}
    first = hits[0]
    assert first.similarity is not None and first.text_score is not None
    assert first.score == pytest.approx(2 / 61)
    only_text = next(h for h in hits if h.item.key == "named")
    assert only_text.similarity is not None  # ranked by both, even if last by one


async def test_search_without_query_lists(store: ItemStore) -> None:
    await store.put(NS, "b", {"n": 1})
    await store.put(NS, "a", {"n": 2})
    hits = await store.search(NS, filter={"n": {"$gte": 1}})
    assert [h.item.key for h in hits] == ["a", "b"]


async def test_closed_store_refuses(opener: Opener) -> None:
    store = await opener()
    await store.close()
    await store.close()
    with pytest.raises(StoreClosedError):
        await store.get(NS, "a")


@pytest.mark.parametrize("url", ["memory://", "sqlite://:memory:"])
async def test_open_item_store(url: str) -> None:
    store = open_item_store(url, dimensions=4)
    try:
        await store.put(NS, "a", {"x": 1}, vector=[1, 0, 0, 0])
        hits = await store.search(NS, vector=[1, 0, 0, 0])
        assert [h.item.key for h in hits] == ["a"] and store.dimensions == 4
    finally:
        await store.close()


def test_open_item_store_refuses_unknown_schemes() -> None:
    with pytest.raises(UsageError, match="memory"):
        open_item_store("mongodb://x")
    with pytest.raises(UsageError):
        open_item_store(3)  # type: ignore[arg-type]


@pytest.mark.postgres
async def test_open_item_store_postgres(postgres_dsn: str) -> None:
    import psycopg

    from cantata.core import new_id

    prefix = f"t{new_id()[:12]}_"
    store = open_item_store(postgres_dsn, table_prefix=prefix)
    try:
        await store.put(NS, "a", {"x": 1}, text="hello there", vector=[0, 1])
        hits = await store.search(NS, vector=[0, 1], text="hello")
        assert [h.item.key for h in hits] == ["a"] and store.dimensions == 2
    finally:
        await store.close()
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            for table in ("item_meta", "item_namespaces", "items"):
                conn.execute(f'DROP TABLE IF EXISTS "{prefix}{table}"'.encode())


@pytest.fixture(params=BACKENDS[1:])  # an in-memory store is one process's own
async def shared(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Opener]:
    async for found in provide(request.param, request, tmp_path):
        yield found


async def test_a_second_store_sees_the_firsts_writes(shared: Opener, clock: Clock) -> None:
    """Two stores on one database (as two processes are): every write by one is seen by the
    other's next read, though each keeps copies of what it queried (vectors, and on Redis
    whole namespaces)."""
    opener = shared
    one = await opener(clock=clock)
    two = await opener(clock=clock)
    await one.put(NS, "a", {"n": 1}, text="green tea", vector=_vec(1))
    assert [h.item.key for h in await two.search(NS, vector=_vec(1), text="tea")] == ["a"]
    assert two.dimensions == 8
    await one.put(NS, "b", {"n": 2}, text="black tea", vector=_vec(2))
    hits = await two.search(NS, vector=_vec(2), limit=1)
    assert [h.item.key for h in hits] == ["b"]
    assert await one.delete(NS, "b") is True
    assert [h.item.key for h in await two.search(NS, vector=_vec(2))] == ["a"]
    await two.put(NS, "a", {"n": 3})
    listed = await one.list(NS)
    assert [i.value for i in listed] == [{"n": 3}] and listed[0].text is None
    assert await one.search(NS, text="tea") == []
    with pytest.raises(VectorSizeError):
        await two.put(NS, "c", {}, vector=_vec(3, 4))
    assert await one.clear(("user",)) == 1
    assert await two.namespaces() == [] and await two.list(NS) == []


async def test_concurrent_writers_lose_nothing(opener: Opener, clock: Clock) -> None:
    """Writers racing on one namespace (with TTLs, so every write also sweeps): each write
    lands whole, none is lost (on Redis a write whose reads went stale retries)."""
    stores = [await opener(clock=clock) for _ in range(2 if opener.name != "memory" else 1)]

    async def write(n: int) -> None:
        store = stores[n % len(stores)]
        batch = [ItemWrite(NS, f"k{n}-{i}", {"n": n}, text=f"word{n}", ttl=50) for i in range(3)]
        await store.put_many(batch)

    import asyncio

    await asyncio.gather(*(write(n) for n in range(12)))
    listed = await stores[-1].list(NS, limit=100)
    assert sorted(i.key for i in listed) == sorted(f"k{n}-{i}" for n in range(12) for i in range(3))
    clock.advance(50)
    assert await stores[0].sweep() == 36 and await stores[-1].list(NS) == []


@pytest.mark.redis
async def test_open_item_store_redis(redis_url: str) -> None:
    import redis

    from cantata.core import new_id
    from cantata.stores import RedisItemStore

    prefix = f"cantata-test:{new_id()[:12]}:"
    store = open_item_store(redis_url, prefix=prefix)
    try:
        assert isinstance(store, RedisItemStore)
        await store.put(NS, "a", {"x": 1}, text="hello there", vector=[0, 1])
        hits = await store.search(NS, vector=[0, 1], text="hello")
        assert [h.item.key for h in hits] == ["a"] and store.dimensions == 2
    finally:
        await store.close()
        with redis.Redis.from_url(redis_url) as client:
            for key in client.scan_iter(match=f"{prefix}*"):
                client.delete(key)


async def test_sqlite_full_text_index_stays_whole(tmp_path: Path) -> None:
    """The SQLite store keeps FTS5 itself, a statement a batch: after replaces, a batch that
    writes one key twice, deletes, sweeps and clears, FTS5's own integrity check passes and
    search finds exactly the live texts. A version 1 file (kept by triggers) is upgraded."""
    import sqlite3

    from cantata.stores import SQLiteItemStore

    path = tmp_path / "items.db"
    clock = Clock()
    store = await SQLiteItemStore(path, clock=clock).open()
    await store.put(NS, "a", {}, text="green tea")
    await store.close()
    with sqlite3.connect(path) as db:  # as version 1 left it
        db.execute("UPDATE cantata_item_meta SET value = '1' WHERE name = 'schema_version'")
        db.execute(
            "CREATE TRIGGER cantata_items_fts_insert AFTER INSERT ON cantata_items "
            "WHEN new.text IS NOT NULL BEGIN INSERT INTO cantata_items_fts (rowid, text) "
            "VALUES (new.id, new.text); END"
        )
    store = await SQLiteItemStore(path, clock=clock).open()
    await store.put_many(
        [
            ItemWrite(NS, "a", {}, text="black coffee"),
            ItemWrite(NS, "b", {}, text="green tea"),
            ItemWrite(NS, "b", {}, text="mint tea"),
            ItemWrite(NS, "c", {}, text="tea for later", ttl=5),
            ItemWrite(("other",), "d", {}, text="tea elsewhere"),
        ]
    )
    await store.put(NS, "e", {}, text="green leaves")
    await store.put(NS, "e", {})
    assert await store.delete(NS, "a") is True
    clock.advance(5)
    await store.put(NS, "f", {}, text="oolong tea")
    assert await store.clear(("other",)) == 1
    assert sorted(h.item.key for h in await store.search((), text="tea")) == ["b", "f"]
    assert await store.search((), text="green coffee") == []
    await store.close()
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO cantata_items_fts (cantata_items_fts) VALUES ('integrity-check')")
        triggers = db.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall()
        version = db.execute(
            "SELECT value FROM cantata_item_meta WHERE name = 'schema_version'"
        ).fetchone()
    assert triggers == [("cantata_items_fts_delete",)] and version == ("2",)


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        ([0.0] * 8, "norm"),
        ([float("nan")] * 8, "norm"),
        ([1.0] * 3, "3 dimensions"),
        ("abc", "sequence of numbers"),
    ],
)
async def test_a_bad_vector_in_a_batch_is_named(store: ItemStore, bad: object, match: str) -> None:
    """Vectors are normalized a batch at a time; one bad vector still gets its own error,
    and nothing of the batch is written."""
    good = [ItemWrite(NS, str(i), {}, vector=_vec(i)) for i in range(3)]
    with pytest.raises(VectorSizeError, match=match):
        await store.put_many([*good, ItemWrite(NS, "bad", {}, vector=bad)])  # type: ignore[arg-type]
    assert await store.list(NS) == []
    await store.put_many(good)
    hits = await store.search(NS, vector=_vec(1), limit=1)
    assert [h.item.key for h in hits] == ["1"] and hits[0].score == pytest.approx(1.0)
