"""The local code executor: runs, fails, times out, and refuses the network and new
processes; the agents built on it run what they are given."""

from __future__ import annotations

import contextlib
import socket
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cantata.core import ConfigurationError, Message
from cantata.models import ScriptedChatClient, tool_call
from cantata.teams import CodeRunnerAgent, coder_agent
from cantata.tools import CodeExecutionError, LocalCodeExecutor, extract_code


@pytest.fixture
async def executor():
    ex = LocalCodeExecutor(timeout=5)
    yield ex
    ex.close()


async def test_runs_code_and_captures_output(executor: LocalCodeExecutor) -> None:
    result = await executor.run("import sys\nprint(6 * 7)\nprint('oops', file=sys.stderr)")
    assert result.ok
    assert result.stdout == "42\n"
    assert result.stderr == "oops\n"
    assert "exit code 0" in result.as_text() and "42" in result.as_text()


async def test_a_failing_program_is_a_result(executor: LocalCodeExecutor) -> None:
    result = await executor.run("raise SystemExit(3)")
    assert result.exit_code == 3 and not result.ok
    syntax = await executor.run("def (")
    assert syntax.exit_code == 1 and "SyntaxError" in syntax.stderr


async def test_files_stay_in_the_scratch_directory_between_runs(
    executor: LocalCodeExecutor,
) -> None:
    await executor.run("open('note.txt', 'w').write('kept')")
    assert (executor.work_dir / "note.txt").read_text() == "kept"
    again = await executor.run("import os; print(open('note.txt').read(), os.getcwd())")
    assert again.stdout.split() == ["kept", str(executor.work_dir)]


async def test_timeout_kills_the_whole_process_group(executor: LocalCodeExecutor) -> None:
    result = await executor.run(
        "import time\nprint('started', flush=True)\ntime.sleep(60)", time_limit=1
    )
    assert result.timed_out and not result.ok
    assert result.stdout == "started\n"
    assert "timed out" in result.as_text()


async def test_no_connection_can_be_made(executor: LocalCodeExecutor) -> None:
    # A real listener on 127.0.0.1: the child, in a network namespace of its own with no
    # interface up, must not reach it.
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    accepted: list[object] = []
    server.settimeout(3)

    def accept() -> None:
        with contextlib.suppress(OSError):
            accepted.append(server.accept())

    waiter = threading.Thread(target=accept)
    waiter.start()
    try:
        code = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)"
        result = await executor.run(code)
        urllib = await executor.run(
            f"import urllib.request\nurllib.request.urlopen('http://127.0.0.1:{port}/')"
        )
    finally:
        waiter.join()
        server.close()
    assert not accepted
    assert result.exit_code != 0 and "Network is unreachable" in result.stderr
    assert urllib.exit_code != 0 and "Network is unreachable" in urllib.stderr


async def test_asyncio_and_threads_work_inside(executor: LocalCodeExecutor) -> None:
    # asyncio's loop needs a socket pair (local, allowed) and threads are allowed
    code = (
        "import asyncio, threading\n"
        "t = threading.Thread(target=print, args=('thread',)); t.start(); t.join()\n"
        "print(asyncio.run(asyncio.sleep(0, 'loop')))"
    )
    result = await executor.run(code)
    assert result.ok, result.as_text()
    assert result.stdout.split() == ["thread", "loop"]


@pytest.mark.parametrize(
    "code",
    [
        "import subprocess\nsubprocess.run(['touch', 'marker'])",
        "import os\nprint(os.system('touch marker'))",
        "import os\nif os.fork() == 0:\n    open('marker', 'w')",
        "import os\nos.execv('/usr/bin/touch', ['touch', 'marker'])",
    ],
)
async def test_new_processes_are_refused(executor: LocalCodeExecutor, code: str) -> None:
    result = await executor.run(code)
    assert not (executor.work_dir / "marker").exists(), result.as_text()
    assert "PermissionError" in result.stderr or result.stdout.strip() not in ("", "0")


async def test_environment_has_no_proxies_or_secrets(
    executor: LocalCodeExecutor, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("OPENAI_API_KEY", "secret")
    result = await executor.run("import os; print(sorted(os.environ))")
    assert result.stdout.strip() == "['HOME', 'LANG', 'PATH', 'PYTHONIOENCODING', 'TMPDIR']"


async def test_output_is_capped() -> None:
    async with LocalCodeExecutor(timeout=10, max_output=100) as ex:
        result = await ex.run("print('x' * 1_000_000)")
    assert result.ok and result.truncated
    assert len(result.stdout) == 100


async def test_private_scratch_is_removed_on_close_and_a_given_one_kept(tmp_path: Path) -> None:
    ex = LocalCodeExecutor()
    scratch = ex.work_dir
    assert scratch.is_dir()
    ex.close()
    assert not scratch.exists()
    with pytest.raises(CodeExecutionError, match="closed"):
        await ex.run("print(1)")
    async with LocalCodeExecutor(work_dir=tmp_path) as mine:
        await mine.run("open('f', 'w').write('1')")
    assert (tmp_path / "f").exists()


def test_bad_configuration_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="timeout"):
        LocalCodeExecutor(timeout=0)
    with pytest.raises(ConfigurationError, match="max_output"):
        LocalCodeExecutor(max_output=0)
    with pytest.raises(ConfigurationError, match="not a directory"):
        LocalCodeExecutor(work_dir=tmp_path / "missing")


async def test_a_missing_interpreter_is_a_typed_error(tmp_path: Path) -> None:
    async with LocalCodeExecutor(python=str(tmp_path / "no-python")) as ex:
        with pytest.raises(CodeExecutionError, match="could not start"):
            await ex.run("print(1)")


def test_extract_code_finds_fenced_blocks() -> None:
    text = "Run this:\n```python\nprint(1)\n```\nand\n```\nprint(2)\n```\n"
    assert extract_code(text) == ["print(1)", "print(2)"]
    assert extract_code("no code here") == []


@settings(max_examples=25, deadline=None)
@given(st.text(max_size=200))
def test_extract_code_never_fails_on_any_text(text: str) -> None:
    blocks = extract_code(text)
    assert all(isinstance(b, str) and b for b in blocks)


async def test_code_runner_agent_runs_the_last_block(executor: LocalCodeExecutor) -> None:
    runner = CodeRunnerAgent(executor)
    response = await runner.run(
        [
            Message("user", "```python\nprint(1)\n```"),
            Message("user", "```python\nprint(40 + 2)\n```"),
        ]
    )
    assert "42" in response.text and "exit code 0" in response.text
    empty = await runner.run("just words")
    assert "No Python code" in empty.text


async def test_coder_agent_runs_the_code_its_model_writes(executor: LocalCodeExecutor) -> None:
    client = ScriptedChatClient(
        [[tool_call("run_python", {"code": "print(2 ** 10)"})], "The answer is 1024."]
    )
    coder = coder_agent(client, executor)
    response = await coder.run("What is 2 to the 10th?")
    assert response.text.endswith("The answer is 1024.")
    tool_results = [m for m in response.messages if m.role == "tool"]
    assert "1024" in str(tool_results[0].contents[0].result)
    assert client.calls[0].options.tool_choice == "required"


def test_python_tool_bounds_the_script_the_model_may_send(executor: LocalCodeExecutor) -> None:
    from cantata.core import ConfigurationError
    from cantata.tools import python_tool

    tool = python_tool(executor, max_code_chars=200)
    assert tool.parameters["properties"]["code"]["maxLength"] == 200
    with pytest.raises(ConfigurationError, match="max_code_chars"):
        python_tool(executor, max_code_chars=0)
