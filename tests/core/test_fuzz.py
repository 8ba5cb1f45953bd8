"""Fuzzing the registry with messages and hostile JSON (issue 9).

The property everywhere: the only exceptions are the project's typed errors, and a value
that loads also writes back (and reads back to the same text). Case counts follow the
Hypothesis profile (``HYPOTHESIS_PROFILE=thorough`` runs 10,000 of each).
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from cantata.core import (
    MAX_JSON_DEPTH,
    TYPE_KEY,
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
    from_json,
    loads,
    registry,
    to_json,
)

# -- strategies -------------------------------------------------------------------------

texts = st.text(max_size=12)
scalars = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12)
)
plain = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=10,
)
calls = st.builds(
    FunctionCallContent, texts, texts, st.dictionaries(texts, plain, max_size=3) | texts
)
contents = st.one_of(
    st.builds(TextContent, st.text()),
    calls,
    st.builds(FunctionResultContent, texts, plain, st.none() | texts),
    st.builds(DataContent, st.sampled_from(["image/png", "audio/wav"]), data=st.binary()),
    st.builds(DataContent, st.just("text/plain"), uri=st.text(min_size=1)),
    st.builds(UsageContent, st.builds(Usage, st.integers(0, 10**9), st.integers(0, 10**9))),
    st.builds(FunctionApprovalRequestContent, texts, calls),
    st.builds(FunctionApprovalResponseContent, texts, calls, st.booleans()),
)
messages = st.builds(
    Message,
    st.sampled_from(["system", "user", "assistant", "tool"]),
    st.lists(contents, max_size=4),
    author_name=st.none() | texts,
    message_id=st.text(min_size=1, max_size=12),
    metadata=st.dictionaries(texts, plain, max_size=3),
)

# Tagged objects: every registered tag (and some unknown ones) with fields of any shape,
# the names the decoders look for among them.
tags = st.sampled_from(sorted(registry._decoders)) | texts
field_names = st.sampled_from(
    [
        "items", "base64", "iso", "hex", "value", "role", "contents", "id", "metadata",
        "author_name", "call_id", "name", "arguments", "result", "error", "media_type",
        "uri", "usage", "input_tokens", "output_tokens", "request_id", "function_call",
        "approved", "text",
    ]
) | texts  # fmt: skip


def _tagged(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.builds(
        lambda tag, fields: {**fields, TYPE_KEY: tag},
        tags,
        st.dictionaries(field_names, inner, max_size=5),
    )


hostile = st.recursive(
    scalars | st.sampled_from(["", "0", "AAAA", "2026-12-01", "user", "image/png"]),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(texts, inner, max_size=3)
        | _tagged(inner)
        | st.lists(st.lists(inner, min_size=2, max_size=2), max_size=3)
    ),
    max_leaves=25,
)


def json_depth(data: Any) -> int:
    if isinstance(data, list):
        return 1 + max(map(json_depth, data), default=0)
    if isinstance(data, dict):
        return 1 + max(map(json_depth, data.values()), default=0)
    return 0


def writes_back(value: Any) -> None:
    """A loaded value writes back, and reads back to the same text."""
    text = dumps(value)
    assert dumps(loads(text)) == text


# -- properties -------------------------------------------------------------------------


@given(st.lists(messages, max_size=3))
def test_messages_round_trip_through_the_registry(batch: list[Message]) -> None:
    assert loads(dumps(batch)) == batch
    assert from_json(to_json(batch)) == batch


@given(hostile)
def test_hostile_data_loads_or_is_a_serialization_error(data: Any) -> None:
    try:
        value = from_json(data)
    except SerializationError:
        return
    writes_back(value)


@given(messages, st.data())
def test_damaged_message_text_loads_or_is_a_serialization_error(
    message: Message, data: st.DataObject
) -> None:
    text = dumps(message)
    at = data.draw(st.integers(0, len(text)), label="at")
    cut = data.draw(st.integers(0, 3), label="cut")
    insert = data.draw(st.text(max_size=3) | st.sampled_from(['"', "[", "{", "\\u", "\\ud800"]))
    damaged = text[:at] + insert + text[at + cut :]
    try:
        value = loads(damaged)
    except SerializationError:
        return
    writes_back(value)


@given(messages, st.integers(1, 3 * MAX_JSON_DEPTH))
def test_nesting_a_message_loads_or_is_refused_at_the_limit(message: Message, depth: int) -> None:
    text = "[" * depth + dumps(message) + "]" * depth
    try:
        value = loads(text)
    except SerializationError as exc:
        assert "limit" in str(exc)
        assert depth + json_depth(json.loads(dumps(message))) > MAX_JSON_DEPTH
        return
    writes_back(value)


@given(st.binary(max_size=64))
def test_any_bytes_load_or_are_a_serialization_error(raw: bytes) -> None:
    try:
        value = loads(raw)
    except SerializationError:
        return
    writes_back(value)


@given(st.text(max_size=60) | st.builds(lambda d, t: "[" * d + t, st.integers(0, 400), texts))
def test_tool_call_arguments_parse_or_are_an_invalid_message(text: str) -> None:
    call = FunctionCallContent("c1", "f", text)
    try:
        args = call.parse_arguments()
    except InvalidMessageError as exc:
        assert len(str(exc)) < 500
        return
    assert isinstance(args, dict)
    assert loads(dumps(call)) == call


def test_the_profiles_are_registered_and_one_is_loaded() -> None:
    import os

    from hypothesis import settings

    assert settings.get_profile("ci").max_examples <= 200
    assert settings.get_profile("thorough").max_examples == 10_000
    chosen = settings.get_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
    assert settings.default.max_examples == chosen.max_examples
    assert settings.default.deadline is None
