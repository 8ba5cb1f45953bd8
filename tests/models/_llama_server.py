"""llama.cpp's servers on the default SmolLM2 model, on a free port of 127.0.0.1, for the
tests that talk to them for real: the Python ``llama_cpp.server`` (Chat Completions), and
llama.cpp's own ``llama-server`` built from the llama-cpp-python sdist (Chat Completions and
Anthropic's Messages API; see `_llama_server_build`)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest

from ..conftest import IN_CI, require_module
from ..serve._servers import free_port

START_TIMEOUT = 120.0
STOP_TIMEOUT = 20.0


@contextlib.contextmanager
def llama_server(*options: str) -> Iterator[str]:
    """The server's ``/v1`` URL while it runs with `options`; stopped on the way out."""
    with llama_server_process(*options) as (url, _):
        yield url


@contextlib.contextmanager
def llama_server_process(*options: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """`llama_server`, with its process (a test may stop it first)."""
    require_module("llama_cpp.server", "pip install -e '.[dev]'")
    from cantata.models._llama_model import default_model_path

    port = free_port()
    cmd = [
        sys.executable, "-m", "llama_cpp.server", "--model", default_model_path(),
        "--host", "127.0.0.1", "--port", str(port), *options,
    ]  # fmt: skip
    with _running(cmd, "Uvicorn running on", "llama_cpp.server") as proc:
        yield f"http://127.0.0.1:{port}/v1", proc


@contextlib.contextmanager
def native_llama_server(*options: str) -> Iterator[str]:
    """llama.cpp's own ``llama-server`` (built once per machine): its root URL (``/v1`` for
    Chat Completions, ``/v1/messages`` for Anthropic's API) while it runs with `options`."""
    with native_llama_server_process(*options) as (url, _):
        yield url


@contextlib.contextmanager
def native_llama_server_process(
    *options: str,
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """`native_llama_server`, with its process."""
    from cantata.models._llama_model import default_model_path

    from ._llama_server_build import BuildError, ensure_llama_server

    require_module("llama_cpp", "pip install -e '.[local]'")
    try:
        binary = ensure_llama_server()
    except BuildError as exc:
        if IN_CI:
            pytest.fail(f"llama-server could not be built, and CI is set: {exc}")
        pytest.skip(f"llama-server could not be built here: {exc}")
    port = free_port()
    cmd = [
        str(binary), "--model", default_model_path(), "--host", "127.0.0.1",
        "--port", str(port), "--jinja", "--threads", "2", "--ctx-size", "4096",
        "--n-predict", "48", "--no-webui", *options,
    ]  # fmt: skip
    with _running(cmd, "listening on http", "llama-server") as proc:
        yield f"http://127.0.0.1:{port}", proc


@contextlib.contextmanager
def _running(cmd: list[str], ready_line: str, what: str) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=os.environ.copy()
    )
    ready = threading.Event()
    log: list[str] = []

    def watch() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            log.append(line)
            if ready_line in line:
                ready.set()
        ready.set()

    threading.Thread(target=watch, daemon=True).start()
    try:
        if not ready.wait(START_TIMEOUT) or proc.poll() is not None:
            pytest.fail(f"{what} did not start:\n" + "".join(log[-20:]))
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
