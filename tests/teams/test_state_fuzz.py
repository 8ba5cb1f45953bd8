"""Damaged team state (Hypothesis): load_state refuses it with a CantataError, never
another exception, and the session keeps working afterwards."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cantata.core import CantataError
from cantata.teams import GroupChat

from ._agents import counting_agent

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def _team() -> GroupChat:
    return GroupChat([counting_agent("a"), counting_agent("b")], max_turns=2)


_SAVED: dict[str, Any] = {}


def _saved() -> dict[str, Any]:
    if not _SAVED:

        async def make() -> dict[str, Any]:
            team = _team()
            await team.run("go")
            return await team.save_state()

        _SAVED.update(asyncio.run(make()))
    return copy.deepcopy(_SAVED)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*prefix, i))
    return out


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    value[path[0]] = _replace(value[path[0]], path[1:], new)
    return value


async def _load(state: Any) -> None:
    team = _team()
    try:
        await team.load_state(state)
        await team.run()
    except CantataError:
        pass
    # whatever happened, the session is usable again
    await team.reset()
    assert (await team.run("fresh")).messages[0].text == "fresh"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_values)
def test_arbitrary_json_is_refused_with_a_cantata_error(junk: Any) -> None:
    asyncio.run(_load(junk))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_one_damaged_field_is_refused_with_a_cantata_error(data: st.DataObject) -> None:
    state = _saved()
    path = data.draw(st.sampled_from(_paths(state)[1:]))
    damaged = _replace(state, path, data.draw(json_values))
    asyncio.run(_load(damaged))
