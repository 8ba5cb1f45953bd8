"""`cantata serve`'s flags for who may reach it (``--allowed-host``, ``--cors-origin``,
``--public-url``), in one process and under ``--workers``, and their refusals at start."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from ._servers import ROOT, cli_server

TARGET = "tests/serve/_servers.py:echo"
APP = "http://app.test:3000"


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--allowed-host", "http://agents.test"], "--allowed-host"),
        (["--allowed-host", "agents.test:8000"], "--allowed-host"),
        (["--cors-origin", "*"], "token"),
        (["--cors-origin", "app.test"], "--cors-origin"),
        (["--public-url", "agents.test"], "--public-url"),
    ],
)
def test_bad_values_stop_the_server_at_start(flags: list[str], said: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "cantata.cli", "serve", TARGET, "--port", "0", *flags],
        cwd=ROOT, capture_output=True, timeout=120, check=False,
    )  # fmt: skip
    err = done.stderr.decode()
    assert done.returncode == 1, err
    assert said in err and "Traceback" not in err


@pytest.mark.parametrize("workers", ["1", "2"])
def test_the_flags_reach_every_worker(tmp_path: Path, workers: str) -> None:
    args = [
        "--store", f"sqlite:///{tmp_path / 'serve.db'}", "--workers", workers,
        "--allowed-host", "agents.test", "--cors-origin", APP,
        "--public-url", "https://public.test/base",
    ]  # fmt: skip
    with cli_server(TARGET, *args) as (url, _proc), httpx.Client(base_url=url, timeout=30) as http:
        for _ in range(4):  # several connections: any worker may answer
            with httpx.Client(base_url=url, timeout=30) as fresh:
                assert fresh.get("/v1/models", headers={"Host": "agents.test"}).status_code == 200
                assert fresh.get("/v1/models", headers={"Host": "public.test"}).status_code == 200
                assert fresh.get("/v1/models", headers={"Host": "evil.test"}).status_code == 403
        card = http.get("/a2a/echo/.well-known/agent-card.json").json()
        assert {i["url"] for i in card["supportedInterfaces"]} == {
            "https://public.test/base/a2a/echo"
        }
        preflight = {"Origin": APP, "Access-Control-Request-Method": "POST"}
        res = http.options("/v1/chat/completions", headers=preflight)
        assert res.headers.get("access-control-allow-origin") == APP
        res = http.options("/v1/chat/completions", headers={**preflight, "Origin": "http://x.test"})
        assert "access-control-allow-origin" not in res.headers
        chat = {"model": "echo", "messages": [{"role": "user", "content": "hi"}]}
        plain = http.post("/v1/chat/completions", content=str(chat).encode())
        assert plain.status_code == 415
        assert http.post("/v1/chat/completions", json=chat).status_code == 200
