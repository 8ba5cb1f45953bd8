"""A chat agent spec names its memory and knowledge: the spec loads into an agent with a
MemoryProvider that learns with the agent's own model and a KnowledgeProvider that
ingests its files before the first run; the config round-trips; bad fields are typed."""

from __future__ import annotations

from pathlib import Path

import pytest

from cantata.agents import ChatAgent, KnowledgeProvider, MemoryProvider
from cantata.declarative import SpecError, from_config, load, to_config

SPEC = """
version: 1
type: chat_agent
name: concierge
model:
  api: scripted
  connection:
    script:
      - "Noted."
      - '{"operations": [{"op": "add", "fact": "The guest is vegan."}]}'
      - "Our vegan menu is on page two [1]."
      - '{"operations": []}'
memory:
  store: sqlite:///DIR/memory.db
  scope: [guest, "{guest_id}"]
knowledge:
  store: sqlite:///DIR/kb.db
  collection: [hotel]
  files: [DIR/menu.md]
  limit: 1
"""

MENU = "# Breakfast\n\nServed from seven.\n\n# Vegan menu\n\nPage two lists vegan dishes.\n"


async def test_a_spec_with_memory_and_knowledge(tmp_path: Path) -> None:
    (tmp_path / "menu.md").write_text(MENU, encoding="utf-8")
    path = tmp_path / "concierge.yaml"
    path.write_text(SPEC.replace("DIR", str(tmp_path)), encoding="utf-8")
    agent = load(str(path))
    assert isinstance(agent, ChatAgent)
    memory, knowledge = agent.context_providers
    assert isinstance(memory, MemoryProvider) and memory.extractor is agent.client
    assert isinstance(knowledge, KnowledgeProvider)
    async with agent:
        await agent.run("I am vegan.", tool_kwargs={"guest_id": "g7"})
        answer = await agent.run("What can I eat?", tool_kwargs={"guest_id": "g7"})
        assert answer.context[0].instructions == [
            "What you remember about the user:\n- The guest is vegan."
        ]
        (cite,) = answer.citations
        assert cite.heading == "Vegan menu" and cite.document.endswith("menu.md")
        for provider in agent.context_providers:  # each dumps as it was loaded
            config = to_config(provider)
            again = from_config(config)
            assert type(again) is type(provider) and to_config(again) == config
            await again.aclose()


def test_bad_memory_fields_are_spec_errors(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    bad = SPEC.replace("DIR", str(tmp_path)).replace('scope: [guest, "{guest_id}"]', "scope: 3")
    path.write_text(bad, encoding="utf-8")
    with pytest.raises(SpecError, match="scope"):
        load(str(path))


async def test_a_provider_built_in_code_does_not_dump_silently() -> None:
    from cantata.agents import Memory
    from cantata.models.embeddings import HashEmbeddingClient
    from cantata.stores import InMemoryItemStore

    memory = Memory(InMemoryItemStore(), HashEmbeddingClient(), ("u",))
    with pytest.raises(SpecError, match="built in code"):
        to_config(MemoryProvider(memory))
