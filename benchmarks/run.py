"""Run the benchmarks several times, print the median and the worst of every row, write JSON.

python benchmarks/run.py                 # everything, 5 runs of each benchmark
python benchmarks/run.py --quick         # smaller workloads, 3 runs unless --repeat says
python benchmarks/run.py --repeat 7      # 7 runs of each
python benchmarks/run.py --only runtime  # bench_runtime.py (no such module: all containing it)

Each run of a module measures cantata and the peer side by side (see `_harness.py`), so a
row's ratio is taken per run; the table shows the median and the worst of the runs for our
figure, the peer's figure and the ratio, and whether the row's goal holds on both. The JSON
records when (``time``), from which commit (``commit``, ``dirty``) and with which command the
figures were measured; `check_readme.py` compares the tables of docs/benchmarks.md with it.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _harness import Row, Summary, summarize  # noqa: E402

COLUMNS = (
    "benchmark",
    "unit",
    "cantata median",
    "cantata worst",
    "peer",
    "peer median",
    "peer worst",
    "ratio median",
    "ratio worst",
    "goal",
    "met",
)


def _modules(only: list[str]) -> list[str]:
    """The benchmark modules to run: those whose name contains an `--only` value, or, for a
    value that names one module exactly (``teams`` for bench_teams.py), that module alone."""
    names = sorted(p.stem for p in HERE.glob("bench_*.py"))
    exact = {f"bench_{o}" for o in only} & set(names)
    loose = [o for o in only if f"bench_{o}" not in exact]
    return [n for n in names if not only or n in exact or any(o in n for o in loose)]


async def _collect(names: list[str], quick: bool, repeat: int, console: Console) -> list[Summary]:
    summaries: list[Summary] = []
    for name in names:
        module = importlib.import_module(name)
        runs = min(repeat, getattr(module, "MAX_REPEAT", repeat))
        results: list[list[Row]] = []
        for i in range(runs):
            console.print(f"[dim]running {name} ({i + 1}/{runs}) ...[/dim]")
            results.append(await module.collect(quick))
        summaries.extend(summarize(results, name.removeprefix("bench_")))
    return summaries


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.1f}" if value >= 100 else f"{value:,.3g}"


def _times(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _cells(s: Summary) -> list[str]:
    row = s.row
    peer = f"{row.peer_name} {row.peer_version or ''}".strip() if row.peer_name else "-"
    return [
        row.name,
        row.unit,
        _fmt(s.ours.median),
        _fmt(s.ours.worst),
        peer,
        _fmt(s.peer.median),
        _fmt(s.peer.worst),
        _times(s.ratio.median),
        _times(s.ratio.worst),
        row.goal or "",
        s.met,
    ]


def _tables(summaries: list[Summary]) -> list[tuple[str, list[Summary]]]:
    headline = [s for s in summaries if s.row.headline]
    tables = [("headline rows", headline)] if headline else []
    return [*tables, ("all rows", summaries)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller workloads, fewer runs")
    parser.add_argument("--repeat", type=int, help="runs of each benchmark (default 5, quick 3)")
    parser.add_argument("--only", action="append", default=[], help="substring of module names")
    parser.add_argument("--json", type=Path, default=HERE / "results" / "latest.json")
    parser.add_argument("--markdown", type=Path, help="also write the tables as Markdown here")
    args = parser.parse_args()
    repeat = args.repeat if args.repeat is not None else (3 if args.quick else 5)
    if repeat < 1:
        parser.error(f"--repeat must be 1 or more, not {repeat}")
    console = Console(width=None if sys.stdout.isatty() else 200)
    summaries = asyncio.run(_collect(_modules(args.only), args.quick, repeat, console))

    for title, group in _tables(summaries):
        table = Table(
            title=f"cantata benchmarks, {title}: median and worst of {repeat} runs "
            "(ratio > 1: cantata is better)"
        )
        for col in COLUMNS:
            table.add_column(col)
        for s in group:
            table.add_row(*_cells(s))
        console.print(table)

    args.json.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **_source(),
        "command": " ".join(["benchmarks/run.py", *sys.argv[1:]]),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "quick": args.quick,
        "repeat": repeat,
        "rows": [s.to_dict() for s in summaries],
    }
    args.json.write_text(json.dumps(report, indent=2))
    console.print(f"[dim]wrote {args.json}[/dim]")
    if args.markdown:
        args.markdown.write_text(_markdown(summaries))
        console.print(f"[dim]wrote {args.markdown}[/dim]")


def _source() -> dict[str, object]:
    """The commit the benchmarks ran from, and whether the checkout had changes beside it
    (None when this is no git checkout), so a table's figures name what they measured."""

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", "-C", str(HERE), *args], capture_output=True, text=True, timeout=10
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no") if commit else None
    return {"commit": commit, "dirty": None if status is None else bool(status)}


def _markdown(summaries: list[Summary]) -> str:
    lines: list[str] = []
    for title, group in _tables(summaries):
        lines += [
            f"**{title}**",
            "",
            "| " + " | ".join(COLUMNS) + " |",
            "| --- | --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | --- | --- |",
        ]
        lines += ["| " + " | ".join(_cells(s)) + " |" for s in group]
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
