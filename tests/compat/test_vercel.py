"""The Vercel AI SDK (``ai`` and ``@ai-sdk/openai``, in Node) against ``cantata serve``:
``tests/compat/vercel/check.mjs`` makes the calls and checks the answers (plain, stream,
multi-turn by item_reference, chat completions, structured output, a tool round trip, a
failing agent). Its packages are installed in that folder on first use (npm's registry);
without Node or npm the test skips."""

from __future__ import annotations

import subprocess
from pathlib import Path

from ..conftest import require_programs

HERE = Path(__file__).parent / "vercel"
INSTALL_TIMEOUT = 300
RUN_TIMEOUT = 120


def _install() -> None:
    if (HERE / "node_modules" / "ai").is_dir() and (HERE / "node_modules" / "@ai-sdk").is_dir():
        return
    command = ["npm", "ci" if (HERE / "package-lock.json").is_file() else "install"]
    done = subprocess.run(
        [*command, "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=HERE,
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, f"npm could not install the AI SDK:\n{done.stderr[-2000:]}"


def test_the_vercel_ai_sdk(base_url: str) -> None:
    require_programs("node", "npm")
    _install()
    done = subprocess.run(
        ["node", str(HERE / "check.mjs"), base_url],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr[-4000:]}"
    assert "7 checks passed" in done.stdout
