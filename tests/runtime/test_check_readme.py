"""benchmarks/check_readme.py: reading the benchmark tables of docs/benchmarks.md and flagging
rows a run puts more than 25% away."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from check_readme import compare, main, report, table_rows

_ROWS = [
    ("workflows", "10-executor chain, async class handlers", "agent-framework 1.23.0",
     "16.24x / 15.18x", ">= 12x"),
    ("workflows", "10-executor chain, async class handlers", "langgraph 1.2.24",
     "26.45x / 25.33x", ""),
    ("runtime", "memory per idle agent (bytes, lower is better)", "autogen-core 0.7.5",
     "397 vs 596", ""),
    ("teams", "round robin of 4 agents, 40 turns",
     "autogen-agentchat `RoundRobinGroupChat` 0.7.5", "11.69x / 10.54x", ">= 10x"),
    ("teams", "the same with agents that need no model", "autogen-agentchat 0.7.5",
     "24.77x / 16.39x", ""),
    ("teams_handoff", "handoff chain of 10 agents", "autogen-agentchat `Swarm` 0.7.5",
     "9.37x (one run)", ""),
]  # fmt: skip
TABLE = "\n".join(
    [
        "Some prose.",
        "",
        "| NAME | workload | peer | ratio, median / worst | goal |",
        "| --- | --- | --- | --- | --- |",
        *("| " + " | ".join(row) + " |" for row in _ROWS),
        "",
        "After the table.",
    ]
)


def _result(name: str, peer: str, ratio: float) -> dict[str, Any]:
    return {"name": name, "peer_name": peer, "ratio": {"median": ratio, "worst": ratio}}


RESULTS = [
    _result("workflows: 10-executor chain, async class handlers", "agent-framework", 18.0),
    _result("workflows: 10-executor chain, plain function executors", "agent-framework", 60.0),
    _result("workflows: 10-executor chain, async class handlers", "langgraph", 40.0),
    _result("teams: round robin of 4 agents, 40 turns, model answers at once", "autogen", 11.0),
    _result("teams: round robin, agents that need no model", "autogen-agentchat", 5.0),
]


def test_the_table_is_read_with_ratios_and_the_same_resolved() -> None:
    rows = table_rows(TABLE)
    assert [r.module for r in rows] == [
        "workflows",
        "workflows",
        "runtime",
        "teams",
        "teams",
        "teams_handoff",
    ]
    assert [r.ratio for r in rows] == [16.24, 26.45, None, 11.69, 24.77, 9.37]
    assert rows[4].workload.startswith("round robin of 4 agents, 40 turns with agents")
    assert rows[0].line == 5


def test_each_row_meets_the_result_of_its_peer_and_workload() -> None:
    verdicts = compare(table_rows(TABLE), RESULTS)
    chain_af, chain_lg, memory, rr, rr_bare, handoff = verdicts
    assert chain_af.measured == 18.0  # not the plain-function row of the same peer
    assert chain_lg.measured == 40.0
    assert memory.measured is None and "no ratio" in memory.why
    assert rr.measured == 11.0
    assert rr_bare.measured == 5.0
    assert handoff.measured is None and "no such module" in handoff.why


def test_a_row_more_than_a_quarter_away_is_flagged_either_way() -> None:
    verdicts = compare(table_rows(TABLE), RESULTS)
    flagged = {v.row.line for v in verdicts if v.flagged()}
    # 18.0 vs 16.24 (+11%) and 11.0 vs 11.69 (-6%) hold; 40 vs 26.45 (+51%) and 5 vs 24.77
    # (-80%) do not
    assert flagged == {6, 9}
    text, count = report(verdicts)
    assert count == 2
    assert "OFF" in text and "+51%" in text and "-80%" in text
    assert text.count("not checked") == 2


def test_the_boundary_is_the_tolerance_itself() -> None:
    rows = table_rows(TABLE)[:1]
    assert not compare(rows, [_result(RESULTS[0]["name"], "agent-framework", 16.24 * 1.25)])[
        0
    ].flagged()
    assert compare(rows, [_result(RESULTS[0]["name"], "agent-framework", 16.24 * 1.26)])[
        0
    ].flagged()


@pytest.mark.parametrize(("ratio", "code"), [(16.0, 0), (30.0, 1)])
def test_the_script_exits_with_the_verdict(
    ratio: float, code: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(TABLE)
    results = tmp_path / "results.json"
    rows = [_result("workflows: 10-executor chain, async class handlers", "agent-framework", ratio)]
    results.write_text(json.dumps({"time": "t", "commit": "abc", "rows": rows}))
    assert main(["--results", str(results), "--readme", str(readme)]) == code
    assert "commit abc" in capsys.readouterr().out


def test_a_run_with_nothing_to_check_fails(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(TABLE)
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"rows": []}))
    assert main(["--results", str(results), "--readme", str(readme)]) == 1


def test_the_benchmarks_page_has_a_table_to_check() -> None:
    readme = Path(__file__).resolve().parents[2] / "docs" / "benchmarks.md"
    rows = table_rows(readme.read_text(encoding="utf-8"))
    assert len(rows) >= 10
    assert sum(r.ratio is not None for r in rows) >= 10
