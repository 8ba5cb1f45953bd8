"""Knowledge: ingesting a 10 MB Markdown corpus, against LangChain's Markdown splitter.

The corpus is generated (seeded): 100 documents of about 100 KB, each with headings at
three levels, paragraphs, lists and fenced code. Three figures:

- chunking alone, chunks/s: cantata's structure-aware Markdown chunker (headings kept
  with their sections, code fences never split) against `langchain-text-splitters`'
  `MarkdownTextSplitter` at the same chunk size (1,200 characters), same text, same run;
- ingestion with embedding excluded: chunking, hashing, and writing every chunk (text
  for full-text search, a 384-dimension vector) into a SQLite item store; the embedder
  hands back vectors computed before the clock starts;
- ingestion with embedding included: the same with the deterministic hash embedder
  (no model: a real model's time depends on the model, not on cantata).

``--quick`` (benchmarks/run.py) uses a 1 MB corpus.
"""

from __future__ import annotations

import random
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from _harness import Row, peer_version
from cantata.agents import Knowledge
from cantata.agents._chunking import chunk_markdown
from cantata.models.embeddings import HashEmbeddingClient
from cantata.stores import SQLiteItemStore

MAX_REPEAT = 1
CHUNK = 1_200
DIMS = 384
_WORDS = [
    "agent", "memory", "store", "vector", "thread", "model", "tool", "graph", "search",
    "chunk", "index", "query", "token", "stream", "server", "client", "batch", "cache",
]  # fmt: skip


def corpus(megabytes: float, seed: int = 20261207) -> dict[str, str]:
    """Markdown documents of about 100 KB each, `megabytes` in all."""
    rng = random.Random(seed)

    def sentence() -> str:
        words = [rng.choice(_WORDS) for _ in range(rng.randint(6, 18))]
        return " ".join(words).capitalize() + "."

    documents: dict[str, str] = {}
    total = 0
    d = 0
    while total < megabytes * 1_000_000:
        parts = [f"# Document {d}\n"]
        size = 0
        s = 0
        while size < 100_000:
            s += 1
            block = [f"## Section {s}\n", " ".join(sentence() for _ in range(rng.randint(3, 9)))]
            for t in range(rng.randint(0, 3)):
                block.append(f"### Topic {s}.{t}\n")
                block.append(" ".join(sentence() for _ in range(rng.randint(2, 12))))
            if rng.random() < 0.3:
                block.append("\n".join(f"- {sentence()}" for _ in range(rng.randint(2, 6))))
            if rng.random() < 0.2:
                code = "\n".join(f"x{i} = store.get({i})" for i in range(rng.randint(3, 30)))
                block.append(f"```python\n{code}\n```")
            text = "\n\n".join(block)
            parts.append(text)
            size += len(text)
        documents[f"doc{d:03}.md"] = "\n\n".join(parts)
        total += len(documents[f"doc{d:03}.md"].encode())
        d += 1
    return documents


class _Precomputed:
    """An embedder that looks vectors up: ingestion timed without embedding."""

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self._vectors = vectors

    @property
    def dimensions(self) -> int:
        return DIMS

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._vectors[t] for t in texts]


async def _ingest(documents: dict[str, str], embedder: object) -> tuple[float, int]:
    with tempfile.TemporaryDirectory() as tmp:
        async with SQLiteItemStore(Path(tmp) / "k.db", dimensions=DIMS) as store:
            knowledge = Knowledge(store, embedder, ("knowledge", "bench"), chunk_chars=CHUNK)  # type: ignore[arg-type]
            start = time.perf_counter()
            chunks = 0
            for name, text in documents.items():
                chunks += (await knowledge.ingest_text(name, text)).added
            return time.perf_counter() - start, chunks


async def _vectors_of(documents: dict[str, str]) -> dict[str, list[float]]:
    """Every text the ingestion will embed, embedded beforehand (by an untimed ingestion)."""
    seen: dict[str, list[float]] = {}
    hasher = HashEmbeddingClient(DIMS, cache_size=0)

    class Recording:
        dimensions = DIMS

        async def embed(self, texts: Sequence[str]) -> list[list[float]]:
            vectors = await hasher.embed(texts)
            seen.update(zip(texts, vectors, strict=True))
            return vectors

    await _ingest(documents, Recording())
    return seen


async def collect(quick: bool) -> list[Row]:
    """Rows for benchmarks/run.py."""
    megabytes = 1.0 if quick else 10.0
    documents = corpus(megabytes)
    size = sum(len(t.encode()) for t in documents.values())
    label = f"{size / 1e6:.1f} MB Markdown, {len(documents)} documents"

    chunk_markdown("# warm up\n\nthe parser's first call builds its tables", limit=CHUNK)
    start = time.perf_counter()
    ours = sum(len(chunk_markdown(t, limit=CHUNK)) for t in documents.values())
    ours_s = time.perf_counter() - start
    peer_rate = None
    version = peer_version("langchain-text-splitters")
    peer_chunks = None
    peer_s = None
    if version is not None:
        from langchain_text_splitters import MarkdownTextSplitter

        splitter = MarkdownTextSplitter(chunk_size=CHUNK, chunk_overlap=0)
        splitter.split_text("# warm up\n\ntext")
        start = time.perf_counter()
        peer_chunks = sum(len(splitter.split_text(t)) for t in documents.values())
        peer_s = time.perf_counter() - start
        peer_rate = peer_chunks / peer_s

    vectors = await _vectors_of(documents)
    excluded_s, written = await _ingest(documents, _Precomputed(vectors))
    included_s, written_again = await _ingest(documents, HashEmbeddingClient(DIMS, cache_size=0))
    assert written == written_again == ours, (written, written_again, ours)
    return [
        Row(f"chunk, {label}", "chunks/s", ours / ours_s, peer_rate,
            "langchain MarkdownTextSplitter", version, headline=True,
            extra={"chunks": ours, "peer_chunks": peer_chunks,
                   "mb_per_s": round(size / 1e6 / ours_s, 2),
                   "peer_mb_per_s": peer_s and round(size / 1e6 / peer_s, 2)}),
        Row(f"ingest into SQLite, embedding excluded, {label}", "chunks/s", written / excluded_s,
            note="chunk, hash, write text and vector", extra={"seconds": round(excluded_s, 2),
            "mb_per_s": round(size / 1e6 / excluded_s, 2)}),
        Row(f"ingest into SQLite, hash embedder included, {label}", "chunks/s",
            written / included_s, extra={"seconds": round(included_s, 2)}),
    ]  # fmt: skip


if __name__ == "__main__":
    import asyncio
    import sys

    for row in asyncio.run(collect(quick="--quick" in sys.argv)):
        ratio = f"{row.ratio:.2f}x" if row.ratio else "-"
        peer = "-" if row.peer is None else f"{row.peer:,.1f}"
        print(
            f"{row.name:70} {row.unit:8} ours {row.ours:12,.1f}  {row.peer_name or '':32} "
            f"{row.peer_version or '':8} {peer:>12}  {ratio:>7}  {row.extra}"
        )
