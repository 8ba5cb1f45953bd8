"""Cassettes: record any client's session to a file, replay it offline, refuse bad files."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from cantata.core import (
    CancellationToken,
    CancelledError,
    Message,
    ModelHTTPError,
    ModelOutputError,
    SchemaVersionError,
    SerializationError,
    TimeoutError,
    Usage,
)
from cantata.models import (
    CASSETTE_SCHEMA_VERSION,
    Cassette,
    CassetteMismatchError,
    ChatOptions,
    ChatResponse,
    LocalChatClient,
    RecordingChatClient,
    ReplayChatClient,
    ScriptedChatClient,
    ToolSpec,
    allow_model_requests,
    tool_call,
)

WEATHER = ToolSpec(
    "get_weather",
    "Weather of a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


class Answer(BaseModel):
    n: int


async def record_scripted(path: Path) -> RecordingChatClient:
    inner = ScriptedChatClient(
        ["hello there", [tool_call("get_weather", {"city": "Oslo"}, call_id="c1")], '{"n": 3}'],
        usage=Usage(3, 2),
    )
    recorder = RecordingChatClient(inner, path)
    await recorder.get_response([Message("user", "hi")])
    updates = [
        u
        async for u in recorder.get_streaming_response(
            [Message("user", "weather?")], options=ChatOptions(tools=[WEATHER])
        )
    ]
    assert ChatResponse.from_updates(updates).function_calls[0].name == "get_weather"
    await recorder.get_response(
        [Message("user", "a number")], options=ChatOptions(seed=1, response_format=Answer)
    )
    return recorder


async def test_recording_writes_a_versioned_json_file(tmp_path: Path) -> None:
    path = tmp_path / "session.json"
    await record_scripted(path)
    data = json.loads(path.read_text())
    assert data["schema_version"] == CASSETTE_SCHEMA_VERSION
    assert len(data["interactions"]) == 3
    assert data["interactions"][1]["request"]["stream"] is True
    assert "id" not in data["interactions"][0]["request"]["messages"][0]


async def test_replay_answers_the_same_requests_offline(tmp_path: Path) -> None:
    path = tmp_path / "session.json"
    await record_scripted(path)
    replay = ReplayChatClient(path)
    first = await replay.get_response([Message("user", "hi")])
    assert first.text == "hello there" and first.usage == Usage(3, 2)
    updates = [
        u
        async for u in replay.get_streaming_response(
            [Message("user", "weather?")], options=ChatOptions(tools=[WEATHER])
        )
    ]
    assert ChatResponse.from_updates(updates).function_calls == [
        tool_call("get_weather", {"city": "Oslo"}, call_id="c1")
    ]
    third = await replay.get_response(
        [Message("user", "a number")], options=ChatOptions(seed=1, response_format=Answer)
    )
    assert third.value == Answer(n=3)
    replay.assert_complete()


async def test_replay_refuses_a_different_request(tmp_path: Path) -> None:
    path = tmp_path / "session.json"
    await record_scripted(path)
    replay = ReplayChatClient(path)
    with pytest.raises(CassetteMismatchError, match="message 0"):
        await replay.get_response([Message("user", "something else")])
    with pytest.raises(CassetteMismatchError, match="streaming"):
        async for _ in replay.get_streaming_response([Message("user", "hi")]):
            pass


async def test_replay_without_checks_answers_in_order(tmp_path: Path) -> None:
    path = tmp_path / "session.json"
    await record_scripted(path)
    replay = ReplayChatClient(path, check_requests=False)
    assert (await replay.get_response([Message("user", "anything")])).text == "hello there"
    assert replay.remaining == 2
    with pytest.raises(AssertionError, match="2 recorded"):
        replay.assert_complete()


async def test_replay_matches_concurrent_requests_in_any_order(tmp_path: Path) -> None:
    path = tmp_path / "session.json"
    await record_scripted(path)
    replay = ReplayChatClient(path)
    third, first = await asyncio.gather(
        replay.get_response(
            [Message("user", "a number")], options=ChatOptions(seed=1, response_format=Answer)
        ),
        replay.get_response([Message("user", "hi")]),
    )
    assert (first.text, third.text) == ("hello there", '{"n": 3}')


async def test_replay_runs_out(tmp_path: Path) -> None:
    path = tmp_path / "session.json"
    recorder = RecordingChatClient(ScriptedChatClient(["only"]), path)
    await recorder.get_response([Message("user", "hi")])
    replay = ReplayChatClient(path)
    await replay.get_response([Message("user", "hi")])
    with pytest.raises(CassetteMismatchError, match="no interaction left"):
        await replay.get_response([Message("user", "hi")])


async def test_replay_honours_cancellation(tmp_path: Path) -> None:
    path = tmp_path / "session.json"
    await record_scripted(path)
    token = CancellationToken()
    token.cancel()
    with pytest.raises(CancelledError):
        await ReplayChatClient(path).get_response([Message("user", "hi")], cancellation_token=token)


def test_unknown_schema_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "future.json"
    path.write_text(json.dumps({"schema_version": 99, "interactions": []}))
    with pytest.raises(SchemaVersionError, match="99"):
        Cassette.load(path)


def test_missing_cassette_says_how_to_make_one(tmp_path: Path) -> None:
    with pytest.raises(SerializationError, match="RecordingChatClient"):
        Cassette.load(tmp_path / "absent.json")


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=60)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=8),
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(
                st.sampled_from(["schema_version", "interactions", "request", "response", "$type"])
                | st.text(max_size=5),
                inner,
                max_size=3,
            )
        ),
        max_leaves=12,
    )
)
def test_malformed_cassettes_raise_serialization_errors(data: object) -> None:
    try:
        cassette = Cassette.loads(json.dumps(data))
    except SerializationError:
        return
    # Only a well-formed empty cassette can load from random data.
    assert cassette.interactions == []


@pytest.mark.local_model
async def test_a_real_local_session_replays_offline(tmp_path: Path) -> None:
    path = tmp_path / "local.json"
    recorder = RecordingChatClient(LocalChatClient(), path)
    ask = [Message("user", "What is the weather in Paris?")]
    options = ChatOptions(tools=[WEATHER], tool_choice="required", max_tokens=40, temperature=0)
    live_call = await recorder.get_response(ask, options=options)
    follow = [Message("user", "Name a color.")]
    live_stream = [
        u
        async for u in recorder.get_streaming_response(
            follow, options=ChatOptions(max_tokens=6, temperature=0)
        )
    ]

    with allow_model_requests(False):  # the replay must not need the model
        replay = ReplayChatClient(path)
        again = await replay.get_response(ask, options=options)
        assert again.function_calls == live_call.function_calls
        replayed = [
            u
            async for u in replay.get_streaming_response(
                follow, options=ChatOptions(max_tokens=6, temperature=0)
            )
        ]
        assert [u.text for u in replayed] == [u.text for u in live_stream]
        assert (
            ChatResponse.from_updates(replayed).usage
            == ChatResponse.from_updates(live_stream).usage
        )
        replay.assert_complete()


async def test_failures_are_recorded_and_replayed_as_failures(tmp_path: Path) -> None:
    path = tmp_path / "errors.json"
    limited = ModelHTTPError("slow down", status_code=429, body={"e": 1}, retry_after=2.5)
    inner = ScriptedChatClient([limited, TimeoutError("too slow"), ModelOutputError("bad json")])
    recorder = RecordingChatClient(inner, path)
    with pytest.raises(ModelHTTPError):
        await recorder.get_response([Message("user", "a")])
    with pytest.raises(TimeoutError):
        await recorder.get_response([Message("user", "b")])
    with pytest.raises(ModelOutputError):
        async for _ in recorder.get_streaming_response([Message("user", "c")]):
            pass

    replay = ReplayChatClient(path)
    with pytest.raises(ModelHTTPError) as caught:
        await replay.get_response([Message("user", "a")])
    err = caught.value
    assert (err.status_code, err.body, err.retry_after, str(err)) == (
        429,
        {"e": 1},
        2.5,
        "slow down",
    )
    with pytest.raises(TimeoutError, match="too slow"):
        await replay.get_response([Message("user", "b")])
    with pytest.raises(ModelOutputError, match="bad json"):
        async for _ in replay.get_streaming_response([Message("user", "c")]):
            pass
    replay.assert_complete()
    script = ScriptedChatClient.from_cassette(path)
    with pytest.raises(ModelHTTPError):
        await script.get_response([Message("user", "anything")])


def test_a_malformed_recorded_error_is_refused() -> None:
    text = json.dumps(
        {
            "schema_version": CASSETTE_SCHEMA_VERSION,
            "interactions": [{"request": {}, "response": None, "error": {"kind": "boom"}}],
        }
    )
    with pytest.raises(SerializationError, match="kind"):
        Cassette.loads(text)
