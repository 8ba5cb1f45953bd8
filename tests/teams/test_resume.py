"""A team checkpointed to SQLite crashes in the middle of a run; a fresh process resumes
it from its last checkpoint and ends with the same transcript as a run that never
crashed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ._resume_child import team

CHILD = Path(__file__).with_name("_resume_child.py")


def _child(mode: str, db: Path, **env: str) -> subprocess.CompletedProcess[str]:
    src = str(Path(__file__).resolve().parents[2] / "src")
    return subprocess.run(
        [sys.executable, str(CHILD), mode, str(db)],
        env={**os.environ, "PYTHONPATH": f"{src}:{Path(__file__).resolve().parents[2]}", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


async def test_a_crashed_team_resumes_in_a_fresh_process_with_the_same_transcript(
    tmp_path: Path,
) -> None:
    reference = await team().create_session().run("write")
    expected = [[m.author_name, m.text] for m in reference.messages]
    assert expected[-1] == ["critic", "critic 8 APPROVE"]

    db = tmp_path / "team.db"
    crashed = _child("crash", db, CRASH_AT="6")
    assert crashed.returncode == 3, crashed.stderr  # died in the critic's second turn
    resumed = _child("resume", db)
    assert resumed.returncode == 0, resumed.stderr
    out = json.loads(resumed.stdout.strip().splitlines()[-1])
    assert out["transcript"] == expected
    assert out["stop"] == reference.stop_reason
