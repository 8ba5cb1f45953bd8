"""llama.cpp's OpenAI-compatible server (``llama_cpp.server``) on the default SmolLM2 model,
on a free port of 127.0.0.1, for the tests that talk to it for real."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest

from ..conftest import require_module
from ..serve._servers import free_port

START_TIMEOUT = 120.0
STOP_TIMEOUT = 20.0


@contextlib.contextmanager
def llama_server(*options: str) -> Iterator[str]:
    """The server's ``/v1`` URL while it runs with `options`; stopped on the way out."""
    require_module("llama_cpp.server", "pip install -e '.[dev]'")
    from cantata.models._llama_model import default_model_path

    port = free_port()
    cmd = [
        sys.executable, "-m", "llama_cpp.server", "--model", default_model_path(),
        "--host", "127.0.0.1", "--port", str(port), *options,
    ]  # fmt: skip
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=os.environ.copy()
    )
    ready = threading.Event()
    log: list[str] = []

    def watch() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            log.append(line)
            if "Uvicorn running on" in line:
                ready.set()
        ready.set()

    threading.Thread(target=watch, daemon=True).start()
    try:
        if not ready.wait(START_TIMEOUT) or proc.poll() is not None:
            pytest.fail("llama_cpp.server did not start:\n" + "".join(log[-20:]))
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
