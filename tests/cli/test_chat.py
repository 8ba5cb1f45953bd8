"""`cantata chat` and `cantata ask` against a scripted server: errors, Ctrl-C, pipes, logs."""

from __future__ import annotations

import contextlib
import os
import pty
import select
import signal
import subprocess
import sys
import threading
import time

import pytest
from typer.testing import CliRunner

from cantata.cli import app
from cantata.cli.chat_session import _LineReader

from .._chat_server import ChatServer
from .conftest import answer

runner = CliRunner()


def _server_flags(server: ChatServer) -> list[str]:
    return ["--model", "script", "--base-url", server.url]


def test_a_model_error_is_shown_and_the_conversation_goes_on(script_server: ChatServer) -> None:
    script_server.replies += [answer(status=400), answer("Paris it is.")]
    result = runner.invoke(app, ["chat", *_server_flags(script_server)], input="first?\nsecond?\n")
    assert result.exit_code == 0, result.output
    assert "error: ModelHTTPError" in result.output and "HTTP 400" in result.output
    assert "Paris it is." in result.output
    assert "Traceback" not in result.output
    # the failed question is not part of the conversation any more
    second = script_server.requests[1]["messages"]
    assert [m["content"] for m in second] == ["second?"]


def test_piped_input_prints_answers_without_prompts(script_server: ChatServer) -> None:
    script_server.replies += [answer("one"), answer("two")]
    result = runner.invoke(app, ["chat", *_server_flags(script_server)], input="a\nb\n/exit\nc\n")
    assert result.exit_code == 0, result.output
    assert result.output == "one\ntwo\n"
    assert [m["content"] for m in script_server.requests[1]["messages"]] == ["a", "one", "b"]


def test_a_line_that_is_not_utf8_is_skipped_with_an_error(script_server: ChatServer) -> None:
    script_server.replies += [answer("fine")]
    result = runner.invoke(app, ["chat", *_server_flags(script_server)], input=b"\xff\xfe\nok\n")
    assert result.exit_code == 0, result.output
    assert "not UTF-8" in result.output and "fine" in result.output


def _cantata(*args: str, **kwargs: object) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1", COLUMNS="200")
    return subprocess.Popen(
        [sys.executable, "-m", "cantata.cli", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        **kwargs,  # type: ignore[call-overload]
    )


def test_ctrl_c_stops_the_answer_and_the_chat_goes_on(script_server: ChatServer) -> None:
    hold = threading.Event()
    script_server.replies += [answer("a very long answer", hold=hold), answer("short")]
    proc = _cantata("chat", *_server_flags(script_server))
    try:
        assert proc.stdin is not None
        proc.stdin.write("tell me everything\n")
        proc.stdin.flush()
        assert script_server.first_chunk_sent.wait(60), "the answer never started"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate("and briefly?\n", timeout=60)
    finally:
        hold.set()
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 0, err
    assert "(answer stopped)" in err and "Traceback" not in err, (out, err)
    # at most the first piece of the stopped answer was shown, then the next answer whole
    assert out.endswith("\nshort\n") and "very long" not in out
    assert [m["content"] for m in script_server.requests[1]["messages"]] == ["and briefly?"]


def test_verbose_logs_model_requests_at_debug(script_server: ChatServer) -> None:
    script_server.replies += [answer("hi")]
    proc = _cantata("ask", "hello", "--verbose", *_server_flags(script_server))
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert out == "hi\n"
    assert "DEBUG cantata.models: request to" in err


def test_a_401_without_a_key_speaks_the_cli_words(
    script_server: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable in ("CANTATA_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(variable, raising=False)
    script_server.replies += [answer(status=401)]
    result = runner.invoke(app, ["ask", "hi", *_server_flags(script_server)])
    assert result.exit_code == 1
    assert "set CANTATA_API_KEY (or OPENAI_API_KEY)" in result.output
    assert "api_key" not in result.output
    assert len(result.output.strip().splitlines()) == 1


class _Terminal:
    """`cantata chat` on a pseudo-terminal, read until an expected text (bounded waits)."""

    def __init__(self, *args: str) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: become the command
            os.environ["PYTHONFAULTHANDLER"] = "1"
            os.execv(sys.executable, [sys.executable, "-m", "cantata.cli", *args])
        self.seen = ""

    def expect(self, text: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.seen:
            left = deadline - time.monotonic()
            assert left > 0, f"never saw {text!r}; saw {self.seen!r}"
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                try:
                    self.seen += os.read(self.fd, 4096).decode(errors="replace")
                except OSError:  # the child is gone
                    assert text in self.seen, f"never saw {text!r}; saw {self.seen!r}"

    def send(self, data: str) -> None:
        self.seen = ""
        os.write(self.fd, data.encode())

    def wait(self, timeout: float = 30) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                os.close(self.fd)
                return os.waitstatus_to_exitcode(status)
            time.sleep(0.05)
        os.kill(self.pid, signal.SIGABRT)  # faulthandler shows where it hangs
        time.sleep(1)
        with contextlib.suppress(OSError):
            self.seen += os.read(self.fd, 65536).decode(errors="replace")
        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        os.close(self.fd)
        raise AssertionError(f"cantata chat did not leave: {self.seen}")


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_on_a_terminal_ctrl_c_stops_an_answer_and_a_second_at_the_prompt_leaves(
    script_server: ChatServer,
) -> None:
    hold = threading.Event()
    script_server.replies += [answer("a very long answer", hold=hold), answer("short")]
    term = _Terminal("chat", *_server_flags(script_server))
    try:
        term.expect("you>")
        term.send("tell me everything\r")
        term.expect("model>")
        assert script_server.first_chunk_sent.wait(60)
        term.send("\x03")  # Ctrl-C, through the terminal
        term.expect("(answer stopped)")
        term.expect("you>")
        term.send("and briefly?\r")
        term.expect("short")
        term.expect("you>")
        term.send("\x03")
        assert term.wait() == 0
    finally:
        hold.set()
    assert [m["content"] for m in script_server.requests[1]["messages"]] == ["and briefly?"]


def test_lines_that_arrive_together_are_read_without_waiting_for_more(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    read_end, write_end = os.pipe()
    os.write(write_end, b"first\nsecond\n")  # the writer stays open: no end of input
    lines: list[bytes] = []
    with open(read_end, "rb", buffering=0) as stdin:
        monkeypatch.setattr(sys, "stdin", stdin)
        reader = _LineReader()
        thread = threading.Thread(
            target=lambda: lines.extend([reader.readline(), reader.readline()]), daemon=True
        )
        thread.start()
        thread.join(10)  # a reader that waits for more input has not returned the second
        read_before_the_end = list(lines)
        os.close(write_end)
        thread.join(10)
    assert read_before_the_end == [b"first\n", b"second\n"]
