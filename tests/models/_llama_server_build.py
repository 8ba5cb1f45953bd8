"""Build llama.cpp's own ``llama-server`` once per machine from the llama.cpp source that the
installed ``llama-cpp-python`` sdist vendors, and cache the binary under
``~/.cache/cantata/llama-server/<version>/``.

It serves ``/v1/messages`` (Anthropic Messages) beside ``/v1/chat/completions``, which the
Python ``llama_cpp.server`` does not, so the Anthropic client is tested against a real server.
The build is bounded (``BUILD_TIMEOUT``), idempotent (a finished binary is reused) and takes a
file lock so two xdist workers never build at once. Run it by hand to warm the cache::

    python tests/models/_llama_server_build.py
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from importlib import metadata
from pathlib import Path

BUILD_TIMEOUT = 75 * 60.0
DOWNLOAD_TIMEOUT = 10 * 60.0
_CMAKE_OPTIONS = [
    "-DCMAKE_BUILD_TYPE=Release",
    "-DGGML_NATIVE=OFF",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_TOOLS=ON",
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_CURL=OFF",
]


class BuildError(RuntimeError):
    """llama-server could not be built here (no compiler, no sdist, or the build failed)."""


def installed_version() -> str:
    """The llama-cpp-python version installed beside cantata: its sdist is what gets built."""
    try:
        return metadata.version("llama-cpp-python")
    except metadata.PackageNotFoundError as exc:
        raise BuildError("llama-cpp-python is not installed") from exc


def cache_dir(version: str) -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "cantata" / "llama-server" / version


def binary_path(version: str | None = None) -> Path:
    return cache_dir(version or installed_version()) / "bin" / "llama-server"


def ensure_llama_server(version: str | None = None, *, log: Path | None = None) -> Path:
    """The cached ``llama-server`` binary, built first if this machine has none yet."""
    version = version or installed_version()
    target = binary_path(version)
    if target.exists():
        return target
    for program in ("cmake", "c++", "cc"):
        if shutil.which(program) is None:
            raise BuildError(f"{program} is not on PATH")
    root = cache_dir(version)
    root.mkdir(parents=True, exist_ok=True)
    with (root / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another worker may be building: wait for it
        if target.exists():
            return target
        started = time.monotonic()
        _build(version, root, target, log or root / "build.log")
        (root / "build-seconds").write_text(f"{time.monotonic() - started:.0f}\n")
    return target


def _build(version: str, root: Path, target: Path, log: Path) -> None:
    source = _unpacked_sdist(version, root)
    build = root / "build"
    deadline = time.monotonic() + BUILD_TIMEOUT
    with log.open("w") as out:
        for cmd in (
            ["cmake", "-S", str(source), "-B", str(build), *_CMAKE_OPTIONS],
            ["cmake", "--build", str(build), "--target", "llama-server", "-j2"],
        ):
            out.write("$ " + " ".join(cmd) + "\n")
            out.flush()
            left = deadline - time.monotonic()
            try:
                done = subprocess.run(
                    cmd, stdout=out, stderr=subprocess.STDOUT, timeout=max(left, 1.0)
                )
            except subprocess.TimeoutExpired as exc:
                raise BuildError(
                    f"llama-server build passed {BUILD_TIMEOUT:.0f} s; see {log}"
                ) from exc
            if done.returncode != 0:
                raise BuildError(f"{cmd[0:2]} failed ({done.returncode}); see {log}")
    built = next((p for p in build.rglob("llama-server") if p.is_file()), None)
    if built is None:
        raise BuildError(f"the build made no llama-server binary; see {log}")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    shutil.copy2(built, partial)
    partial.rename(target)  # atomic: a reader sees no binary or the whole one
    shutil.rmtree(build, ignore_errors=True)


def _unpacked_sdist(version: str, root: Path) -> Path:
    source = root / "src" / "vendor" / "llama.cpp"
    if (source / "CMakeLists.txt").exists():
        return source
    with tempfile.TemporaryDirectory(dir=root) as tmp:
        cmd = [
            sys.executable, "-m", "pip", "download", "-q", "--no-deps",
            "--no-binary", "llama-cpp-python", "--dest", tmp, f"llama-cpp-python=={version}",
        ]  # fmt: skip
        try:
            subprocess.run(cmd, check=True, timeout=DOWNLOAD_TIMEOUT, capture_output=True)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            raise BuildError(f"could not download the llama-cpp-python {version} sdist") from exc
        archive = next(Path(tmp).glob("*.tar.gz"))
        unpack = Path(tmp) / "unpacked"
        with tarfile.open(archive) as tar:
            tar.extractall(unpack, filter="data")
        (top,) = unpack.iterdir()
        shutil.rmtree(root / "src", ignore_errors=True)
        top.rename(root / "src")
    return source


if __name__ == "__main__":
    begun = time.monotonic()
    path = ensure_llama_server(sys.argv[1] if len(sys.argv) > 1 else None)
    print(f"{path} ({time.monotonic() - begun:.0f} s)")
