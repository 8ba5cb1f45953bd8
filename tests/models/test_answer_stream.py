"""AnswerStream: the answer text of an envelope streams exactly, however it is cut."""

from __future__ import annotations

import itertools
import json

from hypothesis import given
from hypothesis import strategies as st

from cantata.models._answer_stream import AnswerStream


def feed_all(pieces: list[str]) -> tuple[str, AnswerStream]:
    stream = AnswerStream()
    return "".join(stream.feed(p) for p in pieces), stream


def cut(text: str, points: list[int]) -> list[str]:
    marks = sorted({p % (len(text) + 1) for p in points})
    bounds = [0, *marks, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


@given(
    answer=st.text(alphabet=st.characters(exclude_categories=["Cs"])),
    points=st.lists(st.integers(min_value=0), max_size=30),
    spaced=st.booleans(),
)
def test_any_split_streams_the_exact_answer(answer: str, points: list[int], spaced: bool) -> None:
    envelope = json.dumps({"answer": answer}, ensure_ascii=spaced)
    if spaced:
        envelope = envelope.replace('{"answer": ', '{ "answer" : ', 1)
    streamed, stream = feed_all(cut(envelope, points))
    assert streamed == answer
    assert stream.in_answer
    assert stream.text == envelope


@given(points=st.lists(st.integers(min_value=0), max_size=10))
def test_a_tool_call_streams_nothing(points: list[int]) -> None:
    envelope = '{ "tool": "get_weather", "arguments": {"answer": "x"}}'
    streamed, stream = feed_all(cut(envelope, points))
    assert streamed == ""
    assert not stream.in_answer


def test_text_after_the_closing_quote_is_ignored() -> None:
    streamed, _ = feed_all(['{"answer": "a\\"b', '" }', ' "more"'])
    assert streamed == 'a"b'


def test_a_non_string_answer_streams_nothing() -> None:
    streamed, stream = feed_all(['{"answer": {"x": 1}}'])
    assert streamed == "" and not stream.in_answer
