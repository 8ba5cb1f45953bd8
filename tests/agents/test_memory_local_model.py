"""Long-term memory end to end on the embedded parts only: a fact kept in one conversation
(as the `remember` tool keeps it) is embedded by the WordLlama model; in a new thread, on
another store object over the same SQLite file, the agent on the local chat model recalls
it by hybrid search and answers from it. Nothing leaves the machine.

Extraction by the local model is not used here: SmolLM2-135M's structured answer to the
extraction prompt runs on past its token budget (invalid JSON) and takes minutes on a busy
machine; the provider then fails the run clearly, which the scripted tests cover."""

from __future__ import annotations

from pathlib import Path

import pytest

from cantata.agents import ChatAgent, Memory, MemoryProvider
from cantata.models import ChatOptions
from cantata.stores import SQLiteItemStore

from ..conftest import require_module

pytestmark = pytest.mark.local_model

SCOPE = ("user", "{user_id}", "facts")


async def test_the_local_model_recalls_a_fact_from_an_earlier_thread(tmp_path: Path) -> None:
    require_module("llama_cpp", "pip install 'cantata[local]'")
    require_module("wordllama", "pip install 'cantata[local]'")
    from cantata.models import LocalChatClient
    from cantata.models.embeddings import LocalEmbeddingClient

    model = LocalChatClient()
    path = tmp_path / "memory.db"
    async with SQLiteItemStore(path) as store:  # the earlier conversation
        memory = Memory(store, LocalEmbeddingClient(), SCOPE)
        await memory.remember(("user", "u1", "facts"), "The user's cat is called Pixel.")
        await memory.remember(("user", "u1", "facts"), "The user lives in Lyon.")

    async with SQLiteItemStore(path) as store:  # what another process would open
        memory = Memory(store, LocalEmbeddingClient(), SCOPE)
        agent = ChatAgent(
            model,
            instructions="Answer in a few words, using what you remember about the user.",
            options=ChatOptions(temperature=0.0, max_tokens=16),
            context_providers=[MemoryProvider(memory, limit=1)],
        )
        answer = await agent.run("What is my cat called?", tool_kwargs={"user_id": "u1"})
        other = await memory.recall(memory.namespace({"user_id": "u2"}), "What is my cat called?")
    assert answer.context[0].instructions == [
        "What you remember about the user:\n- The user's cat is called Pixel."
    ]
    assert "pixel" in answer.text.lower(), answer.text
    assert other == []
