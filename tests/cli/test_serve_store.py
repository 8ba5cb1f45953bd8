"""`cantata serve --store URL` opens the store before it serves: a URL that cannot be opened
stops the command at start with the store's own reason, and `--help` names the default."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cantata.cli import app
from cantata.serve import DEFAULT_STORE_URL

from ..serve._servers import ROOT, free_port


@pytest.mark.parametrize(
    ("store", "words"),
    [
        ("sqlite:////nonexistent-dir/sub/x.db", "cannot open the SQLite database"),
        ("postgresql://127.0.0.1:1/test", "cannot connect to PostgreSQL"),
        ("redis://127.0.0.1:1/0", "cannot connect to Redis"),
    ],
)
@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_store_that_cannot_be_opened_stops_serve_at_start(
    store: str, words: str, workers: str
) -> None:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "cantata.cli", "serve", "tests/serve/_servers.py:echo",
         "--port", str(free_port()), "--store", store, "--workers", workers],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert time.monotonic() - started < 30
    out = " ".join(done.stderr.split())
    assert "--store cannot be opened" in out and words in out, out
    assert "serving echo" not in out and "Uvicorn running" not in out


def test_a_store_url_password_is_not_printed() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "cantata.cli", "serve", "tests/serve/_servers.py:echo",
         "--port", str(free_port()), "--store", "postgresql://u:s3cret@127.0.0.1:1/test"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1
    assert "cannot connect to PostgreSQL" in done.stderr and "s3cret" not in done.stderr


def test_help_names_the_default_store_file() -> None:
    result = CliRunner().invoke(app, ["serve", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert DEFAULT_STORE_URL in " ".join(result.output.split())


def test_the_default_store_directory_is_made_and_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No --store: the default SQLite file is made under the working directory at start."""
    from cantata.cli.serve import _check_store

    monkeypatch.chdir(tmp_path)
    _check_store(DEFAULT_STORE_URL)
    assert (tmp_path / ".cantata" / "serve.db").exists()


def test_workers_refuse_a_memory_store() -> None:
    result = CliRunner().invoke(
        app, ["serve", "tests/serve/_servers.py:echo", "--workers", "2", "--store", "memory://"]
    )
    assert result.exit_code == 1
    assert "not memory://" in " ".join(result.output.split())
