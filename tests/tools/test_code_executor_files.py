"""The code executor keeps model-written code in its scratch directory: every usual way to
read or change a file elsewhere (open, io, os, pathlib, shutil, glob, symbolic links, ``..``,
rebinding the path functions, ctypes, subprocess) reads nothing, lists nothing and changes
nothing outside (the rest of the machine does not exist in the code's mount namespace), while
the scratch directory and the Python library stay usable."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from cantata.tools import LocalCodeExecutor

SECRET = "TOPSECRET-42"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    room = tmp_path / "outside"
    room.mkdir()
    (room / "secret.txt").write_text(SECRET)
    return room


@pytest.fixture
async def executor(tmp_path: Path) -> AsyncIterator[LocalCodeExecutor]:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    async with LocalCodeExecutor(timeout=20, work_dir=scratch) as ex:
        yield ex


ESCAPES = {
    "open": "print(open({secret!r}).read())",
    "open for writing": "open({out!r}, 'w').write('x')",
    "io.open": "import io\nprint(io.open({secret!r}).read())",
    "io.FileIO": "import io\nprint(io.FileIO({secret!r}).read())",
    "os.open": "import os\nfd = os.open({secret!r}, os.O_RDONLY)\nprint(os.read(fd, 100))",
    "os.open for writing": "import os\nos.open({out!r}, os.O_WRONLY | os.O_CREAT)",
    "os.listdir": "import os\nprint(os.listdir({room!r}))",
    "os.scandir": "import os\nprint([e.name for e in os.scandir({room!r})])",
    # os.walk drops errors unless told: the walk is refused, and says so when asked to
    "os.walk": "import os\ndef boom(e):\n    raise e\nprint(list(os.walk({room!r}, onerror=boom)))",
    "os.remove": "import os\nos.remove({secret!r})",
    "os.rename": "import os\nos.rename({secret!r}, 'stolen.txt')",
    "os.mkdir": "import os\nos.mkdir({out!r})",
    "os.chdir": "import os\nos.chdir({room!r})\nprint(open('secret.txt').read())",
    "pathlib read": "import pathlib\nprint(pathlib.Path({secret!r}).read_text())",
    "pathlib write": "import pathlib\npathlib.Path({out!r}).write_text('x')",
    "pathlib iterdir": "import pathlib\nprint(list(pathlib.Path({room!r}).iterdir()))",
    "shutil.copy": "import shutil\nshutil.copy({secret!r}, 'stolen.txt')\n"
    "print(open('stolen.txt').read())",
    "shutil.copyfile out": "open('mine.txt', 'w').write('x')\nimport shutil\n"
    "shutil.copyfile('mine.txt', {out!r})",
    "shutil.rmtree": "import shutil\nshutil.rmtree({room!r})",
    "shutil.move": "import shutil\nshutil.move({secret!r}, 'stolen.txt')",
    "glob": "import glob\nprint(glob.glob({room!r} + '/*'))",
    "dot dot": "import os\nrel = os.path.relpath({secret!r})\nprint(rel)\nprint(open(rel).read())",
    "symlink then open": "import os\nos.symlink({secret!r}, 'link')\nprint(open('link').read())",
    "symlink to a folder": "import os\nos.symlink({room!r}, 'dir')\n"
    "print(open('dir/secret.txt').read())",
    "symlink outside": "import os\nos.symlink('x', {out!r})",
    "rebound realpath": "import os, posixpath\nos.path.realpath = lambda p, **k: os.getcwd()\n"
    "posixpath.realpath = os.path.realpath\nprint(open({secret!r}).read())",
    "changing the hook": "import gc\n"
    "fs = [f for f in gc.get_objects() if getattr(f, '__name__', '') == '_guard']\n"
    "fs[0].__code__ = (lambda e, a: None).__code__\nprint(open({secret!r}).read())",
    "ctypes": "import ctypes\nlibc = ctypes.CDLL(None)\nbuf = ctypes.create_string_buffer(100)\n"
    "fd = libc.open({secret!r}.encode(), 0)\nprint(fd, libc.read(fd, buf, 100), buf.value)\n"
    "print(libc.open({out!r}.encode(), 0o101, 0o644))",
    "subprocess": "import subprocess\nprint(subprocess.run(['cat', {secret!r}]))",
}


def _untouched(room: Path) -> bool:
    return (
        sorted(p.name for p in room.iterdir()) == ["secret.txt"]
        and (room / "secret.txt").read_text() == SECRET
    )


@pytest.mark.parametrize("name", sorted(ESCAPES))
async def test_a_way_out_reads_and_changes_nothing_outside(
    name: str, executor: LocalCodeExecutor, outside: Path
) -> None:
    code = ESCAPES[name].format(
        secret=str(outside / "secret.txt"), out=str(outside / "out"), room=str(outside)
    )
    result = await executor.run(code)
    output = result.stdout + result.stderr
    assert SECRET not in output, result.as_text()
    assert "secret.txt'" not in result.stdout, result.as_text()  # not listed either
    assert _untouched(outside)
    assert not (executor.work_dir / "stolen.txt").exists()


async def test_the_scratch_directory_and_the_library_stay_usable(
    executor: LocalCodeExecutor,
) -> None:
    code = """
import csv, json, os, pathlib, shutil, tempfile
os.mkdir("d")
pathlib.Path("d/a.txt").write_text("hello")
shutil.copy("d/a.txt", "d/b.txt")
os.rename("d/b.txt", "d/c.txt")
os.symlink("d/a.txt", "link")
with tempfile.NamedTemporaryFile("w", delete=False) as f:
    f.write("temp")
print(sorted(os.listdir("d")), open("link").read(), open(f.name).read())
print(len(open(json.__file__).read()) > 0)
shutil.rmtree("d")
"""
    result = await executor.run(code)
    assert result.ok, result.as_text()
    assert result.stdout.split("\n")[:2] == ["['a.txt', 'c.txt'] hello temp", "True"]
    assert not (executor.work_dir / "d").exists()


async def test_the_rest_of_the_machine_does_not_exist_for_the_code(
    executor: LocalCodeExecutor, outside: Path
) -> None:
    result = await executor.run(
        "import os\n"
        f"print(os.path.exists({str(outside)!r}), os.path.exists('/etc/passwd'))\n"
        "print(sorted(os.listdir('/dev')))\n"
        f"open({str(outside / 'secret.txt')!r})"
    )
    assert result.stdout.split("\n")[:2] == [
        "False False",
        "['null', 'random', 'urandom', 'zero']",
    ]
    assert "FileNotFoundError" in result.stderr
