"""Each subcommand's error lines name only options that subcommand has: `cantata ask` tells
the user to fix ``--base-url``, `cantata run` and `cantata serve` (whose model is in a spec)
name the spec's field instead. Real subprocesses against a closed port of 127.0.0.1."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from cantata.cli.app import CLIENT_FLAGS, app
from cantata.cli.failure import foreign_flags

ROOT = Path(__file__).resolve().parents[2]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed once the block ends: nothing listens


def _flags(command: str) -> set[str]:
    import typer.main

    click_app = typer.main.get_command(app)
    sub = click_app.commands[command]  # type: ignore[attr-defined]
    return {o for p in sub.params for o in p.opts if o.startswith("--")}


def _cantata(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "cantata.cli", *args],
        cwd=ROOT,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    err = done.stderr.decode()
    assert "Traceback" not in err
    return err


def _spec(tmp_path: Path, url: str) -> Path:
    spec = tmp_path / "agent.yaml"
    spec.write_text(
        "version: 1\ntype: chat_agent\nname: helper\n"
        f"model: {{id: m, api: openai, connection: {{base_url: '{url}'}}}}\n"
    )
    return spec


@pytest.mark.parametrize("command", ["ask", "chat", "run", "serve", "schema"])
def test_the_commands_have_the_flags_the_tests_assume(command: str) -> None:
    flags = _flags(command)
    assert ("--base-url" in flags) == (command in {"ask", "chat"})
    if command in {"ask", "chat"}:
        assert flags >= CLIENT_FLAGS


def test_ask_names_its_own_flag_for_an_unreachable_server() -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    err = _cantata("ask", "hi", "--model", "m", "--base-url", url)
    assert "--base-url" in err
    assert foreign_flags(err, _flags("ask")) == []


def test_run_names_no_flag_it_does_not_have(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    err = _cantata("run", str(_spec(tmp_path, url)), "hi")
    assert "base_url" in err  # the spec's field, which the user can fix
    assert foreign_flags(err, _flags("run")) == []


def test_run_of_a_missing_model_file_names_the_spec_field(tmp_path: Path) -> None:
    spec = tmp_path / "local.yaml"
    spec.write_text(
        "version: 1\ntype: chat_agent\nname: helper\n"
        f"model: {{api: local, connection: {{model_path: '{tmp_path / 'none.gguf'}'}}}}\n"
    )
    err = _cantata("run", str(spec), "hi")
    assert foreign_flags(err, _flags("run")) == [], err


def test_foreign_flags_finds_what_a_command_lacks() -> None:
    line = "check that --base-url is right, or pass --model-path; --store is fine"
    assert foreign_flags(line, {"--store"}) == ["--base-url", "--model-path"]
    assert foreign_flags("a well-known--thing and x--y", set()) == []
