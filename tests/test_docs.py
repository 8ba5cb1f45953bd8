"""The README and the docs are code: every ```python block in them runs as written.

Each block is a complete program, run in a fresh interpreter with a bounded wait, in a
scratch directory so that files it makes (a SQLite database) go away. A block that needs
the embedded model is marked by using `LocalChatClient`; those run with the `local_model`
tests. Blocks fenced as ```py are shown, not run: the migration guide uses them for the
other frameworks' code, which is not installed here.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_FENCE = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _blocks() -> list[tuple[str, str]]:
    found = []
    for document in DOCUMENTS:
        text = document.read_text(encoding="utf-8")
        for number, match in enumerate(_FENCE.finditer(text), start=1):
            line = text.count("\n", 0, match.start()) + 1
            found.append((f"{document.name}:{line} (block {number})", match.group(1)))
    return found


def _params() -> list[object]:
    params: list[object] = []
    for name, code in _blocks():
        marks = [pytest.mark.local_model] if "LocalChatClient(" in code else []
        params.append(pytest.param(code, id=name, marks=marks))
    return params


def test_the_documents_have_python_blocks() -> None:
    names = {name.split(":")[0] for name, _ in _blocks()}
    assert "README.md" in names
    assert "migration.md" in names


@pytest.mark.parametrize("code", _params())
def test_block_runs_as_written(code: str, tmp_path: Path) -> None:
    script = tmp_path / "block.py"
    script.write_text(code, encoding="utf-8")
    # A fresh reader's environment: not the Ray cluster another test joined (ray.init
    # leaves RAY_ADDRESS behind in this process), so a block that starts Ray starts its own.
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
