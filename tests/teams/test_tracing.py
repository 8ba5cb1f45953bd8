"""Team spans (OpenTelemetry, in-memory exporter): one ``team_turn {team}`` span per turn
with the speaker's agent span inside it, and one ``route {team}`` span per routing
decision, carrying the candidates, the choice, the reason, whether a fallback chose and
the team run's correlation id (the one its `RoutingEvent`s carry)."""

from __future__ import annotations

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cantata.models import ScriptedChatClient
from cantata.teams import Concurrent, GroupChat, RoundRobin, RoutingEvent, Selector

from ._agents import counting_agent


def named(exporter: InMemorySpanExporter, prefix: str) -> list[ReadableSpan]:
    found = [s for s in exporter.get_finished_spans() if s.name.startswith(prefix)]
    return sorted(found, key=lambda s: s.start_time or 0)


def attrs(span: ReadableSpan) -> dict[str, object]:
    assert span.attributes is not None
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in span.attributes.items()}


async def test_each_turn_and_each_routing_decision_is_a_span(
    spans: InMemorySpanExporter,
) -> None:
    team = GroupChat(
        [counting_agent("a"), counting_agent("b")], speaker=RoundRobin(), max_turns=3, name="duo"
    )
    events = [e async for e in team.create_session().run_stream("go")]
    routes = [e for e in events if isinstance(e, RoutingEvent)]
    run_id = routes[0].correlation_id
    turns = named(spans, "team_turn ")
    assert [s.name for s in turns] == ["team_turn duo"] * 3
    assert [attrs(s) for s in turns] == [
        {
            "cantata.team.name": "duo",
            "cantata.team.turn": n,
            "cantata.team.speaker": speaker,
            "cantata.correlation_id": run_id,
        }
        for n, speaker in [(1, "a"), (2, "b"), (3, "a")]
    ]
    decisions = named(spans, "route ")
    assert [s.name for s in decisions] == ["route duo"] * 3
    assert [attrs(s) for s in decisions] == [
        {
            "cantata.route.candidates": r.candidates,
            "cantata.route.choice": r.choice,
            "cantata.route.reason": r.reason,
            "cantata.route.fallback": r.fallback_used,
            "cantata.correlation_id": run_id,
        }
        for r in routes
    ]
    # the speaker's agent span is a child of its turn's span
    agents = named(spans, "invoke_agent ")
    assert [s.name for s in agents] == ["invoke_agent a", "invoke_agent b", "invoke_agent a"]
    for turn, agent in zip(turns, agents, strict=True):
        assert agent.parent is not None and agent.parent.span_id == turn.context.span_id
    assert len({s.context.trace_id for s in [*turns, *decisions, *agents]}) == 1


async def test_a_fallback_choice_is_marked_on_its_route_span(
    spans: InMemorySpanExporter,
) -> None:
    selector = Selector(ScriptedChatClient(lambda m, o: "nobody"), max_attempts=2)
    agents = [counting_agent("a"), counting_agent("b"), counting_agent("c")]
    team = GroupChat(agents, speaker=selector, max_turns=2)
    events = [e async for e in team.create_session().run_stream("go")]
    routes = [e for e in events if isinstance(e, RoutingEvent)]
    decisions = [attrs(s) for s in named(spans, "route group_chat")]
    assert [d["cantata.route.fallback"] for d in decisions] == [True, True]
    assert [d["cantata.route.candidates"] for d in decisions] == [["a", "b", "c"], ["b", "c"]]
    assert [d["cantata.route.choice"] for d in decisions] == [r.choice for r in routes]
    assert [d["cantata.route.reason"] for d in decisions] == [r.reason for r in routes]


async def test_fresh_turn_participants_get_turn_spans_too(spans: InMemorySpanExporter) -> None:
    team = Concurrent([counting_agent("x"), counting_agent("y")], name="fan")
    await team.create_session().run("go")
    turns = named(spans, "team_turn fan")
    assert sorted(str(attrs(s)["cantata.team.speaker"]) for s in turns) == ["x", "y"]
    assert sorted(int(attrs(s)["cantata.team.turn"]) for s in turns) == [1, 2]  # type: ignore[call-overload]
    agents = {s.name: s for s in named(spans, "invoke_agent ")}
    for turn in turns:
        agent = agents[f"invoke_agent {attrs(turn)['cantata.team.speaker']}"]
        assert agent.parent is not None and agent.parent.span_id == turn.context.span_id
