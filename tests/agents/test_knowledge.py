"""Knowledge: files of each kind ingested into structure-aware chunks with stable ids and
exact spans, re-ingestion that writes only what changed (and repairs what an interrupted
one left), retrieval into a run with citations, the search tool, and typed errors for
documents that cannot be read."""

from __future__ import annotations

from pathlib import Path

import pytest

from cantata.agents import (
    AgentResponse,
    ChatAgent,
    Citation,
    Knowledge,
    KnowledgeError,
    KnowledgeProvider,
    knowledge_tool,
)
from cantata.agents._chunking import chunk_markdown, chunk_text, html_text
from cantata.core import Message, from_json, to_json
from cantata.models import ChatOptions, ScriptedChatClient
from cantata.models.embeddings import HashEmbeddingClient
from cantata.stores import InMemoryItemStore, open_item_store

GUIDE = """# Returns

Items can be returned within 30 days of delivery.
Refunds reach the card in five working days.

## Damaged items

Send a photo of the damage; a courier collects the item for free.

# Shipping

Orders over 50 euros ship free. Express delivery costs 9 euros.
"""


def _pdf(pages: list[str]) -> bytes:
    """A minimal valid PDF with one line of text per page (Helvetica)."""
    objects: list[bytes] = []
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(len(pages)))
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>".encode())
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    for i, text in enumerate(pages):
        stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {5 + 2 * i} 0 R "
            "/Resources << /Font << /F1 3 0 R >> >> >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    out = b"%PDF-1.4\n"
    offsets = []
    for n, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % n + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return out


def _knowledge(**kw: object) -> Knowledge:
    return Knowledge(InMemoryItemStore(), HashEmbeddingClient(), ("kb", "shop"), **kw)  # type: ignore[arg-type]


def test_markdown_chunks_keep_their_sections_and_exact_spans() -> None:
    chunks = chunk_markdown(GUIDE, limit=200)
    headings = [c.heading for c in chunks]
    assert headings == ["Returns", "Returns > Damaged items", "Shipping"]
    for c in chunks:
        piece = GUIDE[c.start : c.end]
        assert piece == piece.strip() and piece
    assert GUIDE[chunks[1].start : chunks[1].end].startswith("## Damaged items")
    long = "word " * 500
    pieces = chunk_text(long, limit=300)
    assert all(c.end - c.start <= 300 for c in pieces)
    assert " ".join(long[c.start : c.end] for c in pieces).split() == long.split()


def test_html_keeps_headings_and_drops_scripts() -> None:
    page = "<html><head><title>x</title><script>evil()</script></head><body>"
    page += "<h1>Help</h1><p>Call <b>us</b> any day.</p><ul><li>Mail</li></ul></body></html>"
    assert html_text(page) == "# Help\n\nCall us any day.\n\nMail"


async def test_ingest_each_kind_and_cite_spans(tmp_path: Path) -> None:
    knowledge = _knowledge(chunk_chars=200)
    (tmp_path / "guide.md").write_text(GUIDE, encoding="utf-8")
    (tmp_path / "faq.html").write_text("<h2>Hours</h2><p>Open 9 to 5.</p>", encoding="utf-8")
    (tmp_path / "notes.txt").write_text("Gift cards never expire.\n\nThey are refundable.")
    (tmp_path / "terms.pdf").write_bytes(_pdf(["Warranty lasts two years.", "Law of Norway."]))
    for name in ("guide.md", "faq.html", "notes.txt", "terms.pdf"):
        report = await knowledge.ingest(tmp_path / name, document=name)
        assert report.added >= 1 and report.removed == 0
    assert await knowledge.documents() == ["faq.html", "guide.md", "notes.txt", "terms.pdf"]
    (hit, *_) = await knowledge.search("courier photo damage", limit=3)
    assert hit.document == "guide.md" and hit.heading == "Returns > Damaged items"
    assert GUIDE[hit.start : hit.end] == hit.text
    (pdf, *_) = await knowledge.search("warranty years", limit=2)
    assert pdf.document == "terms.pdf" and pdf.page == 1 and "two years" in pdf.text
    (law, *_) = await knowledge.search("Norway law", limit=1)
    assert law.page == 2


