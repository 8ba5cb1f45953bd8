"""The `cantata` command: through typer's CliRunner and as a real subprocess."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from typer.testing import CliRunner

import cantata
from cantata.cli import app, main
from cantata.cli.failure import cli_words, describe

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


@pytest.mark.parametrize(
    "flags",
    [
        ["--max-tokens", "0"],
        ["--max-tokens", "10000000000"],
        ["--temperature", "1e309"],
        ["--temperature", "nan"],
        ["--temperature", "-1"],
        ["--temperature", "3"],
    ],
)
def test_bad_flag_values_are_rejected_by_the_parser(flags: list[str]) -> None:
    result = runner.invoke(app, ["ask", "hi", *flags])
    assert result.exit_code == 2, result.output


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output == f"cantata {cantata.__version__}\n"


@pytest.mark.parametrize("url", ["http://[::1", "", "127.0.0.1:8080"])
def test_a_malformed_base_url_is_one_line_in_the_cli_words(url: str) -> None:
    result = runner.invoke(app, ["ask", "hi", "--model", "m", "--base-url", url])
    assert result.exit_code == 1
    assert len(result.output.strip().splitlines()) == 1
    assert "--base-url" in result.output and "base_url" not in result.output
    assert "Traceback" not in result.output


def test_debug_shows_the_traceback() -> None:
    result = runner.invoke(
        app, ["ask", "hi", "--model", "m", "--base-url", "http://[::1", "--debug"]
    )
    assert result.exit_code == 1
    assert "Traceback" in result.output and "ConfigurationError" in result.output


def test_stdin_that_is_not_utf8_is_one_line() -> None:
    result = runner.invoke(app, ["ask", "-"], input=b"caf\xe9\n")
    assert result.exit_code == 1
    assert len(result.output.strip().splitlines()) == 1
    assert "not UTF-8" in result.output and "Traceback" not in result.output


def test_subprocess_with_non_utf8_stdin_has_no_traceback() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "cantata.cli", "ask", "-"],
        input=b"\xff\xfe",
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1
    assert b"not UTF-8" in done.stderr and b"Traceback" not in done.stderr


ASK_FLAGS = {"--model", "--base-url", "--model-path", "--max-tokens", "--temperature"}


def test_library_words_become_cli_words() -> None:
    words = "pass model_path= to a GGUF file"
    assert cli_words(words, ASK_FLAGS) == "pass --model-path to a GGUF file"
    assert cli_words("check that base_url= is right", ASK_FLAGS) == "check that --base-url is right"
    assert (
        cli_words(
            "none was set: set CANTATA_API_KEY (or OPENAI_API_KEY), or pass api_key=", ASK_FLAGS
        )
        == "none was set: set CANTATA_API_KEY (or OPENAI_API_KEY)"
    )
    # a command without those flags keeps the library's (and the spec's) names
    assert cli_words(words, {"--store", "--json"}) == words


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
    # piped: no prompts, one answer per question
    assert "model>" not in result.output and "you>" not in result.output
    assert len(result.output.strip().splitlines()) >= 2


@pytest.mark.local_model
def test_chat_ends_on_end_of_input() -> None:
    result = runner.invoke(app, ["chat", "--max-tokens", "4"], input="Hi.\n")
    assert result.exit_code == 0, result.output
    assert result.output.strip()


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


@pytest.mark.local_model
def test_a_missing_gguf_file_is_one_line_naming_the_flag() -> None:
    result = runner.invoke(app, ["ask", "hi", "--model-path", "/nonexistent/model.gguf"])
    assert result.exit_code == 1
    assert "--model-path" in result.output and "model_path" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_openai_without_a_key_names_the_variable_and_the_flag(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for variable in ("CANTATA_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(variable, raising=False)
    result = runner.invoke(app, ["ask", "hi", "--model", "gpt-4o-mini"])
    assert result.exit_code == 1
    assert "set CANTATA_API_KEY (or OPENAI_API_KEY), or pass --base-url" in result.output
    assert "api_key" not in result.output and "base_url" not in result.output


def test_any_failure_is_described_on_one_bounded_line() -> None:
    from cantata.core import ModelError

    assert "--debug" in describe(KeyError("boom"))
    assert describe(FileNotFoundError(2, "No such file", "x.txt")) == "No such file: x.txt"
    line = describe(ModelError("first line\n  second line " + "x" * 2000))
    assert "\n" not in line and len(line) <= 600 and line.startswith("ModelError: first line")
