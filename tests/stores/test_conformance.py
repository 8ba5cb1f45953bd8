"""The `StateStore` contract, checked rule by rule on memory, SQLite, PostgreSQL and Redis."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

from cantata.core import StoreError
from cantata.stores import StateStore, StoreClosedError, StoreCorruptionError


async def test_is_a_state_store(store: StateStore) -> None:
    assert isinstance(store, StateStore)


# -- logs -------------------------------------------------------------------------------


async def test_a_log_never_written_is_empty(store: StateStore) -> None:
    assert await store.length("nothing") == 0
    assert await store.read("nothing") == []
    assert await store.read("nothing", -3) == []


async def test_append_returns_the_new_length_and_keeps_order(store: StateStore) -> None:
    assert await store.append("log", ["a"]) == 1
    assert await store.append("log", ["b", "c", "d"]) == 4
    assert await store.length("log") == 4
    assert await store.read("log") == ["a", "b", "c", "d"]


async def test_append_nothing_returns_the_length_and_writes_nothing(store: StateStore) -> None:
    assert await store.append("log", []) == 0
    await store.append("log", [1, 2])
    assert await store.append("log", []) == 2
    assert await store.read("log") == [1, 2]


async def test_append_takes_any_sequence(store: StateStore) -> None:
    assert await store.append("log", (1, 2)) == 2
    assert await store.read("log") == [1, 2]


@pytest.mark.parametrize(
    ("start", "stop"),
    [
        (0, None),
        (2, None),
        (2, 5),
        (5, 2),
        (0, 0),
        (3, 100),
        (100, None),
        (-3, None),
        (-3, -1),
        (0, -2),
        (-100, 2),
        (-2, 100),
        (-1, -3),
    ],
)
async def test_read_slices_like_a_list(store: StateStore, start: int, stop: int | None) -> None:
    items = list(range(7))
    await store.append("log", items)
    assert await store.read("log", start, stop) == items[start:stop]


async def test_read_refuses_non_integer_bounds(store: StateStore) -> None:
    await store.append("log", [1])
    with pytest.raises(StoreError, match="start"):
        await store.read("log", "0")  # type: ignore[arg-type]
    with pytest.raises(StoreError, match="stop"):
        await store.read("log", 0, 1.5)  # type: ignore[arg-type]


async def test_logs_are_independent(store: StateStore) -> None:
    await store.append("a", [1])
    await store.append("b", [2, 3])
    await store.append("a", [4])
    assert await store.read("a") == [1, 4]
    assert await store.read("b") == [2, 3]


async def test_delete_log_removes_it_and_positions_restart(store: StateStore) -> None:
    await store.append("log", [1, 2, 3])
    await store.append("other", [9])
    await store.delete_log("log")
    assert await store.length("log") == 0
    assert await store.read("log") == []
    assert await store.append("log", ["new"]) == 1
    assert await store.read("log") == ["new"]
    assert await store.read("other") == [9]


async def test_delete_missing_log_is_fine(store: StateStore) -> None:
    await store.delete_log("never")
    assert await store.length("never") == 0


async def test_logs_and_values_do_not_share_names(store: StateStore) -> None:
    await store.append("same", [1])
    await store.put("same", {"v": 2})
    assert await store.read("same") == [1]
    assert await store.get("same") == {"v": 2}
    await store.delete_log("same")
    assert await store.get("same") == {"v": 2}


# -- values -----------------------------------------------------------------------------


async def test_get_missing_is_none(store: StateStore) -> None:
    assert await store.get("missing") is None


async def test_put_get_overwrite_delete(store: StateStore) -> None:
    await store.put("k", {"a": [1, 2.5, None, True, "x"]})
    assert await store.get("k") == {"a": [1, 2.5, None, True, "x"]}
    await store.put("k", "second")
    assert await store.get("k") == "second"
    await store.delete("k")
    assert await store.get("k") is None
    await store.delete("k")  # missing: fine


async def test_put_many_sets_all(store: StateStore) -> None:
    await store.put("a", 0)
    await store.put_many({"a": 1, "b": [2], "c": {"d": 3}})
    assert [await store.get(k) for k in "abc"] == [1, [2], {"d": 3}]
    await store.put_many({})
    assert await store.keys() == ["a", "b", "c"]


async def test_put_many_with_a_bad_value_writes_nothing(store: StateStore) -> None:
    await store.put("a", "old")
    with pytest.raises(StoreError, match="'c'"):
        await store.put_many({"a": "new", "b": 1, "c": {1, 2}, "d": 4})
    assert await store.get("a") == "old"
    assert await store.keys() == ["a"]


async def test_put_if_absent_sets_only_a_missing_key(store: StateStore) -> None:
    assert await store.put_if_absent("claim", {"by": "a"}) is True
    assert await store.put_if_absent("claim", {"by": "b"}) is False
    assert await store.get("claim") == {"by": "a"}
    await store.delete("claim")
    assert await store.put_if_absent("claim", "again") is True
    assert await store.get("claim") == "again"
    with pytest.raises(StoreError, match="'bad'"):
        await store.put_if_absent("bad", {1, 2})
    assert await store.keys() == ["claim"]


async def test_put_if_absent_has_one_winner_among_concurrent_callers(store: StateStore) -> None:
    won = await asyncio.gather(*(store.put_if_absent("race", n) for n in range(20)))
    assert won.count(True) == 1
    assert await store.get("race") == won.index(True)


async def test_keys_filters_by_prefix_and_sorts(store: StateStore) -> None:
    names = ["b", "a", "ab", "a%", "a_", "a*", "a?", "a[", "a\\", "é", "a\U0001f600", "ba"]
    await store.put_many({name: 1 for name in names})
    assert await store.keys() == sorted(names)
    assert await store.keys("a") == sorted(n for n in names if n.startswith("a"))
    for prefix in ("a%", "a_", "a*", "a?", "a[", "a\\", "zz", "é", "a\U0001f600"):
        assert await store.keys(prefix) == [n for n in sorted(names) if n.startswith(prefix)]


async def test_keys_at_the_top_of_unicode(store: StateStore) -> None:
    top = "\U0010ffff"
    names = ["a" + top, "a" + top + "x", "b", "a\ud7ff", "a\ue000"]
    await store.put_many({name: 1 for name in names})
    assert await store.keys("a" + top) == ["a" + top, "a" + top + "x"]
    assert await store.keys("a\ud7ff") == ["a\ud7ff"]


# -- JSON only --------------------------------------------------------------------------

NOT_JSON: list[Any] = [
    (1, 2),
    {1: "int key"},
    {"nested": [{"t": (1,)}]},
    {1, 2},
    b"bytes",
    math.nan,
    [math.inf],
    object(),
    {"k": -math.inf},
]


@pytest.mark.parametrize("value", NOT_JSON, ids=lambda v: type(v).__name__)
async def test_non_json_values_are_refused_and_nothing_is_written(
    store: StateStore, value: Any
) -> None:
    with pytest.raises(StoreError, match="not JSON data"):
        await store.put("k", value)
    assert await store.get("k") is None
    await store.append("log", ["first"])
    with pytest.raises(StoreError, match="'log'"):
        await store.append("log", ["ok", value, "ok"])
    assert await store.read("log") == ["first"]


async def test_json_subclasses_are_refused(store: StateStore) -> None:
    class Name(str):
        pass

    with pytest.raises(StoreError, match="not JSON data"):
        await store.put("k", {"name": Name("x")})


@pytest.mark.parametrize("name", [b"bytes", 3, None, "nul\x00inside", "lone\ud800"])
async def test_bad_names_are_refused(store: StateStore, name: Any) -> None:
    with pytest.raises(StoreError):
        await store.put(name, 1)
    with pytest.raises(StoreError):
        await store.append(name, [1])
    with pytest.raises(StoreError):
        await store.get(name)
    assert await store.keys() == []


async def test_awkward_strings_round_trip(store: StateStore) -> None:
    value = ["", "\x00", "\ud800 lone", "é\U0001f600", "\\", '"', "\u2028", "\x7f"]
    await store.put("k", value)
    await store.append("log", value)
    assert await store.get("k") == value
    assert await store.read("log") == value


async def test_numbers_round_trip(store: StateStore) -> None:
    value = [0, -1, 2**63 - 1, -(2**63), 10**30, 0.1, -0.0, 1e308, 5e-324, True, False]
    await store.put("k", value)
    got = await store.get("k")
    assert got == value
    assert [type(v) for v in got] == [type(v) for v in value]


# -- corruption -------------------------------------------------------------------------


async def test_a_corrupted_value_names_its_key(durable: Any) -> None:
    # Durable backends only: the memory store keeps Python data, which cannot be corrupted.
    store = await durable.store().open()
    await store.put("victim", {"ok": True})
    durable.raw_put("victim", '{"ok": tru')
    with pytest.raises(StoreCorruptionError, match="'victim'"):
        await store.get("victim")
    await store.put("victim", 1)  # rewriting repairs it
    assert await store.get("victim") == 1


async def test_a_corrupted_entry_names_its_log(durable: Any) -> None:
    store = await durable.store().open()
    await store.append("victim-log", [1, 2])
    durable.raw_append("victim-log", "[[")
    with pytest.raises(StoreCorruptionError, match="entry 0 of log 'victim-log'"):
        await store.read("victim-log")
    assert await store.read("victim-log", 1) == [2]


# -- lifecycle --------------------------------------------------------------------------


async def test_close_is_idempotent_and_use_after_close_fails(store: StateStore) -> None:
    await store.put("k", 1)
    await store.close()
    await store.close()
    calls = [
        store.append("log", [1]),
        store.read("log"),
        store.length("log"),
        store.delete_log("log"),
        store.get("k"),
        store.put("k", 2),
        store.put_many({"k": 2}),
        store.delete("k"),
        store.keys(),
    ]
    for call in calls:
        with pytest.raises(StoreClosedError, match="closed"):
            await call


async def test_closing_a_store_never_opened(backend: Any) -> None:
    store = backend.store()
    await store.close()
    await store.close()
    with pytest.raises(StoreClosedError):
        await store.get("k")


async def test_async_with_opens_and_closes(backend: Any) -> None:
    async with backend.store() as store:
        await store.put("k", [1])
        assert await store.get("k") == [1]
    with pytest.raises(StoreClosedError):
        await store.get("k")


async def test_opens_lazily_on_first_use(backend: Any) -> None:
    store = backend.store()
    assert await store.append("log", [1]) == 1
    assert await store.read("log") == [1]


# -- many tasks -------------------------------------------------------------------------


async def test_concurrent_batches_stay_contiguous(store: StateStore) -> None:
    async def writer(w: int) -> None:
        for n in range(20):
            await store.append("shared", [[w, n, i] for i in range(5)])

    await asyncio.gather(*(writer(w) for w in range(6)))
    entries = await store.read("shared")
    assert len(entries) == 6 * 20 * 5
    for start in range(0, len(entries), 5):
        batch = entries[start : start + 5]
        assert [e[:2] for e in batch] == [batch[0][:2]] * 5
        assert [e[2] for e in batch] == list(range(5))
    for w in range(6):
        assert [e[1] for e in entries if e[0] == w and e[2] == 0] == list(range(20))


async def test_put_many_is_seen_whole_or_not_at_all(backend: Any) -> None:
    """Another connection reading all keys in one snapshot never sees half a put_many."""
    store = await backend.store().open()
    keys = [f"pair:{i}" for i in range(8)]
    await store.put_many({k: 0 for k in keys})
    done = asyncio.Event()
    snapshots: list[list[Any]] = []

    async def writer() -> None:
        for n in range(1, 150):
            await store.put_many({k: n for k in keys})
            await asyncio.sleep(0)  # let the reader in, even on the memory store
        done.set()

    async def reader() -> None:
        while not done.is_set():
            if backend.raw_snapshot is None:  # memory: reads do not yield, so one snapshot
                snapshots.append([await store.get(k) for k in keys])
                await asyncio.sleep(0)
            else:
                snapshots.append(await asyncio.to_thread(backend.raw_snapshot, keys))

    await asyncio.gather(writer(), reader())
    assert snapshots
    for snapshot in snapshots:
        assert len(set(map(str, snapshot))) == 1, snapshot
    assert [await store.get(k) for k in keys] == [149] * 8
