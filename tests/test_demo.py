"""The README's demo (`make demo`) runs end to end on the embedded model."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

DEMO = Path(__file__).resolve().parents[1] / "examples" / "demo.py"


@pytest.mark.local_model
def test_the_demo_runs_its_three_parts() -> None:
    done = subprocess.run(
        [sys.executable, str(DEMO)], capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "(tool call: get_weather(" in out
    assert "(tool result: snow, -4 C)" in out
    restored = re.search(r"restored (\d+) messages from SQLite", out)
    grown = re.search(r"the thread now holds (\d+) messages", out)
    assert restored and grown, out
    assert int(restored.group(1)) >= 4  # question, tool call, tool result, answer
    assert int(grown.group(1)) >= int(restored.group(1)) + 2  # the second turn was added
    assert "[writer]" in out and "[editor]" in out
