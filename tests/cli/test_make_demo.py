"""`make demo` tells a newcomer, before the long install, that llama.cpp is built once and
takes minutes, and lets pip show its progress (a dry run: nothing is installed)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _dry_run(target: str, venv: Path) -> list[str]:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    done = subprocess.run(
        ["make", "-n", target, f"VENV={venv}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.splitlines()


def test_demo_announces_the_long_build_and_shows_pip_progress(tmp_path: Path) -> None:
    lines = _dry_run("demo", tmp_path / "venv")
    installs = [i for i, line in enumerate(lines) if "pip install" in line]
    before = "\n".join(lines[: installs[0]])
    assert "echo" in before and "llama.cpp" in before and "a few minutes" in before
    assert all(" -q " not in lines[i] for i in installs)


def test_other_targets_install_quietly(tmp_path: Path) -> None:
    lines = _dry_run("setup", tmp_path / "venv")
    installs = [line for line in lines if "pip install" in line]
    assert installs and all(" -q " in line for line in installs)
