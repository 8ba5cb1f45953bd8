"""The countdown example runs as documented and counts from 10 down to 1."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "countdown.py"


def test_countdown_example_runs_to_one() -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=60, check=True
    )
    modified = [(int(a), int(b)) for a, b in re.findall(r"Modified (\d+) to (\d+)", done.stdout)]
    assert modified == [(n, n - 1) for n in range(10, 1, -1)]
    passed = [int(n) for n in re.findall(r"(\d+) passed the check", done.stdout)]
    assert passed == list(range(10, 1, -1))
    assert done.stdout.rstrip().endswith("1 failed the check, stopping.")
    assert done.stderr == ""
