"""Sealed values: any change after writing is caught, on every backend."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cantata.core import StoreError
from cantata.stores import StateStore, StoreCorruptionError, checksum, seal, unseal

RECORD = {"run": "r1", "superstep": 3, "state": {"a": [1, 2.5, None, True, "x"]}}


def test_checksum_is_stable_and_ignores_key_order() -> None:
    assert checksum({"a": 1, "b": [2]}) == checksum({"b": [2], "a": 1})
    assert checksum(RECORD) == checksum(json.loads(json.dumps(RECORD)))
    assert len(checksum(None)) == 64


@pytest.mark.parametrize(
    ("a", "b"),
    [(1, 1.0), (0.0, -0.0), ("1", 1), ([1, 2], [2, 1]), ({"a": None}, {}), (True, 1)],
)
def test_checksum_tells_different_data_apart(a: Any, b: Any) -> None:
    assert checksum(a) != checksum(b)


def test_checksum_refuses_what_no_store_takes() -> None:
    with pytest.raises(StoreError, match="not JSON data"):
        checksum({"a": (1, 2)})


def test_a_sealed_value_unseals() -> None:
    assert unseal(seal(RECORD), where="checkpoint c1") == RECORD


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: d["value"]["state"].update(a=[1, 2.5, None, True, "y"]),
        lambda d: d["value"].update(superstep=4),
        lambda d: d.update(sha256=d["sha256"][:-1] + "0"),
        lambda d: d.update(extra=1),
        lambda d: d.pop("sha256"),
        lambda d: d.update(sha256=5),
    ],
)
def test_any_change_is_corruption(damage: Any) -> None:
    data = json.loads(json.dumps(seal(RECORD)))
    damage(data)
    with pytest.raises(StoreCorruptionError, match="checkpoint c1"):
        unseal(data, where="checkpoint c1")


@pytest.mark.parametrize("data", [None, [], "x", {"sha256": "0", "value": float("nan")}])
def test_what_is_not_a_seal_is_corruption(data: Any) -> None:
    with pytest.raises(StoreCorruptionError):
        unseal(data, where="key k")


@given(st.data())
def test_every_single_character_change_that_still_parses_is_caught(data: st.DataObject) -> None:
    text = json.dumps(seal(RECORD))
    at = data.draw(st.integers(0, len(text) - 1))
    new = data.draw(st.characters(codec="ascii").filter(lambda c: c != text[at]))
    try:
        damaged = json.loads(text[:at] + new + text[at + 1 :])
    except ValueError:
        return  # the store itself reports text that does not parse
    try:
        value = unseal(damaged, where="r")
    except StoreCorruptionError:
        return
    # Only changes that do not change the data can pass (a space, an equal number form).
    assert value == RECORD and checksum(value) == checksum(RECORD)


async def test_seals_survive_every_backend(store: StateStore) -> None:
    await store.put("ckpt", seal(RECORD))
    assert unseal(await store.get("ckpt"), where="ckpt") == RECORD
    await store.append("journal", [seal(RECORD), seal([1])])
    assert [unseal(e, where="entry") for e in await store.read("journal")] == [RECORD, [1]]


async def test_damage_on_disk_is_caught(durable: Any) -> None:
    async with durable.make() as store:
        await store.put("ckpt", seal(RECORD))
        text = json.dumps(seal(RECORD)).replace('"superstep": 3', '"superstep": 4')
        durable.raw_put("ckpt", text)
        with pytest.raises(StoreCorruptionError, match="integrity"):
            unseal(await store.get("ckpt"), where="checkpoint c1")
