"""Knowledge: documents an agent searches and cites.

`Knowledge` ingests files (text, Markdown, HTML, PDF) or text into a collection of an
`ItemStore`: each document is cut into chunks that keep its structure (a chunk never spans
two Markdown sections; HTML and PDF through their text), each chunk is embedded and stored
with its span, under a key derived from its text, so it is stable. Ingesting a document
again writes only the chunks that changed and removes those that are gone; one
document's writes are one transaction, and what an interrupted ingestion left is put right
by the next (the chunks present are read from the store, not trusted from a manifest).

`KnowledgeProvider` is the context provider that retrieves the chunks relevant to each
run's input into the request, numbered, and after the run sets `AgentResponse.citations`
(document, chunk, span) to the sources the answer cites by number (``[1]``), or to all it
was given when it cites none. `knowledge_tool` lets an agent search by itself.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..core import UsageError, tracing
from ..models.embeddings import EmbeddingClient
from ..stores import Item, ItemStore, ItemWrite, Namespace
from ..tools import FunctionTool, tool
from ._chunking import TextChunk, chunk_markdown, chunk_pages, chunk_text, html_text, pdf_text
from .context_providers import ContextProvider, ContextRun
from .response import Citation

__all__ = [
    "Citation",
    "IngestReport",
    "Knowledge",
    "KnowledgeError",
    "KnowledgeProvider",
    "knowledge_tool",
]

Kind = Literal["text", "markdown", "html", "pdf"]
_KINDS: dict[str, Kind] = {
    ".txt": "text",
    ".text": "text",
    ".md": "markdown",
    ".markdown": "markdown",
    ".html": "html",
    ".htm": "html",
    ".pdf": "pdf",
}
MAX_FILE_BYTES = 50 * 1024 * 1024
"""The largest file `Knowledge.ingest` reads by default."""
_CITED = re.compile(r"\[(\d{1,3})\]")


class KnowledgeError(UsageError):
    """A document that cannot be ingested: unreadable, too large, of an unknown kind."""


@dataclass(frozen=True, slots=True)
class IngestReport:
    """What one ingestion did: chunks written anew, kept as they were, and removed."""

    document: str
    added: int
    kept: int
    removed: int


class Knowledge:
    """A collection of documents in an item store, searched by meaning and words at once.

    `collection` is the namespace prefix the collection owns (``("knowledge", "docs")``);
    chunks live under it by document, so a search reads that collection only.
    """

    def __init__(
        self,
        store: ItemStore,
        embedder: EmbeddingClient,
        collection: Sequence[str] = ("knowledge", "default"),
        *,
        chunk_chars: int = 1200,
        max_file_bytes: int = MAX_FILE_BYTES,
    ) -> None:
        parts = tuple(collection) if not isinstance(collection, str) else ()
        if not parts or not all(isinstance(p, str) and p for p in parts):
            raise UsageError(
                "a knowledge collection is a non-empty tuple of non-empty strings such as "
                f"('knowledge', 'docs'), got {collection!r:.100}"
            )
        if chunk_chars < 100:
            raise UsageError(f"chunk_chars must be at least 100, got {chunk_chars}")
        self.store = store
        self.embedder = embedder
        self.collection: Namespace = parts
        self.chunk_chars = chunk_chars
        self.max_file_bytes = max_file_bytes

    def _chunks_of(self, document: str) -> Namespace:
        return (*self.collection, "chunks", document)

    async def ingest(
        self, path: str | os.PathLike[str], *, document: str | None = None, kind: Kind | None = None
    ) -> IngestReport:
        """Ingest a file; its kind comes from its suffix unless given. `document` names it
        in citations (its path by default)."""
        file = Path(path)
        kind = kind or _KINDS.get(file.suffix.lower())
        if kind is None:
            raise KnowledgeError(
                f"{file}: unknown kind of document {file.suffix!r}; pass kind= one of "
                "'text', 'markdown', 'html', 'pdf'"
            )
        try:
            data = await asyncio.to_thread(_read, file, self.max_file_bytes)
        except OSError as exc:
            raise KnowledgeError(f"{file}: cannot be read ({exc.strerror or exc})") from exc
        name = document or str(file)
        if kind == "pdf":
            try:
                text, pages = pdf_text(data)
            except Exception as exc:  # pypdf raises many kinds on a damaged file
                raise KnowledgeError(f"{file}: not a readable PDF ({exc})") from exc
            chunks = chunk_pages(text, pages, limit=self.chunk_chars)
            return await self._ingest(name, text, chunks, pages)
        try:
            decoded = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise KnowledgeError(
                f"{file}: not UTF-8 text (byte {exc.start}); convert it to UTF-8"
            ) from exc
        return await self.ingest_text(name, decoded, kind=kind)

    async def ingest_text(
        self, document: str, text: str, *, kind: Kind = "markdown"
    ) -> IngestReport:
        """Ingest a document given as text (Markdown by default)."""
        if not isinstance(document, str) or not document:
            raise KnowledgeError("a document needs a non-empty name")
        if kind == "html":
            text = html_text(text)
            chunks = chunk_markdown(text, limit=self.chunk_chars)
        elif kind == "markdown":
            chunks = chunk_markdown(text, limit=self.chunk_chars)
        elif kind == "text":
            chunks = chunk_text(text, limit=self.chunk_chars)
        else:
            raise KnowledgeError(f"ingest_text takes text, markdown or html, not {kind!r}")
        return await self._ingest(document, text, chunks, [])

    async def _ingest(
        self, document: str, text: str, chunks: list[TextChunk], pages: list[int]
    ) -> IngestReport:
        with tracing.span("knowledge.ingest", {"cantata.knowledge.chunks": len(chunks)}) as span:
            report = await self._write(document, text, chunks, pages)
            if span is not None:
                span.set_attribute("cantata.knowledge.added", report.added)
                span.set_attribute("cantata.knowledge.removed", report.removed)
        return report

    async def _write(
        self, document: str, text: str, chunks: list[TextChunk], pages: list[int]
    ) -> IngestReport:
        namespace = self._chunks_of(document)
        present = {i.key: i for i in await self._all(namespace)}
        wanted: dict[str, tuple[TextChunk, str]] = {}
        for chunk in chunks:
            piece = text[chunk.start : chunk.end]
            digest = hashlib.sha256(f"{chunk.heading}\x1f{piece}".encode()).hexdigest()[:24]
            key, n = digest, 1
            while key in wanted:  # the same text twice in one document
                n += 1
                key = f"{digest}-{n}"
            page = _page(pages, chunk.start)
            wanted[key] = (TextChunk(chunk.start, chunk.end, chunk.heading, page), piece)
        fresh: list[tuple[str, TextChunk, str]] = []
        kept = 0
        for key, (chunk, piece) in wanted.items():
            old = present.get(key)
            if old is not None and old.value.get("start") == chunk.start:
                kept += 1
                continue
            fresh.append((key, chunk, piece))
        vectors = await self.embedder.embed([_indexed(c, p) for _, c, p in fresh]) if fresh else []
        writes = [
            ItemWrite(
                namespace,
                key,
                {
                    "document": document,
                    "start": chunk.start,
                    "end": chunk.end,
                    "heading": chunk.heading,
                    "page": chunk.page,
                    "text": piece,
                },
                text=_indexed(chunk, piece),
                vector=vector,
            )
            for (key, chunk, piece), vector in zip(fresh, vectors, strict=True)
        ]
        if writes:
            await self.store.put_many(writes)  # one transaction: all chunks or none
        gone = [k for k in present if k not in wanted]
        for key in gone:
            await self.store.delete(namespace, key)
        return IngestReport(document, len(writes), kept, len(gone))

    async def _all(self, namespace: Namespace) -> list[Item]:
        out: list[Item] = []
        while True:
            page = await self.store.list(namespace, limit=500, offset=len(out))
            out.extend(page)
            if len(page) < 500:
                return out

    async def remove(self, document: str) -> int:
        """Remove a document's chunks; returns how many."""
        return await self.store.clear(self._chunks_of(document))

    async def documents(self) -> list[str]:
        """The documents in the collection, sorted."""
        prefix = (*self.collection, "chunks")
        return [ns[len(prefix)] for ns in await self.store.namespaces(prefix)]

    async def search(self, query: str, *, limit: int = 5) -> list[Citation]:
        """The chunks most relevant to `query`, best first, as citations."""
        query = query.strip()
        if not query:
            return []
        with tracing.span("knowledge.search", {"cantata.knowledge.limit": limit}) as span:
            (vector,) = await self.embedder.embed([query])
            hits = await self.store.search(
                (*self.collection, "chunks"), vector=vector, text=query, limit=limit
            )
            if span is not None:
                span.set_attribute("cantata.knowledge.hits", len(hits))
        out: list[Citation] = []
        for hit in hits:
            value = hit.item.value
            page = value.get("page")
            out.append(
                Citation(
                    document=str(value.get("document", hit.item.namespace[-1])),
                    chunk=hit.item.key,
                    start=int(value.get("start", 0)),
                    end=int(value.get("end", 0)),
                    text=str(value.get("text", "")),
                    heading=str(value.get("heading", "")),
                    page=page if isinstance(page, int) else None,
                    score=hit.score,
                )
            )
        return out


