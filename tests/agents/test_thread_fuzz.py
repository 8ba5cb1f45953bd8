"""Fuzzing serialized threads: whatever `deserialize_thread` is given, the only exceptions
are cantata's typed errors, and a thread that loads also writes back (and loads again to
the same conversation). The number of cases follows the Hypothesis profile (tests/conftest.py).
"""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from cantata.agents import ChatAgent, LocalThread, StateStoreMessageStore
from cantata.core import (
    CantataError,
    FunctionCallContent,
    FunctionResultContent,
    Message,
)
from cantata.models import ScriptedChatClient
from cantata.stores import MemoryStore

_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
    | st.sampled_from(["local", "created", "new", "user", "function_call", "memory"]),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


def _real_thread_data() -> dict[str, Any]:
    async def build() -> dict[str, Any]:
        thread = LocalThread()
        call = FunctionCallContent("c1", "add", {"a": 1, "b": [2, {"c": None}]})
        await thread.on_new_message(
            [
                Message("user", "what is 1 + 2?", metadata={"agent_id": "a-1"}),
                Message("assistant", [call], author_name="calc"),
                Message("tool", [FunctionResultContent("c1", 3)]),
                Message("assistant", "3", author_name="calc"),
            ]
        )
        return await thread.serialize()

    return asyncio.run(build())


_REAL = _real_thread_data()


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            out += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out += _paths(item, (*prefix, index))
    return out


@st.composite
def damaged_threads(draw: st.DrawFn) -> Any:
    """A real serialized thread with one value (anywhere in it) replaced or removed."""
    data = copy.deepcopy(_REAL)
    path = draw(st.sampled_from(_paths(data)[1:]))
    parent = data
    for step in path[:-1]:
        parent = parent[step]
    if draw(st.booleans()) and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = draw(_JSON)
    return data


async def _check(agent: ChatAgent, data: Any) -> None:
    try:
        thread = await agent.deserialize_thread(data)
    except CantataError:
        return
    messages = await thread.get_messages()
    written = json.dumps(await thread.serialize())
    again = await agent.deserialize_thread(written)
    assert await again.get_messages() == messages


@given(data=damaged_threads())
async def test_a_damaged_thread_loads_or_fails_typed_and_writes_back(data: Any) -> None:
    await _check(ChatAgent(ScriptedChatClient([]), name="a"), data)


@given(data=_JSON)
async def test_any_json_value_loads_or_fails_typed(data: Any) -> None:
    await _check(ChatAgent(ScriptedChatClient([]), name="a"), data)


@given(
    text=st.one_of(
        st.text(max_size=60),
        st.binary(max_size=60),
        st.builds(lambda d: "[" * d + "]" * d, st.integers(0, 5_000)),
        st.builds(lambda t: json.dumps(_REAL)[: len(t)], st.text()),
    )
)
async def test_any_text_loads_or_fails_typed(text: str | bytes) -> None:
    await _check(ChatAgent(ScriptedChatClient([]), name="a"), text)


@given(data=damaged_threads())
async def test_a_damaged_thread_restored_into_a_state_store(data: Any) -> None:
    store = MemoryStore()
    agent = ChatAgent(
        ScriptedChatClient([]),
        name="a",
        message_store_factory=StateStoreMessageStore.factory(store),
    )
    await _check(agent, data)
