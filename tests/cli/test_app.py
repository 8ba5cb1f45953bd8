"""The `cantata` command: through typer's CliRunner and as a real subprocess."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from cantata.cli import app, main

runner = CliRunner()


def test_main_is_the_entry_point() -> None:
    assert callable(main)


def test_help_lists_the_commands() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    assert "ask" in result.output and "chat" in result.output


def test_base_url_without_model_is_a_clear_error() -> None:
    result = runner.invoke(app, ["ask", "hi", "--base-url", "http://127.0.0.1:9/v1"])
    assert result.exit_code == 1
    assert "needs --model" in result.output
    assert "Traceback" not in result.output


def test_model_path_with_a_server_is_refused() -> None:
    result = runner.invoke(app, ["ask", "hi", "--model", "m", "--model-path", "x.gguf"])
    assert result.exit_code == 1
    assert "cannot be combined" in result.output


def test_a_blocked_model_request_is_reported_not_raised() -> None:
    # Real model requests are blocked in unit tests: the CLI must report it as an error line.
    result = runner.invoke(app, ["ask", "hi", "--max-tokens", "4"])
    assert result.exit_code == 1
    assert "UsageError" in result.output and "LocalChatClient" in result.output
    assert "Traceback" not in result.output


def test_bad_flag_values_are_rejected_by_the_parser() -> None:
    result = runner.invoke(app, ["ask", "hi", "--max-tokens", "0"])
    assert result.exit_code == 2


@pytest.mark.openai_server
def test_unreachable_server_is_a_clear_error(unused_port: int) -> None:
    url = f"http://127.0.0.1:{unused_port}/v1"
    result = runner.invoke(app, ["ask", "hi", "--model", "m", "--base-url", url])
    assert result.exit_code == 1
    assert "could not connect" in result.output


@pytest.fixture
def unused_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.local_model
def test_ask_streams_an_answer_from_the_local_model() -> None:
    result = runner.invoke(
        app,
        ["ask", "What is 2+2?", "--max-tokens", "8", "--temperature", "0", "--system", "Be brief."],
    )
    assert result.exit_code == 0, result.output
    assert result.output.strip()


def test_an_empty_question_from_stdin_is_refused() -> None:
    result = runner.invoke(app, ["ask", "-"], input="  \n")
    assert result.exit_code == 1
    assert "question is empty" in result.output


@pytest.mark.local_model
def test_ask_reads_the_question_from_stdin() -> None:
    result = runner.invoke(app, ["ask", "-", "--max-tokens", "4"], input="Name a color.\n")
    assert result.exit_code == 0, result.output
    assert result.output.strip()


@pytest.mark.local_model
def test_chat_keeps_history_and_exits_on_command() -> None:
    result = runner.invoke(
        app, ["chat", "--max-tokens", "6", "--temperature", "0"], input="Hello.\nAnd then?\n/exit\n"
    )
    assert result.exit_code == 0, result.output
    assert result.output.count("model>") == 2


@pytest.mark.local_model
def test_chat_ends_on_end_of_input() -> None:
    result = runner.invoke(app, ["chat", "--max-tokens", "4"], input="Hi.\n")
    assert result.exit_code == 0, result.output
    assert result.output.count("model>") == 1


@pytest.mark.local_model
def test_cantata_ask_as_a_subprocess() -> None:
    exe = shutil.which("cantata", path=os.path.dirname(sys.executable))
    cmd = [exe] if exe else [sys.executable, "-m", "cantata.cli"]
    done = subprocess.run(
        [*cmd, "ask", "Name a color.", "--max-tokens", "8", "--temperature", "0"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()
    assert "Traceback" not in done.stderr


def test_subprocess_error_exits_non_zero_without_traceback() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "cantata.cli", "ask", "hi", "--base-url", "http://127.0.0.1:9/v1"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1
    assert "needs --model" in done.stderr
    assert "Traceback" not in done.stderr
