"""`cantata run`: agents and teams from spec files, plain and JSON output, resume."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from typer.testing import CliRunner

from cantata.cli import app
from cantata.stores import open_store
from cantata.workflows import StateStoreCheckpointStore

from . import _weather_tools as weather_tools

runner = CliRunner()

AGENT = """
version: 1
type: chat_agent
name: forecaster
instructions: Answer about the weather.
model:
  api: scripted
  connection:
    script:
      - {tool: get_weather, arguments: {city: Oslo}}
      - It is sunny in Oslo.
tools: [MOD.get_weather]
"""

TEAM = """
version: 1
type: group_chat
name: review
participants:
  - name: writer
    model: {api: scripted, connection: {script: ["draft one", "draft two"]}}
  - name: critic
    model: {api: scripted, connection: {script: ["fix it", "APPROVE"]}}
termination: {text_mention: APPROVE, max_messages: 10}
"""


def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text.replace("MOD", weather_tools.__name__), encoding="utf-8")
    return str(path)


def test_agent_run_shows_tool_calls_and_answer(tmp_path: Path) -> None:
    spec = _write(tmp_path, "a.yaml", AGENT)
    result = runner.invoke(app, ["run", spec, "weather?", "--allow", weather_tools.__name__])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "[forecaster]" in out
    assert 'tool call get_weather({"city": "Oslo"})' in out
    assert "tool result: sunny in Oslo" in out
    assert "It is sunny in Oslo." in out
    assert "\x1b[" not in out  # piped: plain text


def test_agent_run_json_events(tmp_path: Path) -> None:
    spec = _write(tmp_path, "a.yaml", AGENT)
    args = ["run", spec, "weather?", "--json", "--allow", weather_tools.__name__]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    events = [json.loads(line) for line in result.output.splitlines() if line]
    kinds = [e["event"] for e in events]
    assert kinds[0] == "speaker" and kinds[-1] == "done"
    call = next(e for e in events if e["event"] == "tool_call")
    assert call["name"] == "get_weather" and call["arguments"] == {"city": "Oslo"}
    assert next(e for e in events if e["event"] == "tool_result")["result"] == "sunny in Oslo"


def test_tool_not_allowed_is_a_one_line_error(tmp_path: Path) -> None:
    spec = _write(tmp_path, "a.yaml", AGENT)
    result = runner.invoke(app, ["run", spec, "weather?"])
    assert result.exit_code == 1
    assert "is not available" in result.output and "Traceback" not in result.output


def test_team_run_shows_routing_and_stop(tmp_path: Path) -> None:
    spec = _write(tmp_path, "t.yaml", TEAM)
    result = runner.invoke(app, ["run", spec, "write a poem"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "-> writer: round robin"
    assert "[critic]" in lines and "APPROVE" in lines
    assert lines[-1].startswith("stopped: text 'APPROVE'")


def test_team_resume_continues_the_saved_conversation(tmp_path: Path) -> None:
    spec = _write(tmp_path, "t.yaml", TEAM)
    url = f"sqlite:///{tmp_path / 'cp.db'}"
    first = runner.invoke(app, ["run", spec, "write", "--json", "--store", url])
    assert first.exit_code == 0, first.output
    saved = [json.loads(x) for x in first.output.splitlines()][-1]
    assert saved["event"] == "checkpoint"
    args = ["run", spec, "again", "--json", "--store", url, "--resume", saved["checkpoint_id"]]
    second = runner.invoke(app, args)
    assert second.exit_code == 0, second.output
    latest = [json.loads(x) for x in second.output.splitlines()][-1]["checkpoint_id"]

    async def runs() -> tuple[str, str]:
        state = open_store(url)
        store = StateStoreCheckpointStore(state)
        try:
            a = await store.load(saved["checkpoint_id"])
            b = await store.load(latest)
            return a.run_id, b.run_id
        finally:
            await state.close()

    run_a, run_b = asyncio.run(runs())
    assert run_a == run_b  # the same conversation went on


def test_resume_needs_a_store_and_a_known_checkpoint(tmp_path: Path) -> None:
    spec = _write(tmp_path, "t.yaml", TEAM)
    result = runner.invoke(app, ["run", spec, "x", "--resume", "abc"])
    assert result.exit_code == 1 and "--store" in result.output
    url = f"sqlite:///{tmp_path / 'cp.db'}"
    result = runner.invoke(app, ["run", spec, "x", "--resume", "abc", "--store", url])
    assert result.exit_code == 1 and "abc" in result.output


def test_bad_spec_is_a_one_line_error(tmp_path: Path) -> None:
    spec = _write(tmp_path, "bad.yaml", "version: 7\ntype: chat_agent\nname: x\n")
    result = runner.invoke(app, ["run", spec, "x"])
    assert result.exit_code == 1
    assert "version" in result.output and len(result.output.strip().splitlines()) == 1


TOOL_TEAM = """
version: 1
type: group_chat
name: desk
participants:
  - name: first
    model:
      api: scripted
      connection:
        script: [{tool: get_weather, arguments: {city: Oslo}}, "Oslo is sunny."]
    tools: [MOD.get_weather]
  - name: second
    model:
      api: scripted
      connection:
        script: [{tool: get_weather, arguments: {city: Rome}}, "Rome too. DONE"]
    tools: [MOD.get_weather]
termination: {text_mention: DONE, max_messages: 10}
"""


def test_team_run_json_shows_every_participants_tool_calls(tmp_path: Path) -> None:
    spec = _write(tmp_path, "t.yaml", TOOL_TEAM)
    args = ["run", spec, "weather?", "--json", "--allow", weather_tools.__name__]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    events = [json.loads(line) for line in result.output.splitlines() if line]
    calls = [(e["agent"], e["arguments"]["city"]) for e in events if e["event"] == "tool_call"]
    assert calls == [("first", "Oslo"), ("second", "Rome")]
    results = [e for e in events if e["event"] == "tool_result"]
    assert len(results) == 2 and len({e["call_id"] for e in results}) == 2
    speakers = [e["name"] for e in events if e["event"] == "speaker"]
    assert speakers == ["first", "second"]


def test_run_has_verbose_and_names_allow_as_a_flag(tmp_path: Path) -> None:
    import logging

    spec = _write(tmp_path, "a.yaml", AGENT)
    root, ours = logging.getLogger(), logging.getLogger("cantata")
    handlers, levels = list(root.handlers), (root.level, ours.level)
    try:  # --verbose logs to the runner's stderr, closed after the call: put logging back
        result = runner.invoke(app, ["run", spec, "weather?", "--verbose"])
    finally:
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(levels[0])
        ours.setLevel(levels[1])
    assert result.exit_code == 1
    assert "No such option" not in result.output
    assert "allow=[" not in result.output
    assert "--allow" in result.output
