"""Reports: the figures, JSON that reads back, case-by-case comparison, the terminal table
and the HTML page."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from cantata.core import Usage
from cantata.evals import (
    Case,
    CaseResult,
    Contains,
    EvalReport,
    EvalResult,
    ReportError,
    ToolCall,
    compare_reports,
    comparison_table,
    evaluate,
    report_html,
    report_table,
)


def result(case: str, passed: bool, repeat: int = 0, *, score: float | None = None,
           latency: float = 0.01, error: str | None = None) -> CaseResult:  # fmt: skip
    verdict = EvalResult("contains", passed, (1.0 if passed else 0.0) if score is None else score,
                         "" if passed else "missing 'x'")  # fmt: skip
    scores = [] if error else [verdict]
    calls = [ToolCall("t", {"a": 1})]
    return CaseResult(case, repeat, f"in {case}", "x", f"out {case}", scores, latency,
                      Usage(3, 1), calls, ["a"], {"k": 1}, error)  # fmt: skip


def report(*results: CaseResult) -> EvalReport:
    return EvalReport("set", "agent", list(results), started="2026-01-01T00:00:00+00:00")


def test_figures_over_runs_and_repeats() -> None:
    r = report(result("a", True), result("a", False, 1), result("b", True, latency=0.5),
               result("c", False, error="boom"))  # fmt: skip
    assert (r.runs, r.passed, r.errors) == (4, 2, 1)
    assert r.pass_rate == 0.5 and r.score == 0.5
    assert r.usage == Usage(12, 4)
    assert r.latency(0.5) == 0.01 and r.latency(1.0) == 0.5
    cases = r.cases()
    assert list(cases) == ["a", "b", "c"]
    assert cases["a"].pass_rate == 0.5 and cases["a"].failures == ("contains: missing 'x'",)
    assert cases["c"].failures == ("error: boom",)
    (contains,) = r.evaluators().values()
    assert (contains.runs, contains.passed) == (3, 2)


def test_json_round_trip_and_refusals(tmp_path: Path) -> None:
    r = report(result("a", True), result("b", False, error="boom"))
    path = tmp_path / "out" / "report.json"
    r.save(path)
    data = json.loads(path.read_text())
    assert data["schema_version"] == 1 and data["summary"]["pass_rate"] == 0.5
    again = EvalReport.load(path)
    assert again.results == r.results and again.name == "set" and again.started == r.started
    with pytest.raises(ReportError, match="schema_version 9"):
        EvalReport.from_dict({**data, "schema_version": 9})
    with pytest.raises(ReportError, match="not JSON"):
        EvalReport.loads("{")
    with pytest.raises(ReportError, match="result 0 of the report is malformed"):
        EvalReport.from_dict({**data, "results": [{"scores": []}]})
    with pytest.raises(ReportError, match="cannot be read"):
        EvalReport.load(tmp_path / "none.json")


def test_compare_flags_regressions_case_by_case() -> None:
    old = report(result("same", True), result("worse", True), result("worse", True, 1),
                 result("better", False), result("gone", True),
                 result("score", False, score=0.8))  # fmt: skip
    new = report(result("same", True), result("worse", True), result("worse", False, 1),
                 result("better", True), result("new", False),
                 result("score", False, score=0.5))  # fmt: skip
    comparison = compare_reports(old, new)
    changes = {c.case: c for c in comparison.changes}
    assert {k: c.change for k, c in changes.items()} == {
        "same": "same", "worse": "regressed", "better": "improved", "new": "added",
        "score": "regressed", "gone": "removed",
    }  # fmt: skip
    worse = changes["worse"]
    assert (worse.old_pass_rate, worse.new_pass_rate) == (1.0, 0.5)
    assert worse.evaluators == ("contains",) and worse.failures == ("contains: missing 'x'",)
    assert changes["better"].evaluators == ("contains",)
    assert comparison.has_regressions and [c.case for c in comparison.regressions] == [
        "worse",
        "score",
    ]
    tolerant = compare_reports(old, new, score_tolerance=0.5)
    assert [c.case for c in tolerant.regressions] == ["worse"]
    assert not compare_reports(old, old).has_regressions
    text = _plain(comparison_table(comparison))
    assert text.index("worse") < text.index("better")  # regressions first
    assert "2 regressed, 1 improved, 1 same, 1 added, 1 removed" in text


def _plain(renderable: object) -> str:
    console = Console(width=200, record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


async def test_the_table_and_the_page_show_what_failed() -> None:
    async def answer(value: str) -> str:
        return "<b>Paris</b>" if value == "fr" else "Berlin & <script>x</script>"

    r = await evaluate(
        answer, [Case("fr", "fr", "Paris"), Case("de", "de", "Rome")], evaluators=[Contains()]
    )
    text = _plain(report_table(r))
    assert "1/2 runs passed (50%)" in text and "missing 'Rome'" in text
    assert "contains" in text and "50%" in text
    page = report_html(r)
    assert page.startswith("<!doctype html>") and page.endswith("</html>\n")
    assert "<script" not in page and "&lt;script&gt;" in page  # model text is escaped
    assert "Berlin &amp;" in page and "missing &#x27;Rome&#x27;" in page
    assert "http" not in page  # nothing fetched from elsewhere
    big = report(*(result(f"c{n}", n != 7) for n in range(100)))
    shown = _plain(report_table(big, rows=10))
    assert "c7" in shown and "c8" not in shown and "99 more cases not shown" in shown
