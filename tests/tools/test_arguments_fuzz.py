"""Fuzzing tool-call arguments: whatever a model sends (any JSON value, any text, nesting
thousands of levels deep), the function loop answers every call with a result, runs a
tool only with arguments of its declared types, ends the run normally, and everything it
produced can be written as JSON and read back. The number of cases follows the Hypothesis
profile (tests/conftest.py)."""

from __future__ import annotations

from typing import Any, Literal

from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from cantata.core import FunctionCallContent, Message, dumps, loads
from cantata.models import ScriptedChatClient
from cantata.tools import FunctionInvokingChatClient, tool


class Point(BaseModel):
    x: int
    y: int = 0


received: list[dict[str, Any]] = []


@tool
def place(
    name: str, point: Point, tags: list[str] | None = None, mode: Literal["a", "b"] = "a"
) -> str:
    """Place a named point."""
    received.append({"name": name, "point": point, "tags": tags, "mode": mode})
    return f"{name} at {point.x},{point.y}"


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=10)
    | st.sampled_from(["name", "point", "x", "tags", "a"]),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=25,
)


def _deep(depth: int, leaf: Any) -> Any:
    for _ in range(depth):
        leaf = {"x": leaf}
    return leaf


_ARGUMENTS = st.one_of(
    st.dictionaries(st.sampled_from(["name", "point", "tags", "mode", "other"]), _JSON),
    _JSON,
    st.text(max_size=40),
    st.builds(lambda d: '{"point": ' + "[" * d + "]" * d + "}", st.integers(0, 3_000)),
    st.builds(lambda d: {"name": "n", "point": _deep(d, 1)}, st.integers(0, 2_000)),
    st.builds(lambda n, x: {"name": n, "point": {"x": x}}, st.text(max_size=5), st.integers()),
)


@given(arguments=st.lists(_ARGUMENTS, min_size=1, max_size=3))
async def test_any_arguments_get_a_result_and_the_run_ends_normally(arguments: list[Any]) -> None:
    received.clear()
    calls = [FunctionCallContent(f"c{i}", "place", a) for i, a in enumerate(arguments)]  # type: ignore[arg-type]
    client = ScriptedChatClient([Message("assistant", list(calls)), "done"])
    loop = FunctionInvokingChatClient(client)
    response = await loop.get_response([Message("user", "go")], tools=[place])
    assert response.text == "done" and response.finish_reason == "stop"
    results = {r.call_id: r for m in response.messages for r in m.function_results}
    assert set(results) == {c.call_id for c in calls}  # every call answered
    for item in received:  # the tool only ever ran with its declared types
        assert isinstance(item["name"], str) and isinstance(item["point"], Point)
    ran = sum(1 for r in results.values() if not r.is_error)
    assert ran == len(received)
    for message in response.messages:  # what the run produced is storable
        again = loads(dumps(message))
        assert isinstance(again, Message) and again.message_id == message.message_id


async def test_arguments_that_are_no_object_are_kept_as_text_the_thread_can_read_back() -> None:
    """The counterexample the fuzz test found: a call with ``arguments=None`` was stored as
    it came, and the stored message could not be read back."""
    calls = [FunctionCallContent("c0", "place", None), FunctionCallContent("c1", "place", [1])]  # type: ignore[arg-type]
    client = ScriptedChatClient([Message("assistant", list(calls)), "done"])
    response = await FunctionInvokingChatClient(client).get_response(
        [Message("user", "go")], tools=[place]
    )
    kept = response.messages[0].function_calls
    assert [c.arguments for c in kept] == ["null", "[1]"]
    errors = [r.error for r in response.messages[1].function_results]
    assert all(e is not None and "must be a JSON object" in e for e in errors)
    assert loads(dumps(response.messages[0])) == response.messages[0]
