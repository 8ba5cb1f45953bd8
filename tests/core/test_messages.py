"""Messages and contents: construction rules and exact JSON round trips."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cantata.core import (
    DataContent,
    FunctionApprovalRequestContent,
    FunctionApprovalResponseContent,
    FunctionCallContent,
    FunctionResultContent,
    InvalidMessageError,
    Message,
    SerializationError,
    TextContent,
    Usage,
    UsageContent,
    dumps,
    loads,
)

ids = st.text(min_size=1, max_size=12)
json_leaf = st.none() | st.booleans() | st.integers() | st.text(max_size=10)
json_obj = st.dictionaries(st.text(max_size=6), json_leaf, max_size=3)
calls = st.builds(FunctionCallContent, ids, ids, json_obj | st.text(max_size=20))
contents = st.one_of(
    st.builds(TextContent, st.text()),
    calls,
    st.builds(FunctionResultContent, ids, json_leaf | json_obj, st.none() | st.text()),
    st.builds(DataContent, st.sampled_from(["image/png", "audio/wav"]), data=st.binary()),
    st.builds(DataContent, st.just("image/png"), uri=st.text(min_size=1)),
    st.builds(UsageContent, st.builds(Usage, st.integers(0, 10**6), st.integers(0, 10**6))),
    st.builds(FunctionApprovalRequestContent, ids, calls),
    st.builds(FunctionApprovalResponseContent, ids, calls, st.booleans()),
)
messages = st.builds(
    Message,
    st.sampled_from(["system", "user", "assistant", "tool"]),
    st.lists(contents, max_size=4),
    author_name=st.none() | st.text(max_size=10),
    message_id=st.none() | ids,
    metadata=st.none() | json_obj,
)


@given(messages)
def test_every_message_round_trips_exactly(message: Message) -> None:
    restored = loads(dumps(message))
    assert restored == message
    assert restored.message_id == message.message_id


@given(st.lists(messages, max_size=5))
def test_lists_of_messages_round_trip(items: list[Message]) -> None:
    assert loads(dumps(items)) == items


@given(contents)
def test_every_content_round_trips(content: Any) -> None:
    assert loads(dumps(content)) == content


def test_short_form_and_text() -> None:
    m = Message("user", "hello")
    assert m.contents == [TextContent("hello")]
    assert m.text == "hello"
    assert len(m.message_id) == 32
    assert Message("user", "x").message_id != m.message_id


def test_bad_role() -> None:
    with pytest.raises(InvalidMessageError, match="role"):
        Message("robot", "x")  # type: ignore[arg-type]


def test_data_content_needs_exactly_one_source() -> None:
    with pytest.raises(InvalidMessageError):
        DataContent("image/png")
    with pytest.raises(InvalidMessageError):
        DataContent("image/png", data=b"x", uri="http://x")
    assert DataContent("image/png", data=b"\x01").to_data_uri() == "data:image/png;base64,AQ=="


def test_parse_arguments() -> None:
    assert FunctionCallContent("c", "f", '{"a": 1}').parse_arguments() == {"a": 1}
    assert FunctionCallContent("c", "f", "").parse_arguments() == {}
    with pytest.raises(InvalidMessageError, match="not valid JSON"):
        FunctionCallContent("c", "f", "{oops").parse_arguments()
    with pytest.raises(InvalidMessageError, match="JSON object"):
        FunctionCallContent("c", "f", "[1]").parse_arguments()


def test_coerce() -> None:
    m = Message("assistant", "a")
    out = Message.coerce(["x", m])
    assert [x.role for x in out] == ["user", "assistant"] and out[1] is m
    assert Message.coerce(None) == []
    with pytest.raises(InvalidMessageError):
        Message.coerce([3])  # type: ignore[list-item]


def _msg(**override: Any) -> str:
    base: dict[str, Any] = {"$type": "message", "role": "user", "contents": [], "id": "m1"}
    base.update(override)
    return json.dumps({k: v for k, v in base.items() if v is not ...})


@pytest.mark.parametrize(
    "text",
    [
        _msg(role="robot"),
        _msg(role=...),
        _msg(id=...),
        _msg(id=5),
        _msg(contents="x"),
        _msg(contents=[{"$type": "usage", "input_tokens": 1, "output_tokens": 2}]),
        _msg(contents=[{"$type": "text"}]),
        _msg(contents=[{"$type": "text", "text": 3}]),
        _msg(contents=[{"$type": "data", "media_type": "image/png"}]),
        _msg(contents=[{"$type": "function_call", "call_id": "c", "name": "f", "arguments": 3}]),
        _msg(metadata=[1]),
        _msg(author_name=7),
    ],
)
def test_malformed_messages_raise_serialization_error(text: str) -> None:
    with pytest.raises(SerializationError):
        loads(text)


def test_usage_adds() -> None:
    total = Usage(1, 2) + Usage(3, 4)
    assert (total.input_tokens, total.output_tokens, total.total_tokens) == (4, 6, 10)


def test_deeply_nested_arguments_are_a_typed_error() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(InvalidMessageError):
        FunctionCallContent("c", "f", deep).parse_arguments()


def test_text_inside_a_message_is_a_bare_string_and_the_tagged_form_still_loads() -> None:
    data = json.loads(dumps(Message("user", "hi", message_id="m1")))
    assert data["contents"] == ["hi"]
    tagged = {**data, "contents": [{"$type": "text", "text": "hi"}]}
    assert loads(json.dumps(tagged)) == Message("user", "hi", message_id="m1")
    assert loads(dumps(TextContent("alone"))) == TextContent("alone")


# --- deep function-call arguments ----------------------------------------------------------


def _deep_args(depth: int) -> dict[str, Any]:
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return {"x": value}


@pytest.mark.parametrize("depth", [150, 5_000])
def test_a_call_with_deep_arguments_is_refused_on_write(depth: int) -> None:
    message = Message("assistant", [FunctionCallContent("c1", "f", _deep_args(depth))])
    with pytest.raises(SerializationError, match="limit"):
        dumps(message)
    with pytest.raises(SerializationError, match="limit"):
        dumps([message])


@pytest.mark.parametrize("depth", [150, 5_000])
def test_a_message_with_deep_arguments_is_refused_on_read(depth: int) -> None:
    inner = '{"a":' * depth + "1" + "}" * depth
    text = (
        '{"$type":"message","role":"assistant","id":"m1","contents":'
        '[{"$type":"function_call","call_id":"c1","name":"f","arguments":' + inner + "}]}"
    )
    with pytest.raises(SerializationError, match="limit"):
        loads(text)


@pytest.mark.parametrize("depth", [150, 1_000, 100_000])
def test_deep_argument_text_is_an_invalid_message(depth: int) -> None:
    call = FunctionCallContent("c1", "f", '{"a":' + "[" * depth + "]" * depth + "}")
    with pytest.raises(InvalidMessageError, match=r"'c1'.*limit") as info:
        call.parse_arguments()
    assert len(str(info.value)) < 400
    # The raw text itself is kept and round-trips: the loop reports it back to the model.
    assert loads(dumps(call)) == call


def test_a_huge_bad_role_is_not_repeated_whole() -> None:
    with pytest.raises(InvalidMessageError) as info:
        Message("x" * 100_000, "hi")  # type: ignore[arg-type]
    assert len(str(info.value)) < 300


def test_the_repr_of_a_huge_message_is_short() -> None:
    deep: Any = 1
    for _ in range(10_000):
        deep = [deep]
    message = Message(
        "tool",
        [FunctionResultContent("c" * 10_000, deep)],
        author_name="a" * 10_000,
        message_id="m" * 10_000,
    )
    assert len(repr(message)) < 400
    assert repr(Message("user", "hi", message_id="m1")) == "Message('user', 'hi', message_id='m1')"
