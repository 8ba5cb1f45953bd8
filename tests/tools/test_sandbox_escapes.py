"""Ways out of an in-interpreter guard, and a setuid file left for the host, run for real:
each snippet is first run in a plain ``python -I`` (where it does get out: reads the secret,
writes outside, starts a process, connects, reads the parent's environment, loads native
code, leaves a setuid program), then through `LocalCodeExecutor`, where none of that
happens. Then the bounds: a runaway loop, a fork bomb, a thread bomb, a memory bomb and a
huge file end within their limits and leave no process behind; a machine that cannot
confine refuses to run code; private scratch directories go when their process ends."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from cantata.tools import CodeResult, LocalCodeExecutor

SECRET = "TOPSECRET-42"
TOKEN = "serve-token-5f1e0c"
SRC = str(Path(__file__).resolve().parents[2] / "src")


class Listener:
    """A TCP listener on 127.0.0.1 that records every connection made to it."""

    def __init__(self) -> None:
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(8)
        self._sock.settimeout(0.2)
        self.port = self._sock.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                continue
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._sock.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    server = Listener()
    yield server
    server.close()


@dataclass
class Room:
    """An outside directory with a secret in it, and a scratch directory for the code."""

    outside: Path
    scratch: Path
    port: int
    fields: dict[str, str] = field(default_factory=dict)

    @classmethod
    def make(cls, base: Path, port: int) -> Room:
        outside, scratch = base / "outside", base / "scratch"
        outside.mkdir(parents=True)
        scratch.mkdir()
        (outside / "secret.txt").write_text(SECRET + "\n")  # a line: readline reads lines
        import sqlite3

        with contextlib.closing(sqlite3.connect(outside / "secret.db")) as db:
            db.execute("create table t (v text)")
            db.execute("insert into t values (?)", (SECRET,))
            db.commit()
        spec = importlib.util.find_spec("_bisect")
        assert spec is not None and spec.origin is not None
        bisect_so = Path(spec.origin)  # an extension module of the interpreter's own
        (outside / "_bisect.so").write_bytes(bisect_so.read_bytes())
        room = cls(outside, scratch, port)
        room.fields = {
            "secret": str(outside / "secret.txt"),
            "db": str(outside / "secret.db"),
            "ext": str(outside / "_bisect.so"),
            "lib_ext": str(bisect_so),
            "out": str(outside / "out"),
            "room": str(outside),
            "marker": str(scratch / "marker"),
            "port": str(port),
            "python": os.path.realpath(sys.executable),
        }
        return room

    def effects(self, result: CodeResult, listener: Listener, before: int) -> set[str]:
        """What the code managed to do outside its room."""
        found = set()
        output = result.stdout + result.stderr
        if SECRET in output:
            found.add("read a secret")
        if (
            sorted(p.name for p in self.outside.iterdir())
            != sorted(["secret.txt", "secret.db", "_bisect.so"])
            or (self.outside / "secret.txt").read_text() != SECRET + "\n"
        ):
            found.add("changed the outside")
        if "'proc'" in result.stdout or "secret.txt'" in result.stdout:
            found.add("listed the outside")
        if any(p.name.startswith("marker") for p in self.scratch.iterdir()):
            found.add("started a process")
        if listener.accepted > before:
            found.add("connected")
        if TOKEN in output:
            found.add("read the parent's environment")
        if "stable release version" in result.stdout:  # the loader's --version ran
            found.add("started a process")
        if any(p.lstat().st_mode & 0o6000 for p in self.scratch.rglob("*")):
            found.add("left a setuid file")  # a setuid-root program, when root runs the code
        if "loaded native code" in result.stdout:
            found.add("loaded native code")
        return found


def _plain(code: str, scratch: Path) -> CodeResult:
    """`code` run in a plain interpreter: what the escape does where nothing stops it."""
    script = scratch / "plain_snippet.py"
    script.write_text(code)
    done = subprocess.run(
        [sys.executable, "-I", str(script)],
        cwd=scratch,
        capture_output=True,
        text=True,
        timeout=30,
        env={"PATH": os.defpath, "HOME": str(scratch)},
    )
    script.unlink()
    return CodeResult(done.returncode, done.stdout, done.stderr)


ESCAPES: dict[str, tuple[str, set[str]]] = {
    "patched isinstance": (
        """
        import builtins
        builtins.isinstance = lambda obj, kind: False
        open({out!r}, "w").write("x")
        print(open({secret!r}).read())
        """,
        {"read a secret", "changed the outside"},
    ),
    "guard edited through gc": (
        """
        import gc, types
        for f in gc.get_objects():
            if isinstance(f, types.FunctionType) and "_guard" in f.__globals__:
                f.__globals__["_guard"] = lambda *a: None
        print(open({secret!r}).read())
        """,
        {"read a secret"},
    ),
    "str subclass": (
        """
        class S(str):
            def startswith(self, *a): return True
            def split(self, *a): return ["tmp"]
        print(open(S({secret!r})).read())
        """,
        {"read a secret"},
    ),
    "dir_fd after a deep chdir": (
        """
        import os
        for _ in range(30):
            os.makedirs("d", exist_ok=True); os.chdir("d")
        root = os.open("/", os.O_RDONLY)
        print(sorted(os.listdir(root)))
        fd = os.open({secret!r}.lstrip("/"), os.O_RDONLY, dir_fd=root)
        print(os.read(fd, 100))
        os.close(os.open({out!r}.lstrip("/"), os.O_WRONLY | os.O_CREAT, dir_fd=root))
        """,
        {"read a secret", "changed the outside", "listed the outside"},
    ),
    "_posixsubprocess.fork_exec": (
        """
        import _posixsubprocess, os
        prog = ("import socket; open({marker!r}, 'w');"
                "socket.create_connection(('127.0.0.1', {port}), timeout=2)")
        errpipe = os.pipe()
        pid = _posixsubprocess.fork_exec(
            [{python!r}, "-I", "-c", prog], [os.fsencode({python!r})], True, (), None, None,
            -1, -1, -1, -1, -1, -1, *errpipe, False, False, -1, None, None, None, -1, None,
            False)
        os.waitpid(pid, 0)
        """,
        {"started a process", "connected"},
    ),
    "multiprocessing spawn": (
        """
        import multiprocessing, os
        if __name__ == "__main__":
            p = multiprocessing.get_context("spawn").Process(
                target=os.mkdir, args=({marker!r} + "-mp",))
            p.start(); p.join()
        """,
        {"started a process"},
    ),
    "sqlite3 on an outside path": (
        """
        import sqlite3
        sqlite3.connect({out!r}).execute("create table x (y)")
        print(sqlite3.connect({db!r}).execute("select v from t").fetchall())
        """,
        {"read a secret", "changed the outside"},
    ),
    "readline history file": (
        """
        import readline
        readline.read_history_file({secret!r})
        n = readline.get_current_history_length()
        print([readline.get_history_item(i) for i in range(n + 1)])
        """,
        {"read a secret"},
    ),
    "ctypes function pointers": (
        """
        import ctypes
        libc = ctypes.CDLL(None)
        addr = ctypes.cast(libc.open, ctypes.c_void_p).value
        c_open = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_int)(addr)
        buf = ctypes.create_string_buffer(100)
        fd = c_open({secret!r}.encode(), 0, 0)
        libc.read(fd, buf, 100)
        print(buf.value, flush=True)
        c_open({out!r}.encode(), 0o101, 0o644)
        # and a raw execve of the loader, which would print its version
        libc.syscall(59, b"/lib64/ld-linux-x86-64.so.2",
                     (ctypes.c_char_p * 3)(b"ld.so", b"--version", None), None)
        """,
        {"read a secret", "changed the outside", "started a process"},
    ),
    "a setuid file for the host": (
        """
        import os, shutil
        shutil.copy({lib_ext!r}, "prog")
        for make in (lambda: os.chmod("prog", 0o4755),
                     lambda: os.close(os.open("made", os.O_CREAT | os.O_WRONLY, 0o6755))):
            try:
                make()
            except OSError as exc:
                print(exc)
        """,
        {"left a setuid file"},
    ),
    "C extension loaded by path": (
        """
        import importlib.machinery, importlib.util, shutil
        shutil.copy({lib_ext!r}, "_bisect.so")  # native code the code wrote itself
        for path in ({ext!r}, "_bisect.so"):
            try:
                loader = importlib.machinery.ExtensionFileLoader("_bisect", path)
                spec = importlib.util.spec_from_file_location("_bisect", path, loader=loader)
                importlib.util.module_from_spec(spec)
                print("loaded native code from", path)
            except Exception as exc:
                print(type(exc).__name__, exc)
        """,
        {"loaded native code"},
    ),
}


@pytest.mark.parametrize("name", sorted(ESCAPES))
async def test_an_escape_from_the_old_guard_gets_nowhere(
    name: str, tmp_path: Path, listener: Listener
) -> None:
    template, expected = ESCAPES[name]
    plain_room = Room.make(tmp_path / "plain", listener.port)
    before = listener.accepted
    plain = _plain(textwrap.dedent(template).format(**plain_room.fields), plain_room.scratch)
    _wait_for(lambda: listener.accepted > before or "connected" not in expected)
    # the snippet does get out where nothing stops it (else this test could not fail)
    assert expected <= plain_room.effects(plain, listener, before), plain.as_text()

    room = Room.make(tmp_path / "sandboxed", listener.port)
    before = listener.accepted
    async with LocalCodeExecutor(timeout=20, work_dir=room.scratch) as executor:
        result = await executor.run(textwrap.dedent(template).format(**room.fields))
    await asyncio.sleep(0.1)  # time for the listener to see a connection, if one came
    assert room.effects(result, listener, before) == set(), result.as_text()


_HOST = """
import asyncio, json, os, subprocess, sys
from cantata.tools import LocalCodeExecutor
code, scratch, mode = sys.argv[1:4]
code = code.format(host_pid=os.getpid())
if mode == "plain":
    done = subprocess.run([sys.executable, "-I", "-c", code], cwd=scratch,
                          capture_output=True, text=True, timeout=30, env={"PATH": os.defpath})
    print(json.dumps([done.returncode, done.stdout, done.stderr]))
