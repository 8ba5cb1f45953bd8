"""`TaskResult.routing`: a run asked for its routing decisions carries them (only its own,
in order, as the stream shows them); by default it carries none; they travel as JSON."""

from __future__ import annotations

import json

from cantata.core import dumps, loads
from cantata.models import ScriptedChatClient
from cantata.teams import GroupChat, Handoff, RoutingEvent, Selector, TaskResult

from ._agents import counting_agent


def _team() -> GroupChat:
    return GroupChat([counting_agent("a"), counting_agent("b")], max_turns=3)


async def test_routing_is_off_by_default() -> None:
    result = await _team().run("go")
    assert result.routing == []


async def test_a_run_asked_for_routing_carries_its_own_decisions() -> None:
    team = _team()
    first = await team.run("go", include_routing=True)
    assert [(r.choice, r.turn, r.reason) for r in first.routing] == [
        ("a", 1, "round robin"),
        ("b", 2, "round robin"),
        ("a", 3, "round robin"),
    ]
    assert len({r.correlation_id for r in first.routing}) == 1
    quiet = await team.run()
    assert quiet.routing == []
    third = await team.run(include_routing=True)
    assert [r.choice for r in third.routing] == ["a", "b", "a"]  # after b, a, b
    assert third.routing[0].correlation_id != first.routing[0].correlation_id


async def test_the_result_holds_what_the_stream_shows() -> None:
    names = iter(["b", "a", "a"])
    selector = Selector(
        ScriptedChatClient(lambda m, o: json.dumps({"speaker": next(names)})), allow_repeat=True
    )
    team = GroupChat([counting_agent("a"), counting_agent("b")], speaker=selector, max_turns=3)
    items = [i async for i in team.run_stream("go", include_routing=True)]
    streamed = [i for i in items if isinstance(i, RoutingEvent)]
    result = items[-1]
    assert isinstance(result, TaskResult)
    assert result.routing == streamed
    assert [r.reason for r in result.routing] == ["chosen by the model"] * 3
    back = loads(dumps(result))  # a result is a workflow output: it is checkpointed
    assert back == result


async def test_a_handoff_run_carries_its_handoffs_and_survives_save_and_load() -> None:
    from cantata.agents import ChatAgent
    from cantata.models import tool_call

    triage = ChatAgent(
        ScriptedChatClient([[tool_call("transfer_to_billing", {"summary": "refund"})]]),
        name="triage",
    )
    billing = ChatAgent(ScriptedChatClient(["refunded", "anything else?"]), name="billing")
    team = Handoff([triage, billing])
    result = await team.run("refund", include_routing=True)
    assert [r.choice for r in result.routing] == ["triage", "billing"]
    assert result.routing[1].reason == "triage handed off: refund"
    state = json.loads(json.dumps(await team.save_state()))
    twin = Handoff([ChatAgent(ScriptedChatClient([]), name="triage"), billing])
    await twin.load_state(state)
    again = await twin.run("more", include_routing=True)
    assert [r.choice for r in again.routing] == ["billing"]
