"""The benchmark harness's summary of several runs (benchmarks/_harness.py)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from _harness import Row, Spread, goal_met, summarize


def _row(
    ours: float, peer: float | None, *, higher_is_better: bool = True, goal: str | None = None
) -> Row:
    return Row(
        "publish",
        "deliveries/s",
        ours,
        peer,
        peer_name="autogen-core",
        higher_is_better=higher_is_better,
        goal=goal,
    )


def test_median_and_worst_pair_each_run_with_its_peer() -> None:
    runs = [[_row(120.0, 10.0, goal=">= 12x")], [_row(100.0, 5.0)], [_row(130.0, 13.0)]]
    (summary,) = summarize(runs)
    assert summary.ours == Spread(120.0, 100.0)
    assert summary.peer == Spread(10.0, 5.0)
    # per-run ratios 12, 20, 10: the worst is 10 even though worst ours / worst peer is 20
    assert summary.ratio == Spread(12.0, 10.0)
    assert summary.met == "median only"
    assert len(summary.runs) == 3


def test_lower_is_better_rows_take_the_highest_as_worst() -> None:
    runs = [
        [_row(v, 600.0, higher_is_better=False, goal="<= 1024 bytes")] for v in (300, 1100, 350)
    ]
    (summary,) = summarize(runs)
    assert summary.ours == Spread(350.0, 1100.0)
    assert summary.ratio.worst == 600.0 / 1100.0
    assert summary.met == "median only"


def test_rows_are_matched_by_name_and_peer_in_first_seen_order() -> None:
    def run(x: float) -> list[Row]:
        return [
            Row("chain", "runs/s", x, 1.0, peer_name="af"),
            Row("chain", "runs/s", x, 2.0, peer_name="lg"),
            Row("memory", "bytes", x, None),
        ]

    summaries = summarize([run(10.0), run(20.0)])
    assert [(s.row.name, s.row.peer_name) for s in summaries] == [
        ("chain", "af"),
        ("chain", "lg"),
        ("memory", None),
    ]
    assert summaries[1].ratio == Spread(7.5, 5.0)
    assert summaries[2].peer == Spread(None, None)
    assert summaries[2].met == ""


def test_goal_parsing() -> None:
    ratio, ours = Spread(13.0, 12.5), Spread(900.0, 1000.0)
    assert goal_met(">= 12x", ratio, ours, True) == "yes"
    assert goal_met(">= 0.33x (within 3x)", ratio, ours, True) == "yes"
    assert goal_met(">= 13x", ratio, ours, True) == "median only"
    assert goal_met(">= 14x", ratio, ours, True) == "no"
    assert goal_met("<= 1,024 bytes", ratio, ours, False) == "yes"
    assert goal_met("flat (~1.0)", ratio, ours, False) == ""
    assert goal_met(None, ratio, ours, True) == ""


def test_goals_joined_by_and_must_all_hold() -> None:
    ratio, ours = Spread(13.0, 12.5), Spread(5_500.0, 4_800.0)
    assert goal_met(">= 5,000 tokens/s and >= 12x", ratio, ours, True) == "median only"
    assert goal_met(">= 4,000 tokens/s and >= 12x", ratio, ours, True) == "yes"
    assert goal_met(">= 4,000 tokens/s and >= 13x", ratio, ours, True) == "median only"
    assert goal_met(">= 6,000 tokens/s and >= 12x", ratio, ours, True) == "no"
    assert goal_met(">= 4,000 tokens/s and >= 14x", ratio, ours, True) == "no"
    assert goal_met(">= 4,000 tokens/s and flat", ratio, ours, True) == ""
