"""Servers for the serve tests: a real uvicorn in the test's loop, or `cantata serve` in a
subprocess, each on a free 127.0.0.1 port and stopped by the context that started it.

The module also defines what the subprocess serves (``tests/serve/_servers.py:echo``): an
agent whose scripted model says how many user messages it has seen, so a test can tell
that the server kept the conversation.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from cantata.agents import ChatAgent
from cantata.core import Message
from cantata.models import ChatOptions, ScriptedChatClient
from cantata.serve import build_app

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 30.0
STOP_TIMEOUT = 15.0


def count_turns(messages: list[Message], options: ChatOptions) -> str:
    """``turn N: <last user text>``, N counting the user messages the model was shown."""
    users = [m for m in messages if m.role == "user"]
    return f"turn {len(users)}: {users[-1].text if users else ''}"


def echo_agent(name: str = "echo") -> ChatAgent:
    return ChatAgent(
        ScriptedChatClient(count_turns, chunk_size=4),
        name=name,
        description="Counts the user's turns.",
    )


echo = echo_agent()


@asynccontextmanager
async def running(app: object, *, host: str = "127.0.0.1") -> AsyncIterator[str]:
    """Serve `app` with uvicorn on a free port of `host` (a loopback address); yields its
    base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="on")  # type: ignore[arg-type]
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        async with asyncio.timeout(START_TIMEOUT):
            while not server.started:
                if task.done():
                    task.result()  # raises the start-up failure
                    raise RuntimeError("uvicorn stopped before it started")
                await asyncio.sleep(0.01)
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        async with asyncio.timeout(STOP_TIMEOUT):
            await task
        sock.close()


@asynccontextmanager
async def serving(served: object, **options: object) -> AsyncIterator[str]:
    """`build_app(served, **options)` on a real uvicorn; yields the base URL."""
    async with running(build_app(served, **options)) as url:  # type: ignore[arg-type]
        yield url


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def cli_server(
    target: str, *args: str, env: dict[str, str] | None = None
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """`cantata serve target` in a subprocess; yields (base URL, process) once it answers."""
    port = free_port()
    command = [sys.executable, "-m", "cantata.cli", "serve", target, "--port", str(port), *args]
    full_env = {**os.environ, **(env or {})}
    proc = subprocess.Popen(
        command, cwd=ROOT, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(proc, url, (env or {}).get("CANTATA_SERVE_TOKEN"))
        yield url, proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(STOP_TIMEOUT)
        if proc.stdout is not None:
            proc.stdout.close()


def _wait_ready(proc: subprocess.Popen[bytes], url: str, token: str | None) -> None:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    deadline = START_TIMEOUT
    waited = 0.0
    while waited < deadline:
        if proc.poll() is not None:
            out = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
            raise RuntimeError(f"cantata serve exited with {proc.returncode}: {out}")
        try:
            if httpx.get(f"{url}/v1/models", headers=headers, timeout=2.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        import time

        time.sleep(0.1)
        waited += 0.1
    raise RuntimeError(f"cantata serve did not answer on {url} within {deadline} s")


def route_table(served: object) -> Any:
    """What the routes of `build_app(served)` declare to admission, from the real providers
    (a `RouteTable`; imported here, as `cantata serve` subprocesses import this module)."""
    from cantata.serve import Limits, ResponseThreads, ServeContext, ServedSet
    from cantata.serve.admission import RouteTable
    from cantata.serve.app import default_providers
    from cantata.stores import MemoryStore

    store = MemoryStore()
    ctx = ServeContext(ServedSet(served), store, Limits(), ResponseThreads(store))
    return RouteTable(r for provider in default_providers() for r in provider(ctx).routes)
