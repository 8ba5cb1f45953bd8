"""examples/handoff_triage.py runs: on a scripted model (routing checked exactly) and on the
embedded model (triage hands off to a real specialist and the run reaches its end)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from cantata.core import Message
from cantata.models import ChatOptions, ScriptedChatClient, tool_call
from cantata.teams.handoff import handoff_of

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "handoff_triage.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("handoff_triage_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _play(messages: list[Message], options: ChatOptions) -> Any:
    """Plays the three agents; who is asking is read from the system message."""
    system, last = messages[0].text, messages[-1]
    if last.role == "tool":
        return f"Invoice: {last.function_results[0].result}"
    if "front desk" in system:
        return [tool_call("transfer_to_billing", {"summary": "asks about INV-7"})]
    if "billing specialist" in system:
        return [tool_call("lookup_invoice", {"invoice_id": "INV-7"})]
    raise AssertionError(f"unexpected request for {system!r}")


async def test_triage_hands_off_and_the_specialist_answers(capsys: Any) -> None:
    result = await _load().main("How much is INV-7?", ScriptedChatClient(_play))
    assert result.messages[-1].author_name == "billing"
    assert result.messages[-1].text == "Invoice: 49.00 EUR, paid on 2026-11-02"
    assert result.stop_message is not None and result.stop_message.source == "user_input"
    printed = capsys.readouterr().out
    assert "-> billing (triage handed off: asks about INV-7)" in printed


@pytest.mark.local_model
async def test_on_the_local_model_triage_hands_off_to_a_specialist() -> None:
    from cantata.models import LocalChatClient
    from cantata.teams.events import RoutingEvent
    from cantata.teams.result import TaskResult

    team = _load().build_team(LocalChatClient())
    items = [item async for item in team.run_stream("How much is invoice INV-7?")]
    routes = [i for i in items if isinstance(i, RoutingEvent)]
    result = items[-1]
    assert isinstance(result, TaskResult)
    assert routes[0].choice == "triage"
    assert len(routes) >= 2 and routes[1].choice in {"billing", "tech_support"}
    assert all(r.choice in team.participant_names for r in routes)
    handoffs = [h for m in result.messages if (h := handoff_of(m)) is not None]
    assert handoffs and handoffs[0].source == "triage"
    assert handoffs[0].target == routes[1].choice
    # a real end: the specialist answered and the team asks the user (or hit its limit)
    assert result.stop_message is not None
    assert result.stop_message.source in {"user_input", "max_turns"}
    assert result.messages[-1].author_name in {"billing", "tech_support"}
