"""Hypothesis: any log name, key and JSON value round-trips exactly on every backend; any
other value, and any stored text, gives a typed error or a value that writes back."""

from __future__ import annotations

import itertools
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cantata.core import MAX_JSON_DEPTH, StoreError
from cantata.stores import StateStore, StoreCorruptionError

# Names: any text without NUL (the one character stores refuse); surrogates never occur in
# hypothesis text by default, and stores refuse lone ones.
names = st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)))
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)
# Case counts follow the Hypothesis profile (tests/conftest.py); only the health check for
# the per-test store fixture is relaxed here.
fuzz = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
_run = itertools.count()


def same(a: Any, b: Any) -> bool:
    """Equal, with the same types all the way down (so 1 and 1.0, or -0.0 and 0.0, differ)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, float):
        return a == b and str(a) == str(b)
    return bool(a == b)


@fuzz
@given(key=names, value=json_values)
async def test_values_round_trip(store: StateStore, key: str, value: Any) -> None:
    key = f"{next(_run)}/{key}"
    await store.put(key, value)
    assert same(await store.get(key), value)
    await store.put_many({key: [value], key + "2": value})
    assert same(await store.get(key), [value])
    assert key in await store.keys(key)


@fuzz
@given(log=names, entries=st.lists(json_values, max_size=6))
async def test_log_entries_round_trip(store: StateStore, log: str, entries: list[Any]) -> None:
    log = f"{next(_run)}/{log}"
    await store.append(log, entries[:2])
    assert await store.append(log, entries[2:]) == len(entries)
    assert same(await store.read(log), entries)


@fuzz
@given(
    size=st.integers(0, 12),
    start=st.integers(-15, 15),
    stop=st.none() | st.integers(-15, 15),
)
async def test_read_slices_like_a_list(
    store: StateStore, size: int, start: int, stop: int | None
) -> None:
    log = f"slice/{next(_run)}"
    items = list(range(size))
    await store.append(log, items)
    assert await store.read(log, start, stop) == items[start:stop]


@fuzz
@given(keys=st.sets(names, max_size=8), prefix=names)
async def test_keys_with_a_prefix(store: StateStore, keys: set[str], prefix: str) -> None:
    space = f"{next(_run)}/"
    await store.put_many({space + k: 1 for k in keys})
    expected = sorted(space + k for k in keys if k.startswith(prefix))
    assert await store.keys(space + prefix) == expected


# -- hostile values and stored text ---------------------------------------------------------


def _deep(value: Any, depth: int) -> Any:
    for _ in range(depth):
        value = [value]
    return value


odd_scalars = (
    scalars
    | st.floats()  # NaN and infinities
    | st.integers().map(lambda n: n * 10**5000)  # too long for JSON text
    | st.binary(max_size=4)
    | st.tuples(st.integers())
    | st.frozensets(st.integers(), max_size=2)
    | st.text().map(type("Name", (str,), {}))  # a str subclass
)
odd_values = st.recursive(
    odd_scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text() | st.integers() | st.none(), inner, max_size=3)
        | st.tuples(inner)
        | st.builds(_deep, inner, st.integers(MAX_JSON_DEPTH - 2, MAX_JSON_DEPTH + 2))
    ),
    max_leaves=8,
)


@fuzz
@given(value=odd_values)
async def test_any_value_is_written_exactly_or_refused(store: StateStore, value: Any) -> None:
    key = f"odd/{next(_run)}"
    await store.put(key, "before")
    try:
        await store.put(key, value)
    except StoreError as exc:
        assert len(str(exc)) < 600
        assert await store.get(key) == "before"  # nothing was written
        return
    assert same(await store.get(key), value)


@st.composite
def damaged_json(draw: st.DrawFn) -> str:
    """Valid JSON text with a few characters changed, or hostile pieces put in."""
    text = draw(json_values.map(json.dumps) | st.sampled_from(['{"a":[true,null,1.5]}', "0"]))
    at = draw(st.integers(0, len(text)))
    insert = draw(
        st.text(max_size=4)
        | st.sampled_from(["[" * 200, '{"a":' * 150, "NaN", "1e999", "\\ud800", "9" * 5000])
    )
    cut = draw(st.integers(0, 3))
    return text[:at] + insert + text[at + cut :]


stored_texts = damaged_json() | st.text()


@fuzz
@given(text=stored_texts)
async def test_stored_text_loads_and_writes_back_or_is_corruption(durable: Any, text: str) -> None:
    if "\x00" in text:
        return  # PostgreSQL text cannot hold NUL, so no backend could have stored it
    key = f"raw/{next(_run)}"
    async with durable.make() as store:
        await store.put(key, 0)
        durable.raw_put(key, text)
        try:
            value = await store.get(key)
        except StoreCorruptionError as exc:
            assert len(str(exc)) < 600
            return
        await store.put(key, value)  # what loads writes back
        assert same(await store.get(key), value)
