"""Run the benchmarks, print one table, write JSON.

python benchmarks/run.py                 # everything
python benchmarks/run.py --quick         # smaller workloads
python benchmarks/run.py --only runtime  # modules whose name contains "runtime"
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import platform
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _harness import Row  # noqa: E402


def _modules(only: list[str]) -> list[str]:
    names = sorted(p.stem for p in HERE.glob("bench_*.py"))
    return [n for n in names if not only or any(o in n for o in only)]


async def _collect(names: list[str], quick: bool, console: Console) -> list[Row]:
    rows: list[Row] = []
    for name in names:
        console.print(f"[dim]running {name} ...[/dim]")
        module = importlib.import_module(name)
        rows.extend(await module.collect(quick))
    return rows


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.1f}" if value >= 100 else f"{value:,.3g}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller workloads")
    parser.add_argument("--only", action="append", default=[], help="substring of module names")
    parser.add_argument("--json", type=Path, default=HERE / "results" / "latest.json")
    parser.add_argument("--markdown", type=Path, help="also write the table as Markdown here")
    args = parser.parse_args()
    console = Console(width=None if sys.stdout.isatty() else 160)
    rows = asyncio.run(_collect(_modules(args.only), args.quick, console))

    table = Table(title="cantata benchmarks (ratio > 1: cantata is better)")
    for col in ("benchmark", "unit", "cantata", "peer", "peer figure", "ratio", "goal"):
        table.add_column(col)
    for row in rows:
        peer = f"{row.peer_name} {row.peer_version or ''}".strip() if row.peer_name else "-"
        ratio = f"{row.ratio:.2f}x" if row.ratio is not None else "-"
        table.add_row(
            row.name, row.unit, _fmt(row.ours), peer, _fmt(row.peer), ratio, row.goal or ""
        )
    console.print(table)

    args.json.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "quick": args.quick,
        "rows": [r.to_dict() for r in rows],
    }
    args.json.write_text(json.dumps(report, indent=2))
    console.print(f"[dim]wrote {args.json}[/dim]")
    if args.markdown:
        args.markdown.write_text(_markdown(rows))
        console.print(f"[dim]wrote {args.markdown}[/dim]")


def _markdown(rows: list[Row]) -> str:
    lines = [
        "| benchmark | unit | cantata | peer | peer figure | ratio | goal |",
        "| --- | --- | ---: | --- | ---: | ---: | --- |",
    ]
    for row in rows:
        peer = f"{row.peer_name} {row.peer_version or ''}".strip() if row.peer_name else "-"
        ratio = f"{row.ratio:.2f}x" if row.ratio is not None else "-"
        lines.append(
            f"| {row.name} | {row.unit} | {_fmt(row.ours)} | {peer} | {_fmt(row.peer)} "
            f"| {ratio} | {row.goal or ''} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
