"""ScriptedChatClient.from_cassette: a recorded session as a plain script."""

from __future__ import annotations

from pathlib import Path

import pytest

from cantata.core import Message, ModelError
from cantata.models import RecordingChatClient, ScriptedChatClient


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