async def test_reingesting_writes_only_what_changed() -> None:
    knowledge = _knowledge(chunk_chars=200)
    first = await knowledge.ingest_text("guide", GUIDE)
    keys = {c.chunk for c in await knowledge.search("returns shipping damaged", limit=10)}
    again = await knowledge.ingest_text("guide", GUIDE)
    assert (again.added, again.kept, again.removed) == (0, first.added, 0)
    changed = GUIDE.replace("9 euros", "12 euros")
    third = await knowledge.ingest_text("guide", changed)
    assert (third.added, third.removed) == (1, 1)
    after = {c.chunk for c in await knowledge.search("returns shipping damaged", limit=10)}
    assert len(keys & after) == len(keys) - 1  # the other chunks kept their ids
    assert await knowledge.remove("guide") == first.added
    assert await knowledge.documents() == []


async def test_an_interrupted_ingestion_is_put_right_by_the_next(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'kb.db'}"

    class Failing(HashEmbeddingClient):
        async def embed(self, texts: list[str]) -> list[list[float]]:  # type: ignore[override]
            raise ConnectionError("embedding server down")

    async with open_item_store(url) as store:  # type: ignore[attr-defined]
        knowledge = Knowledge(store, Failing(), ("kb",))
        with pytest.raises(ConnectionError):
            await knowledge.ingest_text("guide", GUIDE)
        assert await store.list(("kb",)) == []  # nothing half-written
        knowledge = Knowledge(store, HashEmbeddingClient(), ("kb",), chunk_chars=200)
        report = await knowledge.ingest_text("guide", GUIDE)
        assert report.added == 3
        # a stray chunk (an old version's, left by a crash between write and clean-up)
        await store.put(("kb", "chunks", "guide"), "stale", {"document": "guide"}, text="old")
        again = await knowledge.ingest_text("guide", GUIDE)
        assert (again.added, again.kept, again.removed) == (0, 3, 1)


async def test_a_run_gets_the_sources_and_cites_them() -> None:
    knowledge = _knowledge(chunk_chars=200)
    await knowledge.ingest_text("guide.md", GUIDE)

    def answer(messages: list[Message], options: ChatOptions) -> str:
        sources = next(m.text for m in messages if "cite each one" in m.text)
        number = next(line.split("]")[0][1:] for line in sources.splitlines() if "Damaged" in line)
        return f"Send a photo; a courier collects it [{number}]."

    agent = ChatAgent(ScriptedChatClient(answer), context_providers=[KnowledgeProvider(knowledge)])
    response = await agent.run("The parcel came damaged, what now?")
    (cite,) = response.citations
    assert cite.document == "guide.md" and cite.heading == "Returns > Damaged items"
    assert GUIDE[cite.start : cite.end] == cite.text
    back = from_json(to_json(response))
    assert isinstance(back, AgentResponse) and back.citations == [cite]
    assert isinstance(back.citations[0], Citation)
    # an answer that cites nothing carries every source it was given
    plain = ChatAgent(
        ScriptedChatClient(["See the guide."]),
        context_providers=[KnowledgeProvider(knowledge, limit=2)],
    )
    assert len((await plain.run("damaged parcel")).citations) == 2


async def test_the_search_tool_names_document_and_section() -> None:
    knowledge = _knowledge(chunk_chars=200)
    await knowledge.ingest_text("guide.md", GUIDE)
    found = await knowledge_tool(knowledge, limit=1).invoke({"query": "free shipping"})
    assert "guide.md > Shipping" in str(found) and "50 euros" in str(found)


async def test_documents_that_cannot_be_read_are_typed_errors(tmp_path: Path) -> None:
    knowledge = _knowledge(max_file_bytes=1000)
    with pytest.raises(KnowledgeError, match="unknown kind"):
        await knowledge.ingest(tmp_path / "x.docx")
    with pytest.raises(KnowledgeError, match="cannot be read"):
        await knowledge.ingest(tmp_path / "missing.md")
    (tmp_path / "big.txt").write_text("x" * 2000)
    with pytest.raises(KnowledgeError, match="more than the 1,000 bytes"):
        await knowledge.ingest(tmp_path / "big.txt")
    (tmp_path / "bad.md").write_bytes(b"\xff\xfe bad")
    with pytest.raises(KnowledgeError, match="not UTF-8"):
        await knowledge.ingest(tmp_path / "bad.md")
    (tmp_path / "bad.pdf").write_bytes(b"%PDF-1.4 garbage")
    with pytest.raises(KnowledgeError, match="not a readable PDF"):
        await knowledge.ingest(tmp_path / "bad.pdf")
    assert await knowledge.documents() == []
