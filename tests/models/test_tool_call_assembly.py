"""ToolCallAssembler: deltas in, whole calls out, once each."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from cantata.core import FunctionCallContent
from cantata.models._tool_call_assembly import ToolCallAssembler

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=10,
)


@given(
    args=st.dictionaries(st.text(max_size=8), json_values, max_size=4),
    sizes=st.lists(st.integers(min_value=1, max_value=7), min_size=1, max_size=40),
)
def test_arguments_split_anywhere_reassemble(args: dict[str, object], sizes: list[int]) -> None:
    text = json.dumps(args)
    pieces, at = [], 0
    for size in sizes * (len(text) // max(1, sum(sizes)) + 1):
        if at >= len(text):
            break
        pieces.append(text[at : at + size])
        at += size
    assembler = ToolCallAssembler()
    emitted: list[FunctionCallContent] = []
    for n, piece in enumerate(pieces):
        emitted += assembler.add(
            0, call_id="c1" if n == 0 else None, name="f" if n == 0 else None, arguments=piece
        )
    assert emitted == []
    assert assembler.finish() == [FunctionCallContent("c1", "f", args)]
    assert assembler.finish() == []


def test_a_call_is_emitted_when_the_next_index_starts() -> None:
    assembler = ToolCallAssembler()
    assert assembler.add(0, call_id="a", name="f", arguments='{"x": 1}') == []
    assert assembler.add(1, call_id="b", name="g", arguments="{}") == [
        FunctionCallContent("a", "f", {"x": 1})
    ]
    assert assembler.finish() == [FunctionCallContent("b", "g", {})]


def test_repeated_names_are_not_doubled_and_split_names_join() -> None:
    assembler = ToolCallAssembler()
    calls = assembler.add(0, call_id="a", name="get_weather", arguments="{")
    calls += assembler.add(0, call_id="a", name="get_weather", arguments="}")
    calls += assembler.add(1, call_id="b", name="get_", arguments="")
    calls += assembler.add(1, call_id=None, name="time", arguments="")
    calls += assembler.finish()
    assert [c.name for c in calls] == ["get_weather", "get_time"]


def test_invalid_json_arguments_stay_raw_text_and_missing_ids_are_made() -> None:
    assembler = ToolCallAssembler()
    assembler.add(0, call_id=None, name="f", arguments="{not json")
    (call,) = assembler.finish()
    assert call.arguments == "{not json"
    assert call.call_id.startswith("call_")


def test_arguments_nested_too_deep_arrive_as_their_raw_text() -> None:
    # 1,000 levels once raised RecursionError out of the client; the tool loop answers a
    # call whose arguments are raw text with an error result
    deep = '{"a": ' * 1000 + "1" + "}" * 1000
    assembler = ToolCallAssembler()
    assembler.add(0, call_id="c1", name="f", arguments=deep[:500])
    assembler.add(0, call_id=None, name=None, arguments=deep[500:])
    (call,) = assembler.finish()
    assert call == FunctionCallContent("c1", "f", deep)


@given(st.text(max_size=200))
def test_any_arguments_text_gives_a_call(raw: str) -> None:
    assembler = ToolCallAssembler()
    assembler.add(0, call_id="c1", name="f", arguments=raw)
    (call,) = assembler.finish()
    assert isinstance(call.arguments, dict) or call.arguments == raw


@given(depth=st.integers(min_value=0, max_value=3000), opener=st.sampled_from(['{"a": ', "["]))
def test_nesting_of_any_depth_gives_a_call_never_a_recursion_error(depth: int, opener: str) -> None:
    closer = "}" if opener.startswith("{") else "]"
    raw = opener * depth + "1" + closer * depth
    assembler = ToolCallAssembler()
    assembler.add(0, call_id="c1", name="f", arguments=raw)
    (call,) = assembler.finish()
    assert isinstance(call.arguments, dict) or call.arguments == raw
