"""What is specific to `MemoryStore`: sharing or copying the data it is given."""

from __future__ import annotations

import pytest

from cantata.core import StoreError
from cantata.stores import MemoryStore


async def test_copy_keeps_callers_from_changing_the_store() -> None:
    store = MemoryStore(copy=True)
    value = {"list": [1, 2]}
    await store.put("k", value)
    await store.append("log", [value])
    value["list"].append(3)
    got = await store.get("k")
    assert got == {"list": [1, 2]}
    got["list"].append(4)
    assert await store.get("k") == {"list": [1, 2]}
    assert await store.read("log") == [{"list": [1, 2]}]


async def test_without_copy_the_data_is_shared() -> None:
    store = MemoryStore()
    value = {"list": [1, 2]}
    await store.put("k", value)
    assert await store.get("k") is value


@pytest.mark.parametrize("copy", [False, True])
async def test_both_modes_refuse_non_json(copy: bool) -> None:
    store = MemoryStore(copy=copy)
    with pytest.raises(StoreError, match="not JSON data"):
        await store.put("k", {"t": (1, 2)})
    with pytest.raises(StoreError, match="not JSON data"):
        await store.put_many({"a": 1, "b": float("nan")})
    assert await store.keys() == []


async def test_closing_releases_the_data() -> None:
    store = MemoryStore()
    await store.append("log", list(range(10)))
    await store.close()
    assert store.closed
    assert store._logs == {}