else:
    async def main():
        async with LocalCodeExecutor(timeout=20, work_dir=scratch) as ex:
            r = await ex.run(code)
        print(json.dumps([r.exit_code, r.stdout, r.stderr]))
    asyncio.run(main())
"""

_ENVIRON = """
import os
host = {host_pid}
for route in ("direct", "dir_fd", "self"):
    try:
        if route == "direct":
            data = open(f"/proc/{{host}}/environ", "rb").read()
        elif route == "dir_fd":
            root = os.open("/", os.O_RDONLY)
            fd = os.open(f"proc/{{host}}/environ", os.O_RDONLY, dir_fd=root)
            data = os.read(fd, 65536)
        else:
            data = open(f"/proc/{{os.getppid()}}/environ", "rb").read()
        print(route, data)
    except OSError as exc:
        print(route, type(exc).__name__, exc)
print(dict(os.environ))
"""


@pytest.mark.parametrize("mode", ["plain", "sandboxed"])
def test_the_server_s_token_and_keys_stay_unread(mode: str, tmp_path: Path) -> None:
    """A server process holding ``CANTATA_SERVE_TOKEN`` and a model key in its environment
    runs the snippet: plainly, its ``/proc/<pid>/environ`` gives them away; sandboxed, no
    route (the environment, ``/proc`` directly or through ``dir_fd``) reaches them."""
    env = {
        "PATH": os.defpath,
        "PYTHONPATH": SRC,
        "CANTATA_SERVE_TOKEN": TOKEN,
        "OPENAI_API_KEY": TOKEN,
    }
    probe = subprocess.run(
        [sys.executable, "-c", _HOST, _ENVIRON, str(tmp_path), mode],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    _, stdout, stderr = json.loads(probe.stdout)
    if mode == "plain":
        assert TOKEN in stdout, stdout + stderr
        return
    assert TOKEN not in stdout + stderr, stdout + stderr
    assert "direct FileNotFoundError" in stdout and "dir_fd FileNotFoundError" in stdout


def _wait_for(condition: object, bound: float = 3.0) -> bool:
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        if callable(condition) and condition():
            return True
        time.sleep(0.05)
    return False


def _processes_running_in(scratch: Path) -> list[int]:
    """Processes whose command line names `scratch` (every sandbox process's does)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if str(scratch).encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
    return found


BOMBS = {
    "a busy loop": ("while True:\n    pass", {}),
    "a fork bomb": ("import os\nwhile True:\n    os.fork()", {}),
    "a thread bomb": (
        "import threading, time\nthreading.stack_size(32768)\nn = 0\n"
        "try:\n    while True:\n"
        "        threading.Thread(target=time.sleep, args=(60,), daemon=True).start(); n += 1\n"
        "finally:\n    print(n, flush=True)",
        {},
    ),
    "a memory bomb": ("x = []\nwhile True:\n    x.append(bytearray(10**7))", {"memory": "256m"}),
    "one huge allocation": ("b = bytearray(2 << 30)", {"memory": "256m"}),
    "a huge file": ("open('big', 'wb').write(b'x' * (5 << 20))", {"file_size": "1m"}),
}


@pytest.mark.parametrize("name", sorted(BOMBS))
async def test_a_bomb_ends_within_its_limits_and_leaves_nothing(name: str, tmp_path: Path) -> None:
    code, settings = BOMBS[name]
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    async with LocalCodeExecutor(timeout=2, work_dir=scratch, **settings) as executor:
        started = time.monotonic()
        result = await executor.run(code)
        took = time.monotonic() - started
    assert not result.ok
    assert took < 4.0, (took, result.as_text())
    assert _wait_for(lambda: not _processes_running_in(scratch)), _processes_running_in(scratch)
    if name == "a busy loop" or name == "a thread bomb":
        assert result.timed_out or "can't start new thread" in result.stderr, result.as_text()
    if name == "a fork bomb":
        assert "PermissionError" in result.stderr and took < 1.5
    if name in ("a memory bomb", "one huge allocation"):
        assert "MemoryError" in result.stderr and not result.timed_out
    if name == "a huge file":
        assert "File too large" in result.stderr
        assert (scratch / "big").stat().st_size <= 1 << 20
    if name == "a thread bomb" and result.stdout:
        assert int(result.stdout.split()[0]) < 5000, result.stdout  # bounded by the memory


async def test_the_limits_are_set_in_the_code_s_process(tmp_path: Path) -> None:
    code = (
        "import resource as r\n"
        "for n in ('AS', 'CPU', 'FSIZE', 'NOFILE', 'CORE'):\n"
        "    print(n, *r.getrlimit(getattr(r, 'RLIMIT_' + n)))"
    )
    async with LocalCodeExecutor(work_dir=tmp_path, memory="300m", file_size="2m") as ex:
        result = await ex.run(code, time_limit=3.5)
    assert result.stdout.splitlines() == [
        f"AS {300 << 20} {300 << 20}",
        "CPU 5 5",
        f"FSIZE {2 << 20} {2 << 20}",
        "NOFILE 256 256",
        "CORE 0 0",
    ]


_SERVER = """
import asyncio, os, sys
from cantata.tools import LocalCodeExecutor
ex = LocalCodeExecutor()
asyncio.run(ex.run("open('f', 'w').write('1')"))
print(ex.work_dir, flush=True)
sys.stdin.read()
"""


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_a_private_scratch_directory_goes_when_its_process_is_stopped(how: str) -> None:
    """SIGTERM removes it at once; after SIGKILL, the next process to make one removes it."""
    env = {"PATH": os.defpath, "PYTHONPATH": SRC}
    server = subprocess.Popen(
        [sys.executable, "-c", _SERVER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert server.stdout is not None
    scratch = Path(server.stdout.readline().strip())
    assert (scratch / "f").read_text() == "1"
    server.send_signal(getattr(signal, how))
    server.wait(10)
    if how == "SIGTERM":
        assert server.returncode == -signal.SIGTERM
        assert not scratch.exists()
        return
    assert scratch.exists()
    LocalCodeExecutor().close()
    assert not scratch.exists()


_NO_UNSHARE = """
import asyncio, sys
from cantata.tools import LocalCodeExecutor, SandboxUnavailableError
from cantata.tools._sandbox_child import install_seccomp
install_seccomp(("unshare",), threads_only=False)  # as on a host without user namespaces
async def main():
    async with LocalCodeExecutor() as ex:
        try:
            await ex.run("open('ran', 'w')")
        except SandboxUnavailableError as exc:
            print("refused:", exc)
        print("ran" if (ex.work_dir / "ran").exists() else "nothing ran")
asyncio.run(main())
"""


def test_a_machine_that_cannot_confine_runs_no_code() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _NO_UNSHARE],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": os.defpath, "PYTHONPATH": SRC},
    )
    assert done.returncode == 0, done.stderr
    assert "refused: LocalCodeExecutor cannot confine code" in done.stdout
    assert "unshare" in done.stdout and "Operation not permitted" in done.stdout
    assert done.stdout.strip().endswith("nothing ran")


def test_cantata_serve_stopped_by_sigterm_leaves_no_scratch_directory() -> None:
    """uvicorn drains, then re-raises SIGTERM with the handler it found: the coder's private
    scratch directory goes before the process ends."""
    root = Path(__file__).resolve().parents[2]
    command = ["serve", "tests/serve/_coder.py:coder", "-p", "0", "--allow-remote-code-execution"]
    server = subprocess.Popen(
        [sys.executable, "-m", "cantata.cli", *command],
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={"PATH": os.defpath, "PYTHONPATH": SRC, "HOME": str(root)},
    )
    watchdog = threading.Timer(60, server.kill)  # a server that never starts ends the wait
    watchdog.start()
    try:
        assert server.stderr is not None
        for line in server.stderr:
            if "Application startup complete" in line:
                break
        scratch = list(Path(tempfile.gettempdir()).glob(f"cantata-code-{server.pid}-*"))
        assert len(scratch) == 1, scratch
        server.send_signal(signal.SIGTERM)
        server.wait(30)
    finally:
        watchdog.cancel()
        if server.poll() is None:
            server.kill()
            server.wait(10)
    assert not scratch[0].exists()


_FORKS = """
import os, signal, sys, time
from cantata.tools import LocalCodeExecutor
executor = LocalCodeExecutor()
scratch = executor.work_dir
for how in ("exit", "sigterm"):
    pid = os.fork()
    if pid == 0:  # an inherited executor closed, then the child ends by exit or by SIGTERM
        executor.close()
        if how == "sigterm":
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
        sys.exit(0)  # through atexit
    _, status = os.waitpid(pid, 0)
    print(how, status, scratch.is_dir())
del executor
print("dropped", scratch.exists())
"""


def test_a_forked_child_leaves_its_parent_s_scratch_directory_alone() -> None:
    """A child forked by a server (a worker) that ends, or is stopped by SIGTERM, does not
    remove the directories its parent made; a dropped executor's directory goes with it."""
    done = subprocess.run(
        [sys.executable, "-c", _FORKS],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": os.defpath, "PYTHONPATH": SRC},
    )
    assert done.stdout.splitlines() == [
        "exit 0 True",
        f"sigterm {signal.SIGTERM} True",
        "dropped False",
    ], done.stdout + done.stderr
