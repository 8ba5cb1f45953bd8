"""Chat responses and updates round-trip through the JSON registry; bad data is refused."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cantata.core import (
    DataContent,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    SerializationError,
    TextContent,
    Usage,
    UsageContent,
    dumps,
    loads,
)
from cantata.models import ChatResponse, ChatResponseUpdate, ToolSpec

texts = st.text(max_size=20)
contents = st.one_of(
    texts.map(TextContent),
    st.builds(FunctionCallContent, texts, texts, st.dictionaries(texts, st.integers(), max_size=3)),
    st.builds(lambda b: DataContent("image/png", data=b), st.binary(max_size=8)),
    st.builds(lambda a, b: UsageContent(Usage(a, b)), st.integers(0, 99), st.integers(0, 99)),
)
optional = st.none() | texts


@given(
    st.lists(st.lists(contents, max_size=3), max_size=3),
    st.none() | st.builds(Usage, st.integers(0, 99), st.integers(0, 99)),
    optional,
    optional,
)
def test_chat_response_round_trips(
    groups: list[list[object]], usage: Usage | None, finish: str | None, model: str | None
) -> None:
    response = ChatResponse(
        [Message("assistant", g) for g in groups],  # type: ignore[arg-type]
        usage=usage,
        finish_reason=finish,
        model=model,
        response_id="r1",
    )
    back = loads(dumps(response))
    assert back == response


@given(st.lists(contents, max_size=4), st.sampled_from(["assistant", "tool"]), optional)
def test_update_round_trips(items: list[object], role: str, finish: str | None) -> None:
    update = ChatResponseUpdate(items, role=role, message_id="m", finish_reason=finish)  # type: ignore[arg-type]
    assert loads(dumps(update)) == update


def test_tool_spec_round_trips() -> None:
    spec = ToolSpec("f", "does f", {"type": "object", "properties": {}})
    assert loads(dumps(spec)) == spec


@pytest.mark.parametrize(
    "data",
    [
        '{"$type": "chat_response", "messages": "nope"}',
        '{"$type": "chat_response", "messages": [1]}',
        '{"$type": "chat_response", "messages": [], "usage": 3}',
        '{"$type": "chat_response", "messages": [], "model": 5}',
        '{"$type": "chat_response_update", "contents": [], "role": "boss"}',
        '{"$type": "chat_response_update", "contents": [7], "role": "assistant"}',
    ],
)
def test_malformed_responses_raise_serialization_error(data: str) -> None:
    with pytest.raises(SerializationError):
        loads(data)


def test_update_metadata_merges_into_its_message() -> None:
    updates = [
        ChatResponseUpdate([TextContent("a")], message_id="m1"),
        ChatResponseUpdate(
            [TextContent("b")], message_id="m1", metadata={"cantata.limit": "max_iterations"}
        ),
    ]
    response = ChatResponse.from_updates(updates)
    assert response.messages[0].text == "ab"
    assert response.messages[0].metadata == {"cantata.limit": "max_iterations"}


def test_from_updates_parses_the_final_answer_of_a_tool_loop() -> None:
    call = FunctionCallContent("c1", "lookup", {})
    updates = [
        ChatResponseUpdate([call], message_id="a1"),
        ChatResponseUpdate([FunctionResultContent("c1", 3)], role="tool", message_id="t1"),
        ChatResponseUpdate([TextContent('{"answer": ')], message_id="a2"),
        ChatResponseUpdate([TextContent("3}")], message_id="a2", finish_reason="stop"),
    ]
    schema = {"type": "object", "properties": {"answer": {"type": "integer"}}}
    assert ChatResponse.from_updates(updates, response_format=schema).value == {"answer": 3}
    stopped = [*updates[:2], ChatResponseUpdate([], finish_reason="approval_required")]
    assert ChatResponse.from_updates(stopped, response_format=schema).value is None
