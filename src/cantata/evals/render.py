"""A report for people: a table in the terminal (Rich), and one static HTML page.

The page is self-contained (its style inline, no script, nothing fetched), so it can be
attached to a CI run, mailed, or served by the dev UI as it is; every value from the
report is escaped, since outputs are model-written text.
"""

from __future__ import annotations

import html
import json
from typing import Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from .compare import Comparison
from .report import CaseSummary, EvalReport

__all__ = ["comparison_table", "headline", "print_report", "report_html", "report_table"]

_ROWS = 40


def _pct(x: float) -> str:
    return f"{x:.0%}"


def _short(text: str, limit: int = 90) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def headline(report: EvalReport) -> str:
    """One line: what ran, how much passed, how long it took."""
    return (
        f"{report.name} on {report.target}: {report.passed}/{report.runs} runs passed "
        f"({_pct(report.pass_rate)}), score {report.score:.2f}, {report.errors} errors, "
        f"{report.duration:.2f} s (concurrency {report.concurrency}, repeats {report.repeats})"
    )


def report_table(report: EvalReport, *, rows: int = _ROWS) -> Group:
    """The report as Rich renderables: the headline, the cases (failing ones first when
    there are more than `rows`), the evaluators, usage and latency."""
    cases = list(report.cases().values())
    shown = cases if len(cases) <= rows else [c for c in cases if c.pass_rate < 1][:rows]
    table = Table(title=f"cases ({len(cases)})", title_justify="left")
    for col, justify in (("case", "left"), ("passed", "right"), ("score", "right"),
                         ("latency", "right"), ("failures", "left")):  # fmt: skip
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for c in shown:
        table.add_row(
            c.case,
            Text(f"{c.passed}/{c.runs}", style="green" if c.pass_rate == 1 else "red"),
            f"{c.score:.2f}",
            f"{c.latency * 1000:.1f} ms",
            _short("; ".join(c.failures)),
        )
    if len(shown) < len(cases):
        table.caption = f"{len(cases) - len(shown)} more cases not shown (all passed)"
    evaluators = Table(title="evaluators", title_justify="left")
    for col in ("evaluator", "pass rate", "score", "runs"):
        evaluators.add_column(col, justify="left" if col == "evaluator" else "right")
    for e in report.evaluators().values():
        evaluators.add_row(e.evaluator, _pct(e.pass_rate), f"{e.score:.2f}", str(e.runs))
    usage = report.usage
    figures = Text(
        f"tokens: {usage.input_tokens} in, {usage.output_tokens} out; latency: "
        f"p50 {report.latency(0.5) * 1000:.1f} ms, p95 {report.latency(0.95) * 1000:.1f} ms, "
        f"max {report.latency(1.0) * 1000:.1f} ms"
    )
    style = "bold green" if report.pass_rate == 1 else "bold red"
    return Group(Text(headline(report), style=style), table, evaluators, figures)


def comparison_table(comparison: Comparison) -> Group:
    """The changed cases of a comparison (regressions first), and a count of each kind."""
    table = Table(title="changes", title_justify="left")
    for col in ("case", "change", "pass rate", "score", "evaluators / failures"):
        table.add_column(col)
    order = {"regressed": 0, "removed": 1, "improved": 2, "added": 3}
    changed = sorted((c for c in comparison.changes if c.change != "same"),
                     key=lambda c: order[c.change])  # fmt: skip
    colours = {"regressed": "red", "removed": "yellow", "improved": "green", "added": "cyan"}
    for c in changed:
        detail = ", ".join(c.evaluators)
        if c.failures:
            detail += (" — " if detail else "") + "; ".join(c.failures)
        table.add_row(
            c.case,
            Text(c.change, style=colours[c.change]),
            f"{_opt_pct(c.old_pass_rate)} → {_opt_pct(c.new_pass_rate)}",
            f"{_opt(c.old_score)} → {_opt(c.new_score)}",
            _short(detail),
        )
    counts = ", ".join(
        f"{len(comparison.of(k))} {k}"
        for k in ("regressed", "improved", "same", "added", "removed")
    )
    old, new = comparison.old, comparison.new
    line = Text(
        f"{old.name}: pass rate {_pct(old.pass_rate)} → {_pct(new.pass_rate)}, score "
        f"{old.score:.2f} → {new.score:.2f}; {counts}",
        style="bold red" if comparison.has_regressions else "bold green",
    )
    return Group(line, table) if changed else Group(line)


