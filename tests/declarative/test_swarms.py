"""Handoff and magentic teams: specs, configs round trip, a handoff run."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cantata.agents import ChatAgent
from cantata.declarative import SpecError, from_config, load, to_config
from cantata.models import ChatOptions
from cantata.teams import Handoff, HandoffTermination, Magentic, MaxMessage


def _server_agent(name: str) -> ChatAgent:
    from cantata.models import OpenAIChatClient

    client = OpenAIChatClient("m", base_url="http://127.0.0.1:9/v1", api_key="k")
    return ChatAgent(client, name=name, instructions=f"You are {name}.")


def _again(obj: Any) -> Any:
    config = json.loads(json.dumps(to_config(obj)))
    back = from_config(config)
    assert type(back) is type(obj) and to_config(back) == config
    return back


def test_handoff_round_trip() -> None:
    team = Handoff(
        [_server_agent("triage"), _server_agent("billing")],
        handoffs={"triage": ["billing", "user"]},
        termination=HandoffTermination("user") | MaxMessage(6),
        max_turns=9,
        name="desk",
    )
    back = _again(team)
    assert back.targets == team.targets and back.start == "triage" and back.max_turns == 9


def test_magentic_round_trip() -> None:
    from cantata.models import OpenAIChatClient

    manager = OpenAIChatClient("boss", base_url="http://127.0.0.1:9/v1", api_key="k")
    team = Magentic(
        manager,
        [_server_agent("coder"), _server_agent("reader")],
        max_rounds=7,
        max_stalls=2,
        compact_ledgers=True,
        manager_options=ChatOptions(temperature=0.0),
    )
    back = _again(team)
    assert back.limits == team.limits and back.compact_ledgers
    assert back.client.model == "boss"


async def test_handoff_spec_runs_a_transfer() -> None:
    spec = {
        "version": 1,
        "type": "handoff",
        "name": "desk",
        "participants": [
            {"name": "triage", "model": {"api": "scripted", "connection": {"script": [
                {"tool": "transfer_to_billing"}, "sent on"]}}},
            {"name": "billing", "model": {"api": "scripted", "connection": {"script": [
                "invoice INV-7 is paid"]}}},
        ],
        "handoffs": {"triage": ["billing"]},
        "termination": {"max_messages": 3},
    }  # fmt: skip
    team = load(spec)
    assert isinstance(team, Handoff)
    result = await team.run("is INV-7 paid?")
    assert any(m.author_name == "billing" for m in result.messages)
    assert "invoice INV-7 is paid" in [m.text for m in result.messages]


def test_magentic_spec_and_fields_of_other_types() -> None:
    spec = {
        "version": 1,
        "type": "magentic",
        "name": "m",
        "manager": {"api": "scripted"},
        "participants": [{"name": "coder", "model": {"api": "scripted"}}],
        "max_rounds": 4,
    }
    team = load(spec)
    assert isinstance(team, Magentic) and team.limits.max_rounds == 4
    with pytest.raises(SpecError, match="needs a manager"):
        load({k: v for k, v in spec.items() if k != "manager"})
    with pytest.raises(SpecError, match="handoff teams only"):
        load({**spec, "type": "group_chat", "manager": None, "max_rounds": None,
              "handoffs": {"coder": []}})  # fmt: skip
