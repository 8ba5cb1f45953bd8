"""`LocalCodeExecutor`: run model-written Python in a child process, with a timeout, a
scratch directory it may not leave, and no network.

No container: the child is ``python -I`` (isolated mode: no user site, no ``PYTHON*``
environment variables, no script directory on ``sys.path``) started in the scratch
directory with an environment of its own (no proxies, ``HOME`` and ``TMPDIR`` in the
scratch directory) and an audit hook installed before the code runs.

What is guaranteed, for code that only uses Python (the standard library and pure-Python
packages):

- files: the code opens, lists, creates, changes, moves, links and removes files only in
  its scratch directory, and reads the Python library (the directories on the child's
  ``sys.path``); anything else is refused with `PermissionError` (its message says why, in
  the code's output). Every path is resolved first (``..`` and symbolic links, by a
  resolver bound before the code runs, so rebinding ``os.path`` changes nothing), whether it
  comes through ``open``, ``io``, ``os``, ``pathlib``, ``shutil`` or ``glob``;
- no socket is created: the audit events ``socket.__new__``, ``socket.connect``,
  ``socket.bind``, ``socket.getaddrinfo``, ``socket.gethostbyname`` ... raise
  `PermissionError`, so ``urllib``, ``http.client`` and ``asyncio`` (whose event loop
  needs a socket pair) all fail;
- no other program is started (``subprocess``, ``os.system``, ``os.exec*``,
  ``os.posix_spawn``, ``os.fork``, ``pty.spawn`` are refused) and no native library is
  loaded through ``ctypes`` (``ctypes.dlopen``; importing ``ctypes`` itself fails), since
  either would run code the hook does not see; audit hooks cannot be removed from Python,
  and the hook's own functions refuse a new ``__code__`` or new defaults;
- the run ends within ``timeout`` seconds: the child gets its own process group, and the
  whole group is killed at the deadline;
- at most ``max_output`` characters of stdout and of stderr are kept (the rest is read and
  dropped, so a chatty program can neither block nor exhaust memory).

What is not guaranteed: this guards the machine against model-written code that strays, not
against code written to break out. A compiled extension module already installed that calls
the C library itself bypasses audit hooks; ``os.stat`` and ``os.path.exists`` are not
audited, so the code can learn whether a path outside exists (not read it); a symbolic link
swapped between the check and the open (by code racing itself in two threads) is not
caught; files already open when the code starts (its stdout and stderr) stay usable; the
library directories include whatever the interpreter's ``.pth`` files add; memory and CPU
are bounded only by the timeout. For hostile code use a container or a VM.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, Self

from ..core import ConfigurationError, RunError, new_id
from .tool import FunctionTool

__all__ = [
    "MAX_CODE_CHARS",
    "CodeExecutionError",
    "CodeResult",
    "CodeRunner",
    "LocalCodeExecutor",
    "extract_code",
    "python_tool",
]

_BLOCKED_EVENTS = (
    "socket.__new__",
    "socket.bind",
    "socket.connect",
    "socket.getaddrinfo",
    "socket.gethostbyname",
    "socket.gethostbyaddr",
    "socket.sendto",
    "subprocess.Popen",
    "os.system",
    "os.exec",
    "os.posix_spawn",
    "os.spawn",
    "os.fork",
    "os.forkpty",
    "pty.spawn",
    "ctypes.dlopen",
    "ctypes.dlsym",
    "ctypes.cdata",
)

# Runs in the child before the user's code: install the hook, then run the file as
# __main__. Everything the hook uses is bound now, as default arguments (C functions of the
# posix module, frozensets, strings), so user code that rebinds a module attribute
# (``os.path.realpath``, ``posixpath.os``) changes nothing the hook sees; the path resolver is
# written here for the same reason, rather than borrowed from ``posixpath``.
_BOOTSTRAP = r"""
import sys, posix
from stat import S_ISLNK
sys.dont_write_bytecode = True
_scratch = posix.getcwd()
def _resolve(path, _getcwd=posix.getcwd, _lstat=posix.lstat, _readlink=posix.readlink,
             _fspath=posix.fspath, _islink=S_ISLNK):
    if isinstance(path, int):
        return None
    path = _fspath(path)
    if isinstance(path, bytes):
        path = path.decode("utf-8", "surrogateescape")
    if not path.startswith("/"):
        path = _getcwd() + "/" + path
    parts = [p for p in path.split("/") if p not in ("", ".")]
    done = []
    hops = 0
    while parts:
        part = parts.pop(0)
        if part == "..":
            if done:
                done.pop()
            continue
        current = "/" + "/".join(done + [part])
        try:
            is_link = _islink(_lstat(current).st_mode)
        except OSError:
            is_link = False
        if not is_link:
            done.append(part)
            continue
        hops += 1
        if hops > 40:
            return current
        target = _readlink(current)
        if target.startswith("/"):
            done = []
        parts[:0] = [p for p in target.split("/") if p not in ("", ".")]
    return "/" + "/".join(done)
def _under(path, roots):
    for root in roots:
        if path == root or path.startswith(root if root.endswith("/") else root + "/"):
            return True
    return False
_scratch_roots = (_resolve(_scratch),)
_library_roots = tuple(sorted({{_resolve(p) for p in sys.path if p.startswith("/")}}))
def _refuse(event, what):
    raise PermissionError(
        "the code executor refuses " + event + " of " + repr(what) + ": code may use only "
        "the files of its scratch directory " + _scratch + " (and read the Python library)"
    )
