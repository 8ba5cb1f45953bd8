"""ScriptedChatClient: streaming parity, and a recorded session (cassette) as a plain script."""

from __future__ import annotations

from pathlib import Path

import pytest

from cantata.core import Message, ModelError
from cantata.models import ChatResponse, RecordingChatClient, ScriptedChatClient


async def test_from_cassette_plays_recorded_answers_in_order(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    recorder = RecordingChatClient(ScriptedChatClient(["one", "two"]), path)
    await recorder.get_response([Message("user", "a")])
    await recorder.get_response([Message("user", "b")])
    script = ScriptedChatClient.from_cassette(path, chunk_size=2)
    assert (await script.get_response([Message("user", "whatever")])).text == "one"
    pieces = [u.text async for u in script.get_streaming_response([Message("user", "x")])]
    assert [p for p in pieces if p] == ["tw", "o"]
    script.assert_complete()
    with pytest.raises(ModelError, match="ran out"):
        await script.get_response([Message("user", "more")])


async def test_an_empty_answer_streams_the_same_message_as_a_whole_one() -> None:
    whole = await ScriptedChatClient([""]).get_response([Message("user", "hi")])
    updates = [u async for u in ScriptedChatClient([""]).get_streaming_response([])]
    streamed = ChatResponse.from_updates(updates)
    assert [m.role for m in streamed.messages] == [m.role for m in whole.messages] == ["assistant"]
    assert streamed.text == whole.text == ""
