"""`LocalCodeExecutor`: run model-written Python in a child process the kernel confines,
with a timeout, a scratch directory, and no network.

Each snippet runs in a new process (``python -I``, a clean environment: ``HOME`` and
``TMPDIR`` in the scratch directory, no proxies, no keys, nothing of the parent's) that
first puts itself, with Linux namespaces, rlimits and seccomp, where it can harm nothing
(``_sandbox_child.py`` builds it; the standard library only, through ``ctypes``):

- files: its own mount namespace whose root is an empty read-only directory holding,
  read-only, the interpreter's library directories (its ``sys.path``: standard library,
  site-packages) and the system libraries (``/lib``, ``/usr/lib`` ...), ``/dev/null``,
  ``/dev/zero``, ``/dev/random``, ``/dev/urandom``, and the scratch directory, the one
  writable place (no setuid, no devices, nothing mapped executable from it). Nothing else
  of the machine exists for it: no ``/proc``, ``/etc``, ``/home``, no other ``/tmp``;
- network: its own network namespace, with no interface up (not even loopback): a
  connection to anything, the machine's own ``127.0.0.1`` included, fails;
- processes: its own PID namespace (it sees and signals no other process) and a seccomp
  filter that refuses ``execve`` and any new process (``fork``, ``subprocess``,
  ``os.system``, ``multiprocessing``: threads only), and the calls that would change
  mounts, namespaces or the kernel (``mount``, ``unshare``, ``setns``, ``ptrace``,
  ``bpf``, ``io_uring`` ...) and any setuid or setgid mode on a file (the code runs as the
  caller's user: a setuid file left in the scratch directory by code run as root would be a
  setuid-root program on the host); its user namespace maps only the caller's user, and it
  holds no capability;
- resources: its address space (``memory``), every file it writes (``file_size``), its CPU
  seconds (the time limit, rounded up, plus one) and its open files are bounded by rlimits,
  its threads by the address space (each has a stack) and, for a user other than root
  (whom the kernel exempts), by RLIMIT_NPROC; at ``timeout`` seconds the whole process
  group is killed, and with its PID 1 the whole namespace;
- at most ``max_output`` characters of stdout and of stderr are kept (the rest is read and
  dropped, so a chatty program can neither block nor exhaust memory).

Since the confinement is the kernel's, nothing the code does in Python (patching builtins,
``ctypes``, loading a C extension) changes it. Where it cannot be built (not Linux, no user
namespaces, no seccomp), `run` raises `SandboxUnavailableError` naming what is missing, and
runs nothing. What it leaves to you: the scratch directory's disk use (put ``work_dir`` on a
filesystem with a quota if that matters), CPU and memory shares between snippets run at
once, and the kernel itself (a kernel bug is an escape; for code from strangers, a VM).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import re
import signal
import sys
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Protocol, Self

from ..core import ConfigurationError, RunError, new_id
from ._sandbox_scratch import make_private_scratch, remove_private_scratch
from .tool import FunctionTool

__all__ = [
    "MAX_CODE_CHARS",
    "CodeExecutionError",
    "CodeResult",
    "CodeRunner",
    "LocalCodeExecutor",
    "SandboxUnavailableError",
    "extract_code",
    "python_tool",
]


class CodeExecutionError(RunError):
    """The executor could not run the code at all (not: the code failed; see `CodeResult`)."""


class SandboxUnavailableError(CodeExecutionError):
    """This machine cannot confine code the way `LocalCodeExecutor` promises (no user
    namespaces, no seccomp, not Linux ...): the message says what is missing. No code ran."""


@dataclass(slots=True, frozen=True)
class CodeResult:
    """What one run of code produced. A failing program is a result, not an exception."""

    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool = False
    truncated: bool = False

    @property
    def ok(self) -> bool:
        """The program ended on its own with exit code 0."""
        return self.exit_code == 0 and not self.timed_out

    def as_text(self) -> str:
        """A compact report for a model: exit status, then output and errors."""
        parts = ["timed out (killed)" if self.timed_out else f"exit code {self.exit_code}"]
        if self.stdout:
            parts.append(f"stdout:\n{self.stdout.rstrip()}")
        if self.stderr:
            parts.append(f"stderr:\n{self.stderr.rstrip()}")
        if self.truncated:
            parts.append("(output truncated)")
        return "\n".join(parts)


class CodeRunner(Protocol):
    """What runs a model's code: `LocalCodeExecutor`, or `ContainerCodeExecutor` for code
    you do not trust."""

    async def run(self, code: str, *, time_limit: float | None = None) -> CodeResult:
        """Run `code`; a failing program is a `CodeResult`, not an exception."""
        ...


class _ScratchExecutor:
    """What every code executor shares: its checked bounds and a scratch directory (a
    private one it removes on `close`, at exit or on SIGTERM, or the caller's, left alone)."""

    isolated: ClassVar[bool] = False
    """Whether the code runs apart from this machine's user session (a container), so that
    `cantata serve` may offer it to clients without ``--allow-remote-code-execution``.
    `LocalCodeExecutor`'s sandbox confines the code, but on this machine's kernel, CPU and
    disk, with no image between: serving it stays the operator's explicit choice."""

    def __init__(
        self,
        kind: str,
        *,
        timeout: float,
        max_output: int,
        work_dir: str | os.PathLike[str] | None,
        prefix: str,
    ) -> None:
        if not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout <= 0:
            raise ConfigurationError(
                f"{kind} timeout must be a positive number of seconds, got {timeout!r}"
            )
        if not isinstance(max_output, int) or max_output < 1:
            raise ConfigurationError(
                f"{kind} max_output must be a positive int, got {max_output!r}"
            )
        self.timeout = float(timeout)
        self.max_output = max_output
        self._owned: Path | None = None
        if work_dir is None:
            self._owned = self._dir = make_private_scratch(prefix)
            # an executor dropped without `close` gives its directory back when collected
            weakref.finalize(self, remove_private_scratch, self._owned).atexit = False
        else:
            self._dir = Path(work_dir).resolve()
            if not self._dir.is_dir():
                raise ConfigurationError(
                    f"{kind} work_dir {str(self._dir)!r} is not a directory; "
                    "create it first or leave work_dir out for a private scratch directory"
                )
        self._closed = False

    @property
    def work_dir(self) -> Path:
        """The scratch directory the code runs in."""
        return self._dir

    def close(self) -> None:
        """Remove the private scratch directory (a `work_dir` you gave is left alone)."""
        self._closed = True
        if self._owned is not None:
            remove_private_scratch(self._owned)
            self._owned = None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


_CHILD = str(Path(__file__).with_name("_sandbox_child.py"))
"""The program that confines itself, then runs the snippet (see its docstring)."""
_LAUNCH = (
    "import sys; sys.path.insert(0, sys.argv.pop(1)); import _sandbox_child as child; "
    "del sys.path[0]; child.main(sys.argv[1:])"
)
"""Imported rather than run as a script, whose compiled form Python would not cache."""

_SIZE = re.compile(r"(\d+)([kmg]?)b?", re.IGNORECASE)


def _bytes(kind: str, name: str, value: int | str) -> int:
    """A size given as bytes (an int) or as ``"512m"``, ``"1g"``, ``"64k"``."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    found = _SIZE.fullmatch(value.strip()) if isinstance(value, str) else None
    if found is None or int(found.group(1)) == 0:
        raise ConfigurationError(
            f"{kind} {name} must be a positive number of bytes or a size like '512m', got {value!r}"
        )
    return int(found.group(1)) << {"": 0, "k": 10, "m": 20, "g": 30}[found.group(2).lower()]


class LocalCodeExecutor(_ScratchExecutor):
    """Runs Python source in a process the kernel confines (see the module docstring for
    what is isolated from what).

    ``LocalCodeExecutor(timeout=10)`` makes a private scratch directory, removed by
    `close()` (or ``async with``, or when the process ends); ``work_dir=`` uses a directory
    you own and leaves it. Files written by one run are there for the next, as in a
    notebook. `memory` bounds the code's address space and `file_size` any file it writes
    (bytes, or ``"512m"``); `python` is the interpreter to run (default: this one). Where
    the kernel cannot confine the code, `run` raises `SandboxUnavailableError`.
    """

    def __init__(
        self,
        *,
        timeout: float = 10.0,
        work_dir: str | os.PathLike[str] | None = None,
        max_output: int = 20_000,
        python: str | None = None,
        memory: int | str = "1g",
        file_size: int | str = "64m",
    ) -> None:
        super().__init__(
            "LocalCodeExecutor",
            timeout=timeout,
            max_output=max_output,
            work_dir=work_dir,
            prefix="cantata-code-",
        )
        self.python = python or sys.executable
        self.memory = _bytes("LocalCodeExecutor", "memory", memory)
        self.file_size = _bytes("LocalCodeExecutor", "file_size", file_size)

    def _environment(self) -> dict[str, str]:
        scratch = str(self._dir)
        return {
            "HOME": scratch,
            "TMPDIR": scratch,
            "LANG": "C.UTF-8",
            "PYTHONIOENCODING": "utf-8",
            "PATH": os.defpath,
        }

    async def run(self, code: str, *, time_limit: float | None = None) -> CodeResult:
        """Run `code` as a script and wait for it, at most `time_limit` seconds (default:
        the executor's timeout); raises `CodeExecutionError` only when it cannot start
        (`SandboxUnavailableError` when the machine cannot confine it)."""
        if not isinstance(code, str):
            raise ConfigurationError(f"code to run must be a str, got {type(code).__name__}")
        if self._closed:
            raise CodeExecutionError(
                "this LocalCodeExecutor was closed (its scratch directory is gone); make a new one"
            )
        if sys.platform != "linux":
            raise SandboxUnavailableError(
                f"LocalCodeExecutor confines code with Linux namespaces and seccomp; this is "
                f"{sys.platform}: use ContainerCodeExecutor"
            )
        limit = self.timeout if time_limit is None else time_limit
        if not isinstance(limit, int | float) or isinstance(limit, bool) or not limit > 0:
            raise ConfigurationError(f"time_limit must be a positive number, got {limit!r}")
        script = self._dir / f"snippet_{new_id()[:12]}.py"
        script.write_text(code, encoding="utf-8")
        report, report_w = os.pipe()
        config = {
            "report_fd": report_w,
            "scratch": str(self._dir),
            "script": str(script),
            "memory_bytes": self.memory,
            "file_bytes": self.file_size,
            "cpu_seconds": math.ceil(limit) + 1,
            "open_files": _OPEN_FILES,
            "processes": _PROCESSES,
        }
        try:
            try:
                process = await asyncio.create_subprocess_exec(
                    self.python,
                    "-I",
                    "-c",
                    _LAUNCH,
                    os.path.dirname(_CHILD),
                    *(f"{key}={value}" for key, value in config.items()),
                    cwd=self._dir,
                    env=self._environment(),
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                    start_new_session=True,
                    pass_fds=(report_w,),
                )
            except OSError as exc:
                raise CodeExecutionError(
                    f"could not start {self.python!r} to run code in {str(self._dir)!r}: {exc}"
                ) from exc
            finally:
                os.close(report_w)
            result = await self._collect(process, limit)
            said = _read_report(report)
        finally:
            os.close(report)
            script.unlink(missing_ok=True)
        if said.startswith("missing:"):
            raise SandboxUnavailableError(
                "LocalCodeExecutor cannot confine code on this machine, so it runs none; "
                f"{said} (run as root or enable user namespaces; or use ContainerCodeExecutor)"
            )
        if said != "ok" and not result.timed_out:
            raise CodeExecutionError(
                f"the sandbox ended before the code ran (exit code {result.exit_code}): "
                f"{result.stderr.strip()[-500:]}"
            )
        return result

    async def _collect(self, process: asyncio.subprocess.Process, limit: float) -> CodeResult:
        assert process.stdout is not None and process.stderr is not None  # PIPE above
        out = _Capped(self.max_output)
        err = _Capped(self.max_output)
        readers = asyncio.gather(out.drain(process.stdout), err.drain(process.stderr))
        timed_out = False
        try:
            await asyncio.wait_for(asyncio.shield(process.wait()), limit)
        except TimeoutError:
            timed_out = True
            _kill_group(process)
        except BaseException:
            _kill_group(process)
            raise
        finally:
            # The group is dead or done (and with its PID 1 the whole PID namespace): the
            # pipes reach EOF soon (bounded all the same).
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(process.wait(), 5.0)
            try:
                await asyncio.wait_for(readers, 5.0)
            except TimeoutError:
                readers.cancel()
        return CodeResult(
            exit_code=process.returncode if process.returncode is not None else -9,
            stdout=out.text(),
            stderr=err.text(),
            timed_out=timed_out,
            truncated=out.truncated or err.truncated,
        )


_OPEN_FILES = 256
"""RLIMIT_NOFILE of the code's process."""
_PROCESSES = 64
"""RLIMIT_NPROC of the code's process (its threads count; new processes are refused anyway)."""


def _read_report(fd: int) -> str:
    """What the sandbox said on its report pipe: ``ok`` once the code was about to run, or
    ``missing: ...`` (every writer is gone by now, so this does not wait)."""
    os.set_blocking(fd, False)
    data = b""
    with contextlib.suppress(BlockingIOError):
        while (chunk := os.read(fd, 4096)) and len(data) < 65536:
            data += chunk
    return data.decode("utf-8", errors="replace").strip()


class _Capped:
    """Reads a pipe to its end, keeping only the first `limit` characters."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._chunks: list[bytes] = []
        self._size = 0
        self.truncated = False

    async def drain(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(65536):
            room = self._limit * 4 - self._size  # utf-8: up to 4 bytes a character
            if room > 0:
                self._chunks.append(chunk[:room])
                self._size += min(len(chunk), room)
            if len(chunk) > room:
                self.truncated = True

    def text(self) -> str:
        decoded = b"".join(self._chunks).decode("utf-8", errors="replace")
        if len(decoded) > self._limit:
            self.truncated = True
            decoded = decoded[: self._limit]
        return decoded


def _kill_group(process: asyncio.subprocess.Process) -> None:
    if process.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


# -- code in text, code as a tool -----------------------------------------------------

_FENCE = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL)


def extract_code(text: str) -> list[str]:
    """The fenced code blocks of a text (```python ... ```), in order."""
    return [block.strip("\n") for block in _FENCE.findall(text) if block.strip()]


MAX_CODE_CHARS = 4000
"""The longest script `python_tool` tells the model it may send (a JSON-schema maxLength,
which the embedded model's grammar enforces, so a runaway string still closes)."""


def python_tool(
    executor: CodeRunner, *, name: str = "run_python", max_code_chars: int = MAX_CODE_CHARS
) -> FunctionTool:
    """A tool that runs Python source in `executor` and returns exit code and output."""
    if type(max_code_chars) is not int or max_code_chars < 1:
        raise ConfigurationError(f"max_code_chars must be a positive int, got {max_code_chars!r}")

    async def run_python(code: str) -> str:
        return (await executor.run(code)).as_text()

    # read by `cantata serve`, which refuses to offer code run on this machine unless told
    # to (an executor that the kernel confines, in a container, is not that)
    run_python.runs_local_code = not getattr(executor, "isolated", False)  # type: ignore[attr-defined]

    return FunctionTool(
        name,
        "Run a Python script (no network) and get its exit code, stdout and stderr. "
        "Print what you want to see.",
        func=run_python,
        parameters={
            "type": "object",
            "properties": {
                "code": {
                    "type": "string",
                    "maxLength": max_code_chars,
                    "description": "the Python source to run",
                }
            },
            "required": ["code"],
        },
    )