def _opt(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def _opt_pct(x: float | None) -> str:
    return "-" if x is None else _pct(x)


def print_report(report: EvalReport, console: Console | None = None) -> None:
    """Print `report_table` to `console` (stdout by default)."""
    (console or Console()).print(report_table(report))


_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em;color:#1d1d1f;background:#fff}
h1{font-size:1.4em;margin:0 0 .2em}h2{font-size:1.1em;margin:1.6em 0 .4em}
.sub{color:#666}.cards{display:flex;gap:1em;flex-wrap:wrap;margin:1em 0}
.card{border:1px solid #ddd;border-radius:8px;padding:.6em 1em;min-width:8em}
.card b{display:block;font-size:1.5em}table{border-collapse:collapse;width:100%}
th,td{border-bottom:1px solid #eee;padding:.3em .6em;text-align:left;vertical-align:top}
th{background:#fafafa}td.n{text-align:right;font-variant-numeric:tabular-nums}
.pass{color:#1a7f37}.fail{color:#c62828}pre{white-space:pre-wrap;margin:.2em 0;
background:#f6f8fa;padding:.4em;border-radius:4px;max-height:20em;overflow:auto}
details{margin:.3em 0}summary{cursor:pointer}
"""


def _e(value: Any) -> str:
    return html.escape(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))


def report_html(report: EvalReport) -> str:
    """The report as one static HTML page (inline style, no script)."""
    usage = report.usage
    cards = [
        ("pass rate", _pct(report.pass_rate)),
        ("runs", f"{report.passed}/{report.runs}"),
        ("score", f"{report.score:.2f}"),
        ("errors", str(report.errors)),
        ("latency p50", f"{report.latency(0.5) * 1000:.1f} ms"),
        ("latency p95", f"{report.latency(0.95) * 1000:.1f} ms"),
        ("tokens in/out", f"{usage.input_tokens}/{usage.output_tokens}"),
    ]
    parts = [
        "<!doctype html><html lang=en><head><meta charset=utf-8>",
        f"<title>eval: {_e(report.name)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{_e(report.name)}</h1><div class=sub>target {_e(report.target)} · started "
        f"{_e(report.started)} · {report.duration:.2f} s · concurrency {report.concurrency}"
        f" · repeats {report.repeats} · cantata {_e(report.cantata)}</div><div class=cards>",
        *(f"<div class=card>{_e(k)}<b>{_e(v)}</b></div>" for k, v in cards),
        "</div><h2>Evaluators</h2><table><tr><th>evaluator<th>pass rate<th>score<th>runs</tr>",
    ]
    for ev in report.evaluators().values():
        parts.append(
            f"<tr><td>{_e(ev.evaluator)}<td class=n>{_pct(ev.pass_rate)}"
            f"<td class=n>{ev.score:.2f}<td class=n>{ev.runs}</tr>"
        )
    parts.append("</table><h2>Cases</h2><table><tr><th>case<th>passed<th>score"
                 "<th>latency<th>failures</tr>")  # fmt: skip
    for c in report.cases().values():
        parts.append(_case_row(c))
    parts.append("</table><h2>Failed runs</h2>")
    failed = report.failures()
    if not failed:
        parts.append("<p class=pass>Every run passed.</p>")
    for r in failed:
        parts.append(
            f"<details><summary><b>{_e(r.case)}</b> (repeat {r.repeat}): "
            f"{_e(_short('; '.join(r.failures), 160))}</summary>"
            f"<div>input</div><pre>{_e(r.input)}</pre>"
            f"<div>expected</div><pre>{_e(r.expected)}</pre>"
            f"<div>output</div><pre>{_e(r.output)}</pre>"
            + (f"<div>tool calls</div><pre>{_e([c.name for c in r.tool_calls])}</pre>"
               if r.tool_calls else "")
            + "".join(
                f"<div class={'pass' if s.passed else 'fail'}>{_e(s.evaluator)} "
                f"{s.score:.2f} {_e(s.reason)}</div>"
                for s in r.scores
            )
            + "</details>"
        )  # fmt: skip
    parts.append("</body></html>\n")
    return "".join(parts)


def _case_row(c: CaseSummary) -> str:
    cls = "pass" if c.pass_rate == 1 else "fail"
    return (
        f"<tr><td>{_e(c.case)}<td class='n {cls}'>{c.passed}/{c.runs}<td class=n>{c.score:.2f}"
        f"<td class=n>{c.latency * 1000:.1f} ms<td>{_e(_short('; '.join(c.failures), 200))}</tr>"
    )
