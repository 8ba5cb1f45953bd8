"""`cantata serve spec.yaml`: a spec file served as a real subprocess on a free port of
127.0.0.1, asked with the official openai client, then stopped (every wait bounded); the
spec options are `cantata run`'s."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from openai import AsyncOpenAI
from typer.testing import CliRunner

from cantata.cli import app

from ..serve._servers import ROOT, cli_server

WAIT = 300.0  # bound of one request to the served local model
SCRIPTED = """\
version: 1
type: chat_agent
name: ${Settings:name}
description: Answers from a script.
instructions: Be brief.
model:
  api: scripted
  connection:
    script: ["first answer", "second answer"]
"""


@pytest.mark.local_model
async def test_serve_the_agent_with_tool_example_and_ask_it_with_openai() -> None:
    with cli_server(
        "examples/agent_with_tool.yaml", "--allow", "demo", "--store", "memory://",
        env={"PYTHONPATH": "examples"},
    ) as (url, _proc):  # fmt: skip
        async with AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", timeout=WAIT) as client:
            models = await client.models.list()
            assert [m.id for m in models.data] == ["forecaster"]
            reply = await client.chat.completions.create(
                model="forecaster",
                messages=[{"role": "user", "content": "What is the weather in Oslo today?"}],
            )
    assert (reply.choices[0].message.content or "").strip()


async def test_serve_a_spec_with_settings_and_ask_it_with_openai(tmp_path: Path) -> None:
    spec = tmp_path / "scripted.yaml"
    spec.write_text(SCRIPTED)
    with cli_server(str(spec), "--setting", "name=helper", "--store", "memory://") as (url, proc):
        async with AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", timeout=30) as client:
            first = await client.responses.create(model="helper", input="hello")
            second = await client.chat.completions.create(
                model="helper", messages=[{"role": "user", "content": "again"}]
            )
        assert proc.poll() is None
    assert first.output_text == "first answer"
    assert second.choices[0].message.content == "second answer"


TEAM = """\
version: 1
type: sequential
name: pair
participants:
  - {name: drafter, model: {api: scripted, connection: {script: ["a draft"]}}}
  - {name: editor, model: {api: scripted, connection: {script: ["the edit"]}}}
"""


async def test_serve_a_team_spec_and_ask_it_with_openai(tmp_path: Path) -> None:
    spec = tmp_path / "pair.json"  # a JSON spec is YAML too
    spec.write_text(json.dumps(yaml.safe_load(TEAM)))
    with cli_server(str(spec), "--store", "memory://") as (url, _proc):
        async with AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", timeout=30) as client:
            reply = await client.chat.completions.create(
                model="pair", messages=[{"role": "user", "content": "write"}]
            )
    assert "the edit" in (reply.choices[0].message.content or "")


def _serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cantata.cli", "serve", *args, "--port", "9"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_a_spec_that_does_not_load_fails_in_one_line(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(SCRIPTED)
    unresolved = _serve(str(spec))
    assert unresolved.returncode == 1
    assert "${Settings:name}" in unresolved.stderr
    tool = _serve("examples/agent_with_tool.yaml")  # its tool's module is not allowed
    assert tool.returncode == 1 and "demo.get_weather" in tool.stderr
    missing = _serve(str(tmp_path / "absent.json"))
    assert missing.returncode == 1 and "cannot be read" in missing.stderr


def test_spec_options_are_refused_with_module_object() -> None:
    done = _serve("tests/serve/_servers.py:echo", "--allow", "demo")
    assert done.returncode == 1
    assert "--setting and --allow are for spec files" in done.stderr


def test_help_names_spec_files_and_the_shared_options() -> None:
    serve_help = CliRunner().invoke(app, ["serve", "--help"], env={"COLUMNS": "200"}).output
    assert "spec file" in serve_help and "--setting" in serve_help and "--allow" in serve_help
    run_help = CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "200"}).output
    assert "cantata serve spec.yaml" in run_help
