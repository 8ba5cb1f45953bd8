"""Check the benchmark tables of docs/benchmarks.md against a run: flag every row more than
25% away.

python benchmarks/check_readme.py                      # read benchmarks/results/latest.json
python benchmarks/check_readme.py --results run.json   # a results file of benchmarks/run.py
python benchmarks/check_readme.py --run                # rerun: run.py --repeat 5, then check
python benchmarks/check_readme.py --run --only teams   # rerun some modules (run.py's --only)

Each table row (``| NAME | workload | peer | ratio, median / worst | goal |``) is matched to
the result row of module NAME whose peer the peer cell names and whose name shares the most
words with the workload ("the same" repeats the row above); its median ratio is compared
with the table's. Rows whose figure is no ratio (bytes, added milliseconds, a flatness
quotient) and rows no result matches are listed as not checked. Exits 1 when a row is off
by more than the tolerance, or when the results hold nothing to check.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TABLES = HERE.parent / "docs" / "benchmarks.md"
TOLERANCE = 0.25

_RATIO = re.compile(r"^\s*(\d+(?:\.\d+)?)x\b")
_WORD = re.compile(r"[a-z0-9]+")
_NOISE = frozenset({"a", "an", "the", "of", "to", "and", "with", "same", "in", "one", "x"})


@dataclass(frozen=True, slots=True)
class TableRow:
    """One line of a benchmark table."""

    line: int
    module: str
    workload: str
    peer: str
    ratio: float | None
    """The median ratio the table claims (None: the figure is not a ratio)."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """A table row against the run: `measured` is the run's median ratio (None: no match,
    and `why` says why)."""

    row: TableRow
    measured: float | None
    matched: str | None
    why: str = ""

    @property
    def off_by(self) -> float | None:
        """How far the run is from the table, as a fraction of the table's figure."""
        if self.row.ratio is None or self.measured is None or self.row.ratio == 0:
            return None
        return self.measured / self.row.ratio - 1

    def flagged(self, tolerance: float = TOLERANCE) -> bool:
        off = self.off_by
        return off is not None and abs(off) > tolerance


def table_rows(readme: str) -> list[TableRow]:
    """The rows of every table headed ``| NAME | workload | peer | ratio...``."""
    rows: list[TableRow] = []
    inside = False
    base = ""  # the workload "the same" refers to: the last row that named its own
    for number, text in enumerate(readme.splitlines(), start=1):
        if text.startswith("| NAME | workload | peer |"):
            inside = True
            continue
        if not inside:
            continue
        if not text.startswith("|"):
            inside = False  # the table ended; another may follow
            continue
        cells = [c.strip() for c in text.strip().strip("|").split("|")]
        if len(cells) < 4 or set(cells[0]) <= {"-", " "}:
            continue
        workload = cells[1]
        if workload.lower().startswith("the same"):
            workload = f"{base}{workload[len('the same') :]}"
        else:
            base = workload
        match = _RATIO.match(cells[3])
        rows.append(
            TableRow(number, cells[0], workload, cells[2], float(match.group(1)) if match else None)
        )
    return rows


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower().replace(",", "")) if w not in _NOISE}


def _module_of(result: Mapping[str, Any], known: set[str]) -> str | None:
    """The benchmark module a result row comes from: recorded by run.py, else the prefix
    of its name before a colon when that names a module of the table; None when unknown
    (a results file from before run.py recorded it, and a name with no such prefix)."""
    module = result.get("module")
    if module:
        return str(module)
    name = str(result.get("name", ""))
    prefix, colon, _ = name.partition(":")
    return prefix if colon and prefix in known else None


