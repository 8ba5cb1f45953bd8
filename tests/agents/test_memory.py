"""Long-term memory: a fact said in one conversation is recalled in another (another store
object on the same SQLite file, as another process would open it), extraction adds,
updates, deletes and merges duplicates, scopes never cross, the tools keep to the caller's
scope, and a missing scope field refuses the run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cantata.agents import (
    ChatAgent,
    Memory,
    MemoryOperation,
    MemoryProvider,
    MemoryUpdate,
    memory_tools,
)
from cantata.core import Message, UsageError
from cantata.models import ChatOptions, ScriptedChatClient, tool_call
from cantata.models.embeddings import HashEmbeddingClient
from cantata.stores import InMemoryItemStore, open_item_store

SCOPE = ("user", "{user_id}", "facts")


def _system_text(messages: list[Message], options: ChatOptions) -> str:
    """An agent model that answers with the system messages it was given."""
    return " || ".join(m.text for m in messages if m.role == "system")


def _extractor(facts_by_turn: list[MemoryUpdate]) -> ScriptedChatClient:
    return ScriptedChatClient([u.model_dump_json() for u in facts_by_turn])


async def test_a_fact_said_in_one_thread_is_recalled_in_another(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'memory.db'}"
    learned = MemoryUpdate(operations=[MemoryOperation(op="add", fact="The user is vegetarian.")])
    async with open_item_store(url) as store:  # type: ignore[attr-defined]
        memory = Memory(store, HashEmbeddingClient(), SCOPE)
        provider = MemoryProvider(memory, extractor=_extractor([learned]))
        agent = ChatAgent(ScriptedChatClient(["Noted."]), context_providers=[provider])
        await agent.run("I am vegetarian.", tool_kwargs={"user_id": "ada"})
    # later, another store object on the file (what another process opens), a new thread
    async with open_item_store(url) as store:  # type: ignore[attr-defined]
        memory = Memory(store, HashEmbeddingClient(), SCOPE)
        agent = ChatAgent(
            ScriptedChatClient(_system_text),
            instructions="You plan dinners.",
            context_providers=[MemoryProvider(memory)],
        )
        answer = await agent.run("Plan a vegetarian dinner.", tool_kwargs={"user_id": "ada"})
        assert "The user is vegetarian." in answer.text
        assert answer.context[0].instructions == [
            "What you remember about the user:\n- The user is vegetarian."
        ]
        other = await agent.run("Plan a vegetarian dinner.", tool_kwargs={"user_id": "bob"})
        assert "vegetarian." not in other.text.split("||")[-1]
        assert other.context[0].instructions == []


async def test_extraction_updates_deletes_and_merges_duplicates() -> None:
    store = InMemoryItemStore()
    memory = Memory(store, HashEmbeddingClient(), SCOPE)
    ns = memory.namespace({"user_id": "ada"})
    key = await memory.remember(ns, "The user lives in Oslo.")
    await memory.remember(ns, "The user likes tea.")
    update = MemoryUpdate(
        operations=[
            MemoryOperation(op="update", key=key, fact="The user lives in Bergen."),
            MemoryOperation(op="add", fact="The user likes tea."),  # said again: merged
            MemoryOperation(op="add", fact="The user has a cat."),
        ]
    )
    provider = MemoryProvider(memory, extractor=_extractor([update]))
    agent = ChatAgent(ScriptedChatClient(["ok"]), context_providers=[provider])
    await agent.run(
        "I moved to Bergen, I like tea, and I got a cat.", tool_kwargs={"user_id": "ada"}
    )
    facts = sorted(f.text for f in await memory.facts(ns))
    assert facts == ["The user has a cat.", "The user likes tea.", "The user lives in Bergen."]
    # what the extractor was shown: the known facts with their keys, and the turn
    request = provider.extractor.calls[0].messages  # type: ignore[union-attr]
    assert f"{key}: The user lives in Oslo." in request[0].text
    assert "user: I moved to Bergen" in request[1].text
    forget = MemoryUpdate(operations=[MemoryOperation(op="delete", key=key)])
    assert await memory.apply(ns, forget) == [key]
    assert len(await memory.facts(ns)) == 2


async def test_background_extraction_is_drained() -> None:
    memory = Memory(InMemoryItemStore(), HashEmbeddingClient(), SCOPE)
    update = MemoryUpdate(operations=[MemoryOperation(op="add", fact="The user is left-handed.")])
    provider = MemoryProvider(memory, extractor=_extractor([update]), wait=False)
    agent = ChatAgent(ScriptedChatClient(["ok"]), context_providers=[provider])
    await agent.run("I am left-handed.", tool_kwargs={"user_id": "u"})
    await provider.drain(timeout=5)
    assert [f.text for f in await memory.facts(("user", "u", "facts"))] == [
        "The user is left-handed."
    ]


async def test_a_missing_scope_field_refuses_the_run() -> None:
    model = ScriptedChatClient(["never"])
    memory = Memory(InMemoryItemStore(), HashEmbeddingClient(), SCOPE)
    agent = ChatAgent(model, context_providers=[MemoryProvider(memory)])
    with pytest.raises(Exception, match="needs 'user_id'"):
        await agent.run("hi")
    assert model.calls == []
    with pytest.raises(UsageError, match="non-empty tuple"):
        Memory(InMemoryItemStore(), HashEmbeddingClient(), "user")


async def test_tools_keep_to_the_callers_scope() -> None:
    memory = Memory(InMemoryItemStore(), HashEmbeddingClient(), SCOPE)
    script = ScriptedChatClient(
        [
            [tool_call("remember", {"fact": "Ada's locker is 12."}, call_id="a")],
            "Saved.",
            [tool_call("recall", {"query": "locker"}, call_id="b")],
            "Found it.",
            [tool_call("recall", {"query": "locker"}, call_id="c")],
            "Nothing.",
        ]
    )
    agent = ChatAgent(script, tools=memory_tools(memory))
    await agent.run("Remember my locker is 12.", tool_kwargs={"user_id": "ada"})
    ada = await agent.run("Which locker?", tool_kwargs={"user_id": "ada"})
    bob = await agent.run("Which locker?", tool_kwargs={"user_id": "bob"})
    ada_result = next(
        c
        for m in ada.messages
        for c in m.contents
        if getattr(c, "call_id", "") == "b" and hasattr(c, "result")
    )
    bob_result = next(
        c
        for m in bob.messages
        for c in m.contents
        if getattr(c, "call_id", "") == "c" and hasattr(c, "result")
    )
    assert "Ada's locker is 12." in str(ada_result.result)
    assert bob_result.result == "nothing remembered"
    # the scope is not a tool parameter: the model can neither see nor set it
    schema = json.dumps([t.parameters for t in memory_tools(memory)])
    assert "user_id" not in schema and "context" not in schema


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["u1", "u2", "u3"]), st.sampled_from(["tea", "cats", "rain"])),
        min_size=1,
        max_size=12,
    )
)
def test_scopes_never_cross(writes: list[tuple[str, str]]) -> None:
    import asyncio

    async def check() -> None:
        memory = Memory(InMemoryItemStore(), HashEmbeddingClient(), SCOPE)
        for user, topic in writes:
            await memory.remember(memory.namespace({"user_id": user}), f"{user} likes {topic}")
        for user in ("u1", "u2", "u3"):
            agent = ChatAgent(
                ScriptedChatClient(_system_text), context_providers=[MemoryProvider(memory)]
            )
            for topic in ("tea", "cats", "rain"):
                answer = await agent.run(f"likes {topic}", tool_kwargs={"user_id": user})
                recalled: Any = answer.context[0].instructions
                for text in recalled:
                    for line in text.splitlines()[1:]:
                        assert line.startswith(f"- {user} likes"), (user, line)
                said = {t for u, t in writes if u == user}
                if topic in said:
                    assert any(f"{user} likes {topic}" in t for t in recalled)

    asyncio.run(check())


async def test_a_memory_write_in_a_durable_run_is_written_once_across_a_crash() -> None:
    from cantata.core import WorkflowError
    from cantata.workflows import (
        InMemoryCheckpointStore,
        WorkflowBuilder,
        WorkflowContext,
        executor,
    )

    memory = Memory(InMemoryItemStore(), HashEmbeddingClient(), SCOPE)
    crash = [True]

    @executor
    def start(user: str, ctx: WorkflowContext[str]) -> None:
        ctx.send_message(user)

    @executor
    async def learn(user: str, ctx: WorkflowContext[None, str]) -> None:
        ns = memory.namespace({"user_id": user})
        key = await memory.remember(ns, f"{user} prefers trains.")
        if crash and crash.pop():
            raise RuntimeError("killed after the write, before the checkpoint")
        ctx.yield_output(key)

    workflow = WorkflowBuilder(start).add_edge(start, learn).build()
    store = InMemoryCheckpointStore()
    with pytest.raises(WorkflowError, match="killed after the write"):
        await workflow.run("ada", checkpoint_store=store, run_id="r1")
    last = (await store.list_checkpoints(run_id="r1"))[-1]
    result = await workflow.resume(last.checkpoint_id, checkpoint_store=store)
    facts = await memory.facts(("user", "ada", "facts"))
    assert [f.text for f in facts] == ["ada prefers trains."]
    assert result.outputs == [facts[0].key]


async def test_recall_extraction_and_knowledge_are_traced(spans: Any) -> None:
    from cantata.agents import Knowledge, KnowledgeProvider

    memory = Memory(InMemoryItemStore(), HashEmbeddingClient(), SCOPE)
    learned = MemoryUpdate(operations=[MemoryOperation(op="add", fact="The user rows.")])
    knowledge = Knowledge(InMemoryItemStore(), HashEmbeddingClient(), ("kb",))
    await knowledge.ingest_text("guide.md", "# Rowing\n\nBoats are kept by the lake.")
    providers = [
        MemoryProvider(memory, extractor=_extractor([learned])),
        KnowledgeProvider(knowledge),
    ]
    agent = ChatAgent(ScriptedChatClient(["ok"]), name="coach", context_providers=providers)
    await agent.run("I row on the lake. Where are boats?", tool_kwargs={"user_id": "u"})
    finished = {s.name: s for s in spans.get_finished_spans()}
    assert finished["knowledge.ingest"].attributes["cantata.knowledge.added"] == 1
    assert finished["knowledge.search"].attributes["cantata.knowledge.hits"] == 1
    assert finished["memory.recall"].attributes["cantata.memory.hits"] == 0
    assert finished["memory.extract"].attributes["cantata.memory.written"] == 1
    run = finished["invoke_agent coach"]
    provider_spans = [s for s in finished.values() if s.name.startswith("context_provider ")]
    assert {s.name for s in provider_spans} == {
        "context_provider memory",
        "context_provider knowledge",
    }
    assert all(
        s.parent is not None and s.parent.span_id == run.context.span_id for s in provider_spans
    )