def _guard(event, args, _blocked=frozenset({blocked!r}), _paths=frozenset({paths!r}),
           _resolve=_resolve, _under=_under, _scratch=_scratch_roots, _library=_library_roots,
           _refuse=_refuse, _writes=0o1 | 0o2 | 0o100 | 0o1000 | 0o2000,
           _own=frozenset({{"_guard", "_resolve", "_under", "_refuse"}}),
           _two=frozenset({{"os.rename", "os.link", "os.symlink", "shutil.copyfile",
                           "shutil.copymode", "shutil.copystat", "shutil.copytree",
                           "shutil.move"}})):
    if event in _blocked:
        raise PermissionError(
            "the code executor refuses " + event + ": network access, new processes and "
            "native libraries are disabled"
        )
    if event == "open":
        path, mode, flags = args
        target = _resolve(path)
        if target is None or _under(target, _scratch):
            return
        writing = (mode is not None and any(c in mode for c in "wax+")) or (
            mode is None and flags & _writes)
        if writing or not _under(target, _library):
            _refuse("open", path)
        return
    if event == "object.__setattr__" and getattr(args[0], "__name__", "") in _own:
        _refuse("changing the guard", args[1])
    if event in _paths:
        for path in args[:2] if event in _two else args[:1]:
            if path is None or isinstance(path, int):
                continue
            target = _resolve(path)
            if target is None or _under(target, _scratch):
                continue
            if event in ("os.listdir", "os.scandir") and _under(target, _library):
                continue
            _refuse(event, path)
sys.addaudithook(_guard)
del _resolve, _under, _refuse, _guard
_path = sys.argv[1]
sys.argv = sys.argv[1:]
with open(_path, encoding="utf-8") as _f:
    _source = _f.read()
exec(compile(_source, _path, "exec"), {{"__name__": "__main__", "__file__": _path}})
"""

# Audit events that name paths (the first one, or two for copies and moves) which must lie in
# the scratch directory; "open" is checked apart (it may also read the library).
_PATH_EVENTS = (
    "os.chdir",
    "os.chmod",
    "os.chown",
    "os.chflags",
    "os.link",
    "os.listdir",
    "os.mkdir",
    "os.mkfifo",
    "os.mknod",
    "os.remove",
    "os.removexattr",
    "os.rename",
    "os.rmdir",
    "os.scandir",
    "os.setxattr",
    "os.symlink",
    "os.truncate",
    "os.utime",
    "os.listxattr",
    "os.getxattr",
    "shutil.chown",
    "shutil.copyfile",
    "shutil.copymode",
    "shutil.copystat",
    "shutil.copytree",
    "shutil.make_archive",
    "shutil.move",
    "shutil.rmtree",
    "shutil.unpack_archive",
    "glob.glob",
    "glob.glob/2",
)


class CodeExecutionError(RunError):
    """The executor could not run the code at all (not: the code failed; see `CodeResult`)."""


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
    private one it removes on `close`, or the caller's, left alone)."""

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
        self._owned: tempfile.TemporaryDirectory[str] | None = None
        if work_dir is None:
            self._owned = tempfile.TemporaryDirectory(prefix=prefix)
            self._dir = Path(self._owned.name)
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
            self._owned.cleanup()
            self._owned = None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


class LocalCodeExecutor(_ScratchExecutor):
    """Runs Python source in a guarded child process (see the module docstring for what
    the guard does and does not promise).

    ``LocalCodeExecutor(timeout=10)`` makes a private scratch directory, removed by
    `close()` (or ``async with``); ``work_dir=`` uses a directory you own and leaves it.
    Files written by one run are there for the next, as in a notebook.
    """

    def __init__(
        self,
        *,
        timeout: float = 10.0,
        work_dir: str | os.PathLike[str] | None = None,
        max_output: int = 20_000,
        python: str | None = None,
    ) -> None:
        super().__init__(
            "LocalCodeExecutor",
            timeout=timeout,
            max_output=max_output,
            work_dir=work_dir,
            prefix="cantata-code-",
        )
        self.python = python or sys.executable

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
        the executor's timeout); raises `CodeExecutionError` only when it cannot start."""
        if not isinstance(code, str):
            raise ConfigurationError(f"code to run must be a str, got {type(code).__name__}")
        if self._closed:
            raise CodeExecutionError(
                "this LocalCodeExecutor was closed (its scratch directory is gone); make a new one"
            )
        limit = self.timeout if time_limit is None else time_limit
        script = self._dir / f"snippet_{new_id()[:12]}.py"
        script.write_text(code, encoding="utf-8")
        bootstrap = _BOOTSTRAP.format(blocked=tuple(_BLOCKED_EVENTS), paths=_PATH_EVENTS)
        try:
            process = await asyncio.create_subprocess_exec(
                self.python,
                "-I",
                "-c",
                bootstrap,
                str(script),
                cwd=self._dir,
                env=self._environment(),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            raise CodeExecutionError(
                f"could not start {self.python!r} to run code in {str(self._dir)!r}: {exc}"
            ) from exc
        try:
            return await self._collect(process, limit)
        finally:
            script.unlink(missing_ok=True)

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
            # The group is dead or done: pipes reach EOF soon (bounded all the same).
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

    # read by `cantata serve`, which refuses to offer code run on this machine to a network
    # address unless told to (an executor in a container is not that)
    run_python.runs_local_code = isinstance(executor, LocalCodeExecutor)  # type: ignore[attr-defined]

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
