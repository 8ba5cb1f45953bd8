"""The manager's team events: made for a streamed run (its reader), not for a plain one."""

from __future__ import annotations

from typing import Any

import pytest

from cantata.teams import GroupChat, RoutingEvent, TaskResult, TeamMessageEvent
from cantata.teams import manager as manager_module

from ._agents import counting_agent


def _count_made(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record every routing and message event the manager makes (a spy on the real ones)."""
    made: list[str] = []

    class Routing(RoutingEvent):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            made.append("routing")
            super().__init__(*args, **kwargs)

    class Shown(TeamMessageEvent):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            made.append("message")
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(manager_module, "RoutingEvent", Routing)
    monkeypatch.setattr(manager_module, "TeamMessageEvent", Shown)
    return made


async def test_a_plain_run_makes_no_team_events(monkeypatch: pytest.MonkeyPatch) -> None:
    made = _count_made(monkeypatch)
    team = GroupChat([counting_agent("a"), counting_agent("b")], max_turns=4)
    result = await team.create_session().run("go")
    assert [m.author_name for m in result.messages] == ["user", "a", "b", "a", "b"]
    assert made == []  # nobody reads the events of run(): none is made


async def test_a_streamed_run_has_every_team_event(monkeypatch: pytest.MonkeyPatch) -> None:
    made = _count_made(monkeypatch)
    team = GroupChat([counting_agent("a"), counting_agent("b")], max_turns=4)
    items = [item async for item in team.create_session().run_stream("go")]
    routes = [i for i in items if isinstance(i, RoutingEvent)]
    shown = [i for i in items if isinstance(i, TeamMessageEvent)]
    assert [r.choice for r in routes] == ["a", "b", "a", "b"]
    assert [r.turn for r in routes] == [1, 2, 3, 4]
    assert [(e.source, e.message.text) for e in shown] == [
        ("user", "go"),
        ("a", "a says 1"),
        ("b", "b says 2"),
        ("a", "a says 3"),
        ("b", "b says 4"),
    ]
    assert sorted(made) == ["message"] * 5 + ["routing"] * 4
    assert isinstance(items[-1], TaskResult)
