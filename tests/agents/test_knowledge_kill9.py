"""Kill -9 during ingestion, then ingest again: every chunk once, none half-written.

A child process ingests a corpus into a SQLite file and is SIGKILLed part way (after some
documents are reported, at a random moment in the next one's write); a second child
ingests the whole corpus again. The file then holds exactly the chunks the chunker makes,
each once; the documents done before the kill are kept, not written again; SQLite's and
FTS5's integrity checks pass.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from cantata.agents._chunking import chunk_markdown

sys.path.insert(0, str(Path(__file__).parent))
from _ingest_child import corpus

CHILD = Path(__file__).with_name("_ingest_child.py")
DOCUMENTS = 12


def _child(db: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.Popen(
        [sys.executable, str(CHILD), str(db), str(DOCUMENTS)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def test_kill9_during_ingestion_then_again(tmp_path: Path) -> None:
    db = tmp_path / "knowledge.db"
    child = _child(db)
    assert child.stdout is not None
    done_before = []
    deadline = time.monotonic() + 60
    try:
        while len(done_before) < 4:
            line = child.stdout.readline()
            assert line, f"the child ended early: {child.stderr.read() if child.stderr else ''}"
            done_before.append(line.split()[0])
            assert time.monotonic() < deadline, "the child took over a minute"
        time.sleep(random.Random(7).uniform(0.0, 0.03))  # inside the next document, mostly
        child.send_signal(signal.SIGKILL)
    finally:
        child.kill()
        child.wait(timeout=10)
    assert child.returncode == -signal.SIGKILL, "the child ended before the kill"

    again = _child(db)
    out, err = again.communicate(timeout=60)
    assert again.returncode == 0, err[-2000:]
    reports = {name: (int(a), int(k), int(r)) for name, a, k, r in map(str.split, out.splitlines())}

    texts = corpus(DOCUMENTS)
    expected = {name: len(chunk_markdown(text, limit=400)) for name, text in texts.items()}
    assert min(expected.values()) > 10
    for name in done_before:  # written whole before the kill: kept, nothing added again
        assert reports[name] == (0, expected[name], 0), name
    for name, (added, kept, removed) in reports.items():
        assert added + kept == expected[name] and removed == 0, name
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT path, json_extract(value, '$.start'), count(*) FROM cantata_items "
            "GROUP BY path, json_extract(value, '$.start')"
        ).fetchall()
        per_document: dict[str, int] = {}
        for path, _start, count in rows:
            assert count == 1, (path, _start)  # no chunk twice
            name = path.split("\x1f")[-2]
            per_document[name] = per_document.get(name, 0) + 1
        assert per_document == expected
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        conn.execute("INSERT INTO cantata_items_fts (cantata_items_fts) VALUES ('integrity-check')")
        indexed = conn.execute("SELECT count(*) FROM cantata_items_fts_docsize").fetchone()[0]
    assert indexed == sum(expected.values())  # every chunk's text indexed, once
