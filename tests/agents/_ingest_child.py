"""Ingest the corpus of test_knowledge_kill9.py into a SQLite file, printing a line after
each document, so the test can kill -9 this process part way and run it again."""

from __future__ import annotations

import asyncio
import sys

from cantata.agents import Knowledge
from cantata.models.embeddings import HashEmbeddingClient
from cantata.stores import SQLiteItemStore


def corpus(documents: int) -> dict[str, str]:
    """Markdown documents of about twenty chunks each, the same on every call."""
    out = {}
    for d in range(documents):
        sections = [
            f"## Part {s} of doc {d}\n\n"
            + " ".join(
                f"doc{d} part{s} sentence {w} about topic{(d * s + w) % 17}." for w in range(40)
            )
            for s in range(12)
        ]
        out[f"doc{d:02}"] = f"# Document {d}\n\n" + "\n\n".join(sections)
    return out


async def main(path: str, documents: int) -> None:
    async with SQLiteItemStore(path, dimensions=64) as store:
        knowledge = Knowledge(
            store, HashEmbeddingClient(64), ("knowledge", "kill"), chunk_chars=400
        )
        for name, text in corpus(documents).items():
            report = await knowledge.ingest_text(name, text)
            print(f"{name} {report.added} {report.kept} {report.removed}", flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
