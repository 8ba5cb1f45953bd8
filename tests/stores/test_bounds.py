"""Hostile values: depth, size and numbers get typed errors with short messages."""

from __future__ import annotations

from typing import Any

import pytest

from cantata.core import MAX_JSON_DEPTH, StoreError
from cantata.stores import StateStore, StoreCorruptionError


def deep(depth: int) -> Any:
    value: Any = "leaf"
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


async def test_a_value_at_the_limit_round_trips(store: StateStore) -> None:
    await store.put("k", deep(MAX_JSON_DEPTH))
    assert await store.get("k") == deep(MAX_JSON_DEPTH)
    await store.append("log", [deep(MAX_JSON_DEPTH)])
    assert await store.read("log") == [deep(MAX_JSON_DEPTH)]


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 600, 50_000])
async def test_a_deeper_value_is_refused_and_not_written(store: StateStore, depth: int) -> None:
    with pytest.raises(StoreError, match=f"limit of {MAX_JSON_DEPTH} levels") as info:
        await store.put("k", deep(depth))
    assert len(str(info.value)) < 400
    with pytest.raises(StoreError, match="limit"):
        await store.put_many({"a": 1, "k": deep(depth)})
    with pytest.raises(StoreError, match="limit"):
        await store.append("log", [1, deep(depth)])
    assert await store.get("k") is None
    assert await store.get("a") is None
    assert await store.length("log") == 0


async def test_a_value_that_contains_itself_is_refused(store: StateStore) -> None:
    looped: list[Any] = []
    looped.append(looped)
    with pytest.raises(StoreError, match="limit"):
        await store.put("k", looped)


async def test_an_int_too_long_for_text_is_a_store_error(store: StateStore) -> None:
    with pytest.raises(StoreError):
        await store.put("k", [10**5000])
    assert await store.get("k") is None


async def test_messages_never_hold_a_huge_name_or_value_whole(store: StateStore) -> None:
    huge = "x" * 1_000_000
    with pytest.raises(StoreError) as info:
        await store.put(huge + "\x00", 1)
    assert len(str(info.value)) < 400
    with pytest.raises(StoreError) as info:
        await store.put(huge, {"v": float("nan"), "w": huge})
    assert len(str(info.value)) < 400
    with pytest.raises(StoreError) as info:
        await store.read("log", huge)  # type: ignore[arg-type]
    assert len(str(info.value)) < 400
    with pytest.raises(StoreError) as info:
        await store.put("k", {1: huge})
    assert len(str(info.value)) < 400


@pytest.mark.parametrize(
    "text",
    [
        "[" * 50_000 + "]" * 50_000,
        "[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1),
        '{"a":' * 3_000 + "1" + "}" * 3_000,
        "[NaN]",
        "[1e400]",
        "[Infinity]",
        "1" * 5000,
    ],
)
async def test_stored_text_a_writer_would_refuse_is_corruption(durable: Any, text: str) -> None:
    store = await durable.store().open()
    await store.put("victim", 0)
    await store.append("log", [0])
    durable.raw_put("victim", text)
    durable.raw_append("log", text)
    with pytest.raises(StoreCorruptionError, match="'victim'") as info:
        await store.get("victim")
    assert len(str(info.value)) < 400
    with pytest.raises(StoreCorruptionError, match="'log'"):
        await store.read("log")


async def test_a_corrupted_huge_value_is_not_repeated_whole(durable: Any) -> None:
    store = await durable.store().open()
    await store.put("victim", 0)
    durable.raw_put("victim", '["' + "y" * 1_000_000 + '", oops]')
    with pytest.raises(StoreCorruptionError) as info:
        await store.get("victim")
    assert len(str(info.value)) < 400


async def test_a_value_that_contains_itself_twice_is_refused_at_once(store: StateStore) -> None:
    looped: list[Any] = []
    looped.extend([looped, looped])  # level by level, 2**100 entries before the limit
    with pytest.raises(StoreError, match="limit"):
        await store.put("k", looped)


async def test_shared_parts_are_checked_once(store: StateStore) -> None:
    shared: Any = [1]
    for _ in range(40):
        shared = [shared, shared]  # 2**40 paths, 41 lists
    with pytest.raises(StoreError, match="the float nan"):
        await store.put("k", [shared, {"bad": float("nan")}])
    bad: Any = [1, float("inf")]
    for _ in range(40):
        bad = [bad, bad]
    with pytest.raises(StoreError, match="inf"):
        await store.put("k", bad)
