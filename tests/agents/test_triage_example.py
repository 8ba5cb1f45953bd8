"""examples/triage.py runs: with a scripted model (routing checked exactly) and on the
embedded model (a specialist is consulted and its tool answers)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from cantata.core import Message
from cantata.models import ChatOptions, ScriptedChatClient, tool_call

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "triage.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("triage_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _route(messages: list[Message], options: ChatOptions) -> Any:
    """Plays all three agents: who is asking is read from the system message."""
    system, last = messages[0].text, messages[-1]
    if last.role == "tool":
        return f"answer: {last.function_results[0].result}"
    if "front desk" in system:
        return [tool_call("tech_support", {"task": last.text})]
    if "tech support" in system:
        return [tool_call("service_status", {"service": "vpn"})]
    raise AssertionError(f"unexpected request for {system!r}")


async def test_triage_routes_to_the_specialist_and_its_tool(capsys: Any) -> None:
    example = _load()
    text = await example.main("Is the VPN down?", ScriptedChatClient(_route))
    assert text == "answer: answer: degraded: high latency in eu-west"
    printed = capsys.readouterr().out
    assert "[triage] calls tech_support" in printed


@pytest.mark.local_model
async def test_triage_on_the_local_model_consults_a_specialist() -> None:
    from cantata.models import LocalChatClient

    triage = _load().build_agents(LocalChatClient())
    response = await triage.run("How much is invoice INV-7?")
    calls = [c.name for m in response.messages for c in m.function_calls]
    results = [r for m in response.messages for r in m.function_results]
    assert calls and calls[0] in {"billing", "tech_support"}
    assert results and not results[0].is_error
    assert response.text
