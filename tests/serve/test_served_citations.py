"""A served agent's citations reach Responses clients as ``file_citation`` annotations,
in the answer and in the stream, through the official openai client."""

from __future__ import annotations

from openai import AsyncOpenAI

from cantata.agents import ChatAgent, Knowledge, KnowledgeProvider
from cantata.models import ScriptedChatClient
from cantata.models.embeddings import HashEmbeddingClient
from cantata.stores import InMemoryItemStore, MemoryStore

from ._servers import serving

GUIDE = "# Returns\n\nReturns within 30 days.\n\n# Shipping\n\nOrders over 50 euros ship free.\n"


async def test_citations_are_file_citation_annotations() -> None:
    knowledge = Knowledge(InMemoryItemStore(), HashEmbeddingClient(), ("kb",))
    await knowledge.ingest_text("guide.md", GUIDE)
    model = ScriptedChatClient(lambda messages, options: "They ship free over 50 euros [1].")
    agent = ChatAgent(model, name="shop", context_providers=[KnowledgeProvider(knowledge, limit=1)])
    async with MemoryStore() as store, serving(agent, store=store) as url:
        client = AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=30)
        answer = await client.responses.create(model="shop", input="Is shipping free?")
        (part,) = answer.output[0].content  # type: ignore[union-attr]
        (note,) = part.annotations  # type: ignore[union-attr]
        assert note.type == "file_citation" and note.filename == "guide.md"
        assert note.index == len(part.text)  # type: ignore[union-attr]
        (hit,) = await knowledge.search("shipping free", limit=1)
        assert note.file_id == hit.chunk
        events = [
            e
            async for e in await client.responses.create(
                model="shop", input="Is shipping free?", stream=True
            )
        ]
        added = [e for e in events if e.type == "response.output_text.annotation.added"]
        assert [e.annotation.filename for e in added] == ["guide.md"]  # type: ignore[attr-defined]
        done = events[-1]
        assert done.type == "response.completed"
        assert done.response.output[0].content[0].annotations[0].file_id == hit.chunk  # type: ignore[union-attr]
        await client.close()


async def test_citations_reach_a2a_clients_as_a_data_part() -> None:
    import httpx
    from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
    from a2a.helpers import get_data_parts, get_message_text, new_text_message
    from a2a.types.a2a_pb2 import Role, SendMessageRequest

    from cantata.agents import A2AAgent
    from cantata.serve.a2a_executor import CITATIONS_KEY

    knowledge = Knowledge(InMemoryItemStore(), HashEmbeddingClient(), ("kb",))
    await knowledge.ingest_text("guide.md", GUIDE)
    model = ScriptedChatClient(lambda messages, options: "Returns within 30 days [1].")
    agent = ChatAgent(model, name="shop", context_providers=[KnowledgeProvider(knowledge, limit=1)])
    async with (
        MemoryStore() as store,
        serving(agent, store=store) as url,
        httpx.AsyncClient() as http,
    ):
        card = await A2ACardResolver(http, f"{url}/a2a/shop").get_agent_card()
        client = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)
        message = new_text_message("How long for returns?", role=Role.ROLE_USER)
        (event,) = [e async for e in client.send_message(SendMessageRequest(message=message))]
        status = event.task.status.message
        assert get_message_text(status, "") == "Returns within 30 days [1]."
        (data,) = get_data_parts(status.parts)
        (cited,) = data[CITATIONS_KEY]
        assert cited["document"] == "guide.md" and cited["heading"] == "Returns"
        assert GUIDE[int(cited["start"]) : int(cited["end"])] == cited["text"]
        remote = A2AAgent(f"{url}/a2a/shop", name="shop")
        try:
            answer = await remote.run("How long for returns?")
            assert answer.text == "Returns within 30 days [1]."
        finally:
            await remote.aclose()
