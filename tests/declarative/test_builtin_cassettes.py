"""Configs of the cassette clients: a replay client loaded from its config (cassette inline,
or from its file) answers the recorded requests as the original does; a recorder's config
names its inner client and its file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cantata.core import CantataError, Message
from cantata.declarative import SpecError, from_config, to_config
from cantata.models import (
    ChatOptions,
    OpenAIChatClient,
    RecordingChatClient,
    ReplayChatClient,
    ScriptedChatClient,
)

ASK = [Message("user", "hi")]


async def _cassette(path: Path) -> None:
    recorder = RecordingChatClient(ScriptedChatClient(["hello back", "second"]), path)
    await recorder.get_response(ASK)
    await recorder.get_response([Message("user", "more")], options=ChatOptions(max_tokens=5))


async def test_replay_round_trip_answers_like_the_original(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    await _cassette(path)
    first = ReplayChatClient(path, check_requests=True)
    config = json.loads(json.dumps(to_config(first)))
    assert config["config"]["cassette"]["schema_version"] == 1
    for back in (
        from_config(config),
        from_config({"provider": "cantata.models.ReplayChatClient",
                     "config": {"path": str(path)}}),
    ):  # fmt: skip
        assert isinstance(back, ReplayChatClient) and to_config(back) == config
        original = ReplayChatClient(path)
        assert (await back.get_response(ASK)).text == "hello back"
        assert (await original.get_response(ASK)).text == "hello back"
        with pytest.raises(CantataError, match="matches no recorded interaction"):
            await back.get_response([Message("user", "never asked")])


def test_recording_round_trip_names_its_inner_client_and_file(tmp_path: Path) -> None:
    inner = OpenAIChatClient("m", base_url="http://127.0.0.1:9/v1", api_key="sk-x")
    recorder = RecordingChatClient(inner, tmp_path / "r.json")
    config = json.loads(json.dumps(to_config(recorder)))
    assert "sk-x" not in json.dumps(config)
    back = from_config(config)
    assert isinstance(back, RecordingChatClient) and isinstance(back.inner, OpenAIChatClient)
    assert back.path == tmp_path / "r.json" and to_config(back) == config


@pytest.mark.parametrize(
    ("config", "match"),
    [
        ({}, "exactly one of"),
        ({"cassette": {}, "path": "x"}, "exactly one of"),
        ({"cassette": {"schema_version": 9, "interactions": []}}, "schema_version"),
        ({"cassette": {"schema_version": 1, "interactions": [1]}}, "interaction"),
        ({"cassette": []}, "must be dict"),
        ({"path": "/nonexistent/c.json"}, "no cassette"),
        ({"path": "/"}, "cannot be read"),
        ({"path": "x", "check_requests": "yes"}, "must be bool"),
    ],
)
def test_bad_replay_configs_are_typed_errors(config: dict[str, Any], match: str) -> None:
    with pytest.raises(CantataError, match=match):
        from_config({"provider": "cantata.models.ReplayChatClient", "config": config})


def test_bad_recording_configs_are_typed_errors() -> None:
    with pytest.raises(SpecError, match="missing field"):
        from_config({"provider": "cantata.models.RecordingChatClient", "config": {"path": "x"}})
