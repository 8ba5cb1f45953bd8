"""examples/durable_traced.py prints its spans to the console, and run again on the same
store it resumes without charging or asking the model again."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).parents[2] / "examples" / "durable_traced.py"


def run(db: Path) -> str:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), str(db)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_the_example_traces_and_resumes_without_acting_again(tmp_path: Path) -> None:
    first = run(tmp_path / "co.db")
    assert "-- charging 42 (idempotency key order-1:pay:1:charge)" in first
    assert "-- sending a receipt for 42" in first
    assert '"name": "execute_tool send_receipt"' in first and '"name": "chat scripted"' in first
    second = run(tmp_path / "co.db")
    assert "['Paid 42 and sent the receipt.']" in second
    assert "charging" not in second and "sending" not in second