def _read(file: Path, limit: int) -> bytes:
    """The file's bytes, refused past `limit` (read no further than that)."""
    with file.open("rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise KnowledgeError(
            f"{file}: more than the {limit:,} bytes this collection takes from a file; "
            "split it, or raise max_file_bytes"
        )
    return data


def _indexed(chunk: TextChunk, piece: str) -> str:
    """What is embedded and indexed: the headings above the chunk, then its text."""
    return f"{chunk.heading}\n{piece}" if chunk.heading else piece


def _page(starts: list[int], offset: int) -> int | None:
    page = None
    for number, start in enumerate(starts, 1):
        if start <= offset:
            page = number
    return page


def _where(c: Citation) -> str:
    place = f" > {c.heading}" if c.heading else ""
    page = f", page {c.page}" if c.page else ""
    return f"{c.document}{place}{page}"


class KnowledgeProvider(ContextProvider):
    """Retrieves a `Knowledge`'s relevant chunks into each run; cites them after it."""

    def __init__(
        self,
        knowledge: Knowledge,
        *,
        limit: int = 4,
        name: str = "knowledge",
        files: Sequence[str | os.PathLike[str]] = (),
        owns_store: bool = False,
    ) -> None:
        super().__init__(name)
        self.knowledge = knowledge
        self.limit = limit
        self.files = tuple(files)
        """Ingested before the first run (again on each start: unchanged chunks cost nothing)."""
        self.owns_store = owns_store
        """Whether `aclose` closes the collection's store too."""
        self._ingested: asyncio.Task[None] | None = None
        self._found: dict[int, list[Citation]] = {}  # by run, from before to after it

    async def before_run(self, run: ContextRun) -> None:
        """Put the relevant chunks, numbered, in front of the conversation."""
        if self.files:
            if self._ingested is None:
                self._ingested = asyncio.ensure_future(self._ingest_files())
            await asyncio.shield(self._ingested)
        query = " ".join(m.text for m in run.input if m.role == "user" and m.text)
        found = await self.knowledge.search(query, limit=self.limit)
        if not found:
            return
        listed = "\n\n".join(f"[{n}] {_where(c)}\n{c.text}" for n, c in enumerate(found, 1))
        run.add_instructions(
            "Answer from these sources when they bear on the question, and cite each one "
            f"you use by its number in brackets, like [1].\n\n{listed}"
        )
        self._found[id(run)] = found

    async def _ingest_files(self) -> None:
        for path in self.files:
            await self.knowledge.ingest(path)

    async def aclose(self) -> None:
        """Close the collection's store when owned."""
        if self.owns_store:
            await self.knowledge.store.close()

    async def after_run(self, run: ContextRun) -> None:
        """Set the response's citations: the sources it cites, else all it was given."""
        found = self._found.pop(id(run), [])
        if run.response is None or not found:
            return
        cited = {int(n) for n in _CITED.findall(run.response.text)}
        chosen = [c for n, c in enumerate(found, 1) if n in cited] or found
        run.response.citations.extend(chosen)


def knowledge_tool(knowledge: Knowledge, *, limit: int = 4) -> FunctionTool:
    """A ``search_knowledge`` tool over `knowledge` for agents that look things up."""

    @tool(name="search_knowledge")
    async def search_knowledge(query: str) -> str:
        """Search the knowledge base; each result names its document and section.

        Args:
            query: What to look for.
        """
        found = await knowledge.search(query, limit=limit)
        if not found:
            return "nothing found"
        return "\n\n".join(f"[{c.chunk}] {_where(c)}\n{c.text}" for c in found)

    return search_knowledge
