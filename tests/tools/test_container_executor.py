"""`ContainerCodeExecutor` on a real container engine: the code runs, keeps its scratch files
between runs, cannot reach the network (a server on the host's 127.0.0.1 included), cannot
read host files outside its mounts nor write its root, and is killed at its time limit.

Skipped with the reason when no engine can be had on this machine (no ``dockerd``, or the
``docker`` client library missing); under ``CI=true`` an engine that was installed but does
not answer fails the run (.ci/run installs and starts it).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from cantata.core import ConfigurationError
from cantata.tools import CodeExecutionError, ContainerCodeExecutor, python_tool

from ..conftest import IN_CI


def _engine_or_skip() -> None:
    try:
        import docker
    except ImportError:
        if IN_CI:  # the project's install brings it (the `all` extra)
            pytest.fail("the docker client library is not installed")
        pytest.skip("the docker client library is not installed (pip install 'cantata[container]')")
    try:
        client = docker.from_env(timeout=10)
        try:
            client.ping()
        finally:
            client.close()
    except docker.errors.DockerException as exc:
        why = f"no container engine answers: {exc}"
        if IN_CI and shutil.which("dockerd"):
            pytest.fail(f"dockerd is installed but {why}")
        pytest.skip(why)


@pytest.fixture
async def executor(tmp_path: Path) -> AsyncIterator[ContainerCodeExecutor]:
    _engine_or_skip()
    async with ContainerCodeExecutor(timeout=20) as ex:
        yield ex


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP server on the host's loopback that the container must not reach."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    try:
        yield server.getsockname()[1]
    finally:
        server.close()


async def test_code_runs_and_its_files_stay_for_the_next_run(
    executor: ContainerCodeExecutor,
) -> None:
    first = await executor.run("open('note.txt', 'w').write('kept'); print(6 * 7)")
    assert first.ok and first.stdout == "42\n"
    second = await executor.run("import sys; print(open('note.txt').read()); sys.exit(3)")
    assert (second.exit_code, second.stdout) == (3, "kept\n")
    assert (executor.work_dir / "note.txt").read_text() == "kept"
    failed = await executor.run("raise ValueError('no')")
    assert failed.exit_code == 1 and "ValueError: no" in failed.stderr


async def test_the_network_is_out_of_reach(executor: ContainerCodeExecutor, listener: int) -> None:
    code = f"""
import socket
for host, port in [("127.0.0.1", {listener}), ("172.17.0.1", {listener}), ("8.8.8.8", 53)]:
    try:
        socket.create_connection((host, port), timeout=3).close()
        print("reached", host)
    except OSError as exc:
        print("refused", host, type(exc).__name__)
print(sorted(name for _, name in socket.if_nameindex()))
"""
    result = await executor.run(code)
    assert result.ok, result.stderr
    lines = result.stdout.splitlines()
    assert [line.split()[0] for line in lines[:3]] == ["refused"] * 3
    assert lines[3] == "['lo']"


async def test_host_files_outside_the_mounts_cannot_be_read(
    executor: ContainerCodeExecutor, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret")
    home = Path.home() / f".cantata-test-{os.getpid()}"
    home.write_text("host secret")
    try:
        code = f"""
import os
for path in [{str(secret)!r}, {str(home)!r}, "/etc/shadow", "/proc/1/root" + {str(secret)!r}]:
    try:
        print("read", path, open(path).read())
    except OSError as exc:
        print("refused", path, type(exc).__name__)
for path in ["/usr/lib/pwned", "/pwned", {str(executor.python)!r}]:
    try:
        open(path, "a").write("x")
        print("wrote", path)
    except OSError as exc:
        print("refused", path, type(exc).__name__)
print(os.getuid())
"""
        result = await executor.run(code)
    finally:
        home.unlink()
    assert result.ok, result.stderr
    lines = result.stdout.splitlines()
    assert "host secret" not in result.stdout
    assert all(line.startswith("refused") for line in lines[:-1]), lines
    assert lines[-1] != "0"


async def test_code_is_killed_at_its_time_limit(executor: ContainerCodeExecutor) -> None:
    started = time.monotonic()
    result = await executor.run(
        "import time\nprint('going', flush=True)\nwhile True: pass", time_limit=2
    )
    assert result.timed_out and not result.ok
    assert result.stdout == "going\n"
    assert time.monotonic() - started < 15
    after = await executor.run("print('next')")
    assert after.stdout == "next\n"


async def test_fork_bombs_and_memory_hogs_hit_the_bounds(tmp_path: Path) -> None:
    _engine_or_skip()
    async with ContainerCodeExecutor(timeout=20, pids_limit=16, memory="64m") as ex:
        forks = await ex.run(
            "import os\nn = 0\ntry:\n    while n < 200:\n        if os.fork() == 0:\n"
            "            import time; time.sleep(5); os._exit(0)\n        n += 1\n"
            "except OSError as exc:\n    print('stopped at', n, type(exc).__name__)\n"
        )
        assert forks.stdout.startswith("stopped at"), forks
        assert int(forks.stdout.split()[2]) < 16
        hog = await ex.run("x = bytearray(512 * 1024 * 1024)\nprint('allocated')")
        assert not hog.ok and "allocated" not in hog.stdout


async def test_as_a_python_tool_and_closed(executor: ContainerCodeExecutor) -> None:
    tool = python_tool(executor)
    assert "exit code 0" in str(await tool.invoke({"code": "print('from a tool')"}))
    executor.close()
    with pytest.raises(CodeExecutionError, match="closed"):
        await executor.run("print(1)")


def test_bad_settings_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="timeout"):
        ContainerCodeExecutor(timeout=0)
    with pytest.raises(ConfigurationError, match="not a directory"):
        ContainerCodeExecutor(work_dir=tmp_path / "missing")
    with pytest.raises(ConfigurationError, match="not an interpreter"):
        ContainerCodeExecutor(python=str(tmp_path))


async def test_an_unreachable_engine_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("docker")
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'no.sock'}")
    async with ContainerCodeExecutor(timeout=5) as ex:
        with pytest.raises(CodeExecutionError, match="no container engine answers"):
            await ex.run("print(1)")
    await asyncio.sleep(0)