def _match(
    row: TableRow, results: Sequence[Mapping[str, Any]], known: set[str]
) -> Mapping[str, Any] | None:
    """The result row `row` stands for: its module (or one not known), a peer the cell
    names, the most words in common."""
    peer_cell = row.peer.lower()
    wanted = _words(row.workload)
    best: tuple[float, Mapping[str, Any]] | None = None
    for result in results:
        module = _module_of(result, known)
        name = str(result.get("name", ""))
        peer = str(result.get("peer_name") or "").lower()
        if module not in (row.module, None) or not peer or peer not in peer_cell:
            continue
        have = _words(name.removeprefix(f"{row.module}:"))
        score = len(wanted & have) / max(1, len(wanted | have))
        if best is None or score > best[0]:
            best = (score, result)
    return best[1] if best is not None and best[0] >= 0.3 else None


def compare(rows: Iterable[TableRow], results: Sequence[Mapping[str, Any]]) -> list[Verdict]:
    """Each table row with the run's median ratio for it."""
    rows = list(rows)
    known = {row.module for row in rows}
    verdicts = []
    modules = {_module_of(r, known) for r in results}
    for row in rows:
        if row.ratio is None:
            verdicts.append(Verdict(row, None, None, "its figure is no ratio"))
            continue
        if row.module not in modules and None not in modules:
            verdicts.append(Verdict(row, None, None, "the run has no such module"))
            continue
        found = _match(row, results, known)
        ratio = found.get("ratio", {}).get("median") if found is not None else None
        if found is None or not isinstance(ratio, int | float):
            verdicts.append(Verdict(row, None, None, "no row of the run matches it"))
            continue
        verdicts.append(Verdict(row, float(ratio), str(found["name"])))
    return verdicts


def report(
    verdicts: Sequence[Verdict], tolerance: float = TOLERANCE, source: str = "docs/benchmarks.md"
) -> tuple[str, int]:
    """The text to print and the number of rows flagged."""
    lines = []
    flagged = 0
    for v in verdicts:
        where = f"{source}:{v.row.line} {v.row.module} | {v.row.workload} | {v.row.peer}"
        if v.off_by is None:
            lines.append(f"not checked  {where} ({v.why or 'no figure'})")
            continue
        bad = v.flagged(tolerance)
        flagged += bad
        lines.append(
            f"{'OFF' if bad else 'ok':<11}  {where}: table {v.row.ratio:g}x, run "
            f"{v.measured:.2f}x ({v.off_by:+.0%})"
        )
    return "\n".join(lines), flagged


def _rerun(repeat: int, only: Sequence[str]) -> Path:
    out = Path(tempfile.mkdtemp(prefix="cantata-bench-")) / "results.json"
    command = [sys.executable, str(HERE / "run.py"), "--repeat", str(repeat), "--json", str(out)]
    command += [arg for name in only for arg in ("--only", name)]
    subprocess.run(command, check=True)  # our own script, no shell
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--results", type=Path, default=HERE / "results" / "latest.json")
    parser.add_argument("--run", action="store_true", help="rerun benchmarks/run.py first")
    parser.add_argument("--repeat", type=int, default=5, help="runs of each with --run")
    parser.add_argument(
        "--only", action="append", default=[], help="with --run: these modules (run.py's)"
    )
    parser.add_argument(
        "--tables", "--readme", type=Path, default=TABLES, help="the page the tables are on"
    )
    parser.add_argument("--tolerance", type=float, default=TOLERANCE)
    args = parser.parse_args(argv)
    path = _rerun(args.repeat, args.only) if args.run else args.results
    data = json.loads(path.read_text(encoding="utf-8"))
    verdicts = compare(table_rows(args.tables.read_text(encoding="utf-8")), data["rows"])
    text, flagged = report(verdicts, args.tolerance, args.tables.name)
    print(f"results: {path} (time {data.get('time')}, commit {data.get('commit')})")
    if data.get("quick"):
        print("note: a --quick run (smaller workloads); the table comes from full runs")
    print(text)
    checked = sum(v.off_by is not None for v in verdicts)
    print(f"{checked} row(s) checked, {flagged} more than {args.tolerance:.0%} away")
    return 1 if flagged or not checked else 0


if __name__ == "__main__":
    sys.exit(main())
