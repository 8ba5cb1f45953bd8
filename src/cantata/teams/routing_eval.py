"""Routing evaluation: how well a selector or handoff team sends tasks to the right member.

Give a team and labelled tasks (the task, and the participant that should take it); each
task runs in a fresh session of the team, and the team's own `RoutingEvent`s say what
happened. The report gives, per task and overall:

- choice accuracy: the routed participant is the expected one. The routed participant is
  the choice of the first decision that had more than one candidate (a selector's first
  pick; a handoff team's first handoff, since its start agent is not a choice); a run
  that never made such a decision routed nowhere, which counts as wrong;
- fallback rate: the share of all decisions taken by a fallback instead of the model;
- average turns: decisions (turns given) per run;
- early and late termination: a run ends early when it stops, by its own rule, before the
  expected participant took a turn (or in fewer turns than the label's `turns`); it ends
  late when a limit stopped it (``max_turns``, ``max_rounds``, ``max_stalls``) or it
  took more turns than the label's `turns`.

A task whose run fails counts as wrong and is reported with its error, so one bad task
does not hide the others' figures.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from ..core import CantataError, ConfigurationError
from .events import RoutingEvent
from .result import TaskResult
from .team import Team

__all__ = [
    "LIMIT_SOURCES",
    "LabelledTask",
    "RoutingReport",
    "TaskOutcome",
    "evaluate_routing",
    "first_real_choice",
]

LIMIT_SOURCES = frozenset({"max_turns", "max_rounds", "max_stalls"})
"""Stop sources that mean a limit, not the team's own judgement, ended the run."""

Ending = Literal["early", "late", "on_time", "failed"]
ChoiceRule = Callable[[Sequence[RoutingEvent]], RoutingEvent | None]


@dataclass(frozen=True, slots=True)
class LabelledTask:
    """A task, the participant that should take it, and optionally how many turns the
    run should take."""

    task: str
    expected: str
    turns: int | None = None


@dataclass(slots=True)
class TaskOutcome:
    """What happened to one labelled task."""

    task: LabelledTask
    chosen: str | None
    decisions: list[RoutingEvent] = field(default_factory=list)
    stop_source: str | None = None
    ending: Ending = "on_time"
    error: str | None = None

    @property
    def correct(self) -> bool:
        """The routed participant is the expected one."""
        return self.chosen == self.task.expected

    @property
    def turns(self) -> int:
        """Turns given in the run (one per routing decision)."""
        return len(self.decisions)

    @property
    def fallbacks(self) -> int:
        """Decisions a fallback took."""
        return sum(1 for d in self.decisions if d.fallback_used)


@dataclass(slots=True)
class RoutingReport:
    """The outcomes of a labelled set, and the figures over all of them."""

    outcomes: list[TaskOutcome]

    @property
    def accuracy(self) -> float:
        """Share of tasks routed to the expected participant."""
        return _share(sum(o.correct for o in self.outcomes), len(self.outcomes))

    @property
    def fallback_rate(self) -> float:
        """Share of all routing decisions a fallback took."""
        decisions = sum(o.turns for o in self.outcomes)
        return _share(sum(o.fallbacks for o in self.outcomes), decisions)

    @property
    def average_turns(self) -> float:
        """Turns per run."""
        return _share(sum(o.turns for o in self.outcomes), len(self.outcomes))

    @property
    def early_rate(self) -> float:
        """Share of runs that ended early."""
        return _share(sum(o.ending == "early" for o in self.outcomes), len(self.outcomes))

    @property
    def late_rate(self) -> float:
        """Share of runs that ended late."""
        return _share(sum(o.ending == "late" for o in self.outcomes), len(self.outcomes))

    @property
    def failed(self) -> int:
        """Runs that raised."""
        return sum(o.ending == "failed" for o in self.outcomes)

    def as_table(self) -> str:
        """A plain-text table: one line per task, then the totals."""
        lines = ["expected        chosen          turns fallbacks ending   task"]
        for o in self.outcomes:
            lines.append(
                f"{o.task.expected[:15]:<15} {str(o.chosen)[:15]:<15} {o.turns:>5} "
                f"{o.fallbacks:>9} {o.ending:<8} {o.task.task[:40]}"
            )
        lines.append(
            f"accuracy {self.accuracy:.0%}, fallback rate {self.fallback_rate:.0%}, "
            f"average turns {self.average_turns:.2f}, early {self.early_rate:.0%}, "
            f"late {self.late_rate:.0%}, failed {self.failed}"
        )
        return "\n".join(lines)


def _share(part: float, whole: float) -> float:
    return part / whole if whole else 0.0


def first_real_choice(decisions: Sequence[RoutingEvent]) -> RoutingEvent | None:
    """The first decision that had more than one candidate."""
    return next((d for d in decisions if len(d.candidates) > 1), None)


def _ending(task: LabelledTask, decisions: list[RoutingEvent], source: str | None) -> Ending:
    turns = len(decisions)
    if source in LIMIT_SOURCES or (task.turns is not None and turns > task.turns):
        return "late"
    reached = any(d.choice == task.expected for d in decisions)
    if not reached or (task.turns is not None and turns < task.turns):
        return "early"
    return "on_time"


async def _one(team: Team, task: LabelledTask, rule: ChoiceRule) -> TaskOutcome:
    decisions: list[RoutingEvent] = []
    result: TaskResult | None = None
    session = team.create_session()
    try:
        async for item in session.run_stream(task.task):
            if isinstance(item, RoutingEvent):
                decisions.append(item)
            elif isinstance(item, TaskResult):
                result = item
    except CantataError as exc:
        choice = rule(decisions)
        return TaskOutcome(
            task, choice.choice if choice else None, decisions, None, "failed", str(exc)
        )
    finally:
        await session.close()
    choice = rule(decisions)
    source = result.stop_message.source if result and result.stop_message else None
    return TaskOutcome(
        task, choice.choice if choice else None, decisions, source, _ending(task, decisions, source)
    )


async def evaluate_routing(
    team: Team,
    tasks: Sequence[LabelledTask],
    *,
    concurrency: int = 1,
    choice: ChoiceRule = first_real_choice,
) -> RoutingReport:
    """Run every labelled task in a fresh session of `team` and report the routing.

    `concurrency` runs that many tasks at once (a local model serves one request at a
    time, so 1 suits it); `choice` picks the decision that counts as the routing.
    """
    if not tasks:
        raise ConfigurationError("evaluate_routing needs at least one labelled task")
    names = set(team.participant_names)
    for t in tasks:
        if not isinstance(t, LabelledTask):
            raise ConfigurationError(f"expected LabelledTask items, got {t!r}")
        if t.expected not in names:
            raise ConfigurationError(
                f"labelled task {t.task[:40]!r} expects {t.expected!r}, which is not a "
                f"participant of team {team.name!r}; participants are {sorted(names)}"
            )
    if not isinstance(concurrency, int) or concurrency < 1:
        raise ConfigurationError(f"concurrency must be a positive int, got {concurrency!r}")
    gate = asyncio.Semaphore(concurrency)

    async def bounded(t: LabelledTask) -> TaskOutcome:
        async with gate:
            return await _one(team, t, choice)

    return RoutingReport(list(await asyncio.gather(*(bounded(t) for t in tasks))))
