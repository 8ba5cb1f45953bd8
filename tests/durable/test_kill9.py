"""Kill -9 proof, short version: a run with fan-out/fan-in, state and effects, killed at
random moments and resumed in fresh processes, ends with the reference run's outputs and
repeats no effect whose result was journaled (SQLite and PostgreSQL)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from kill_harness import KillReport, drop_pg_tables, kill_and_resume, pg_where

from cantata.core import new_id


def check(report: KillReport) -> None:
    assert report.identical, (report.outputs, report.reference)
    assert report.effects == 12  # three rounds of a, b, c and the agent's effect tool
    # a model call cut off before its answer was journaled is asked again, once
    assert report.reference_model_calls == 6
    assert report.model_calls - report.reference_model_calls <= report.kills
    assert report.repeated_after_journal == 0
    assert report.most_starts <= 1 + report.kills  # a re-run only for a kill mid-flight


def test_killed_runs_on_sqlite_resume_to_the_same_outputs(tmp_path: Path) -> None:
    report = kill_and_resume(
        str(tmp_path / "killed.db"), str(tmp_path / "ref.db"), tmp_path, kills=3, seed=12
    )
    check(report)


def test_killed_runs_on_postgres_resume_to_the_same_outputs(
    tmp_path: Path, postgres_dsn: str
) -> None:
    killed, ref = f"k{new_id()[:10]}_", f"r{new_id()[:10]}_"
    try:
        report = kill_and_resume(
            pg_where(postgres_dsn, killed), pg_where(postgres_dsn, ref), tmp_path, kills=3, seed=7
        )
    finally:
        drop_pg_tables(postgres_dsn, killed)
        drop_pg_tables(postgres_dsn, ref)
    check(report)
