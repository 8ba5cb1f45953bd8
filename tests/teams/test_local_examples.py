"""The group chat examples run to a real end on the embedded model (marker local_model)."""

from __future__ import annotations

import importlib.util
import itertools
import sys
from pathlib import Path
from types import ModuleType

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.local_model
async def test_writer_and_critic_take_turns_until_approve_or_eight_messages() -> None:
    result = await _example("writer_critic").main()
    assert result.stop_message is not None
    authors = [m.author_name for m in result.messages]
    assert authors[0] == "user"
    assert authors[1:] == (["writer", "critic"] * 4)[: len(authors) - 1]  # round robin
    assert all(m.text.strip() for m in result.messages)
    approved = "APPROVE" in result.messages[-1].text and authors[-1] == "critic"
    assert approved or len(result.messages) == 8, result.stop_reason
    assert result.stop_message.source in ("TextMention", "MaxMessage")


@pytest.mark.local_model
async def test_the_local_selector_always_names_a_real_participant() -> None:
    result, routes = await _example("selector_chat").main()
    names = {"planner", "cook", "weather"}
    assert len(routes) == 4
    assert all(r.choice in names and r.choice in r.candidates for r in routes)
    assert not any(r.fallback_used for r in routes)  # the grammar made every answer valid
    # allow_repeat=False: nobody speaks twice in a row
    assert all(x.choice != y.choice for x, y in itertools.pairwise(routes))
    assert [m.author_name for m in result.messages[1:]] == [r.choice for r in routes]
    assert result.stop_message is not None and result.stop_message.source == "max_turns"
