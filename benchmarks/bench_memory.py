"""Item stores: puts, exact top-10 vector search, hybrid search and memory per item, against
LangGraph's `InMemoryStore` and `SqliteStore`, with numpy's exact top-k as the floor.

Both sides get the same deterministic vectors (384 dimensions, unit, from a seeded
generator) and the same texts: cantata is handed the vectors, LangGraph's index an embed
function that looks each text's vector up in a dict (no model on either side). The queried
namespace holds `n` items; nine other namespaces hold 1,000 each, so the query must keep to
its scope. Search is timed per query (p50, p99) after one warm-up query: the first query
of a SQLite store loads the namespace's matrix (its time is in the row's extra). The floor
is ``matrix @ query`` then argpartition over the queried namespace's own matrix.

LangGraph's `SqliteStore` needs SQLite extension loading (sqlite-vec), which this Python's
`sqlite3` lacks: it runs on a `pysqlite3` connection (``pysqlite3-binary``) where that is
installed, and is left out otherwise. ``CANTATA_BENCH_MEMORY_SIZES=20000`` picks the sizes
(default 20,000 and 100,000; ``--quick``: 2,000).
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from _harness import Row, peer_version
from cantata.stores import InMemoryItemStore, ItemWrite, SQLiteItemStore

MAX_REPEAT = 1
DIMS = 384
OTHERS = 9
OTHER_SIZE = 1_000
BATCH = 500
NS = ("user", "target", "memories")
_WORDS = [f"w{i}" for i in range(2_000)]


class Data:
    """Vectors, texts and queries for one size, the same for every contender."""

    def __init__(self, n: int, queries: int) -> None:
        rng = np.random.default_rng(20261207)
        total = n + OTHERS * OTHER_SIZE
        matrix = rng.normal(size=(total, DIMS)).astype(np.float32)
        self.matrix = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
        words = rng.integers(0, len(_WORDS), size=(total, 12))
        self.texts = [" ".join(_WORDS[w] for w in row) for row in words]
        self.namespaces = [NS] * n + [
            ("user", f"other{j}", "memories") for j in range(OTHERS) for _ in range(OTHER_SIZE)
        ]
        self.n = n
        q = rng.normal(size=(queries, DIMS)).astype(np.float32)
        self.queries = q / np.linalg.norm(q, axis=1, keepdims=True)
        self.query_texts = [" ".join(_WORDS[w] for w in rng.integers(0, 2_000, 3)) for _ in q]
        self.by_text = {t: v for t, v in zip(self.texts, self.matrix, strict=True)}
        self.by_text.update({f"q{i}": v for i, v in enumerate(self.queries)})

    def value(self, i: int) -> dict[str, Any]:
        return {"text": self.texts[i], "i": i, "kind": ("fact", "pref", "event", "note")[i % 4]}

    def embed(self, texts: list[str]) -> list[list[float]]:
        """LangGraph's embed function: the same vectors, looked up (`SqliteStore` hands it
        the value's JSON rather than its ``text`` field: the text is read back from it)."""
        return [self.by_text[_text_of(t)].tolist() for t in texts]

    def floor_top10(self, q: np.ndarray) -> np.ndarray:
        scores = self.matrix[: self.n] @ q
        best = np.argpartition(-scores, 9)[:10]
        return best[np.argsort(-scores[best])]


def _text_of(embedded: str) -> str:
    if embedded.startswith("{"):
        text: str = json.loads(embedded)["text"]
        return text
    return embedded


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _percentiles(times: list[float]) -> tuple[float, float]:
    ordered = sorted(times)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return statistics.median(ordered) * 1e3, p99 * 1e3


def _floor(data: Data) -> tuple[float, float]:
    times = []
    for q in data.queries:
        start = time.perf_counter()
        data.floor_top10(q)
        times.append(time.perf_counter() - start)
    return _percentiles(times)


async def _ours(store: Any, data: Data) -> dict[str, Any]:
    got: dict[str, Any] = {}
    gc.collect()
    before = _rss()
    writes = [
        ItemWrite(data.namespaces[i], f"k{i}", data.value(i), data.texts[i], data.matrix[i])
        for i in range(len(data.texts))
    ]
    start = time.perf_counter()
    for i in range(0, len(writes), BATCH):
        await store.put_many(writes[i : i + BATCH])
    got["puts"] = len(writes) / (time.perf_counter() - start)
    del writes
    start = time.perf_counter()
    await store.search(NS, vector=data.queries[0], limit=10)
    got["first_query_ms"] = (time.perf_counter() - start) * 1e3
    gc.collect()
    got["bytes_per_item"] = (_rss() - before) / len(data.texts)
    times, hybrid, recall = [], [], []
    for q, text in zip(data.queries, data.query_texts, strict=True):
        start = time.perf_counter()
        hits = await store.search(NS, vector=q, limit=10)
        times.append(time.perf_counter() - start)
        recall.append(len({h.item.key for h in hits} & {f"k{i}" for i in data.floor_top10(q)}))
        start = time.perf_counter()
        await store.search(NS, vector=q, text=text, limit=10)
        hybrid.append(time.perf_counter() - start)
    got["search"] = _percentiles(times)
    got["hybrid"] = _percentiles(hybrid)
    got["recall"] = sum(recall) / (10 * len(recall))
    return got


def _langgraph(make: Callable[[Data], Any], data: Data, queries: int) -> dict[str, Any]:
    from langgraph.store.base import PutOp

    got: dict[str, Any] = {}
    store = make(data)
    try:
        ops = [PutOp(data.namespaces[i], f"k{i}", data.value(i)) for i in range(len(data.texts))]
        start = time.perf_counter()
        for i in range(0, len(ops), BATCH):
            store.batch(ops[i : i + BATCH])
        got["puts"] = len(ops) / (time.perf_counter() - start)
        store.search(NS, query="q0", limit=10)
        times = []
        for j in range(queries):
            start = time.perf_counter()
            store.search(NS, query=f"q{j}", limit=10)
            times.append(time.perf_counter() - start)
        got["search"] = _percentiles(times)
    finally:
        close = getattr(store, "_bench_close", None)
        if close is not None:
            close()
    return got


def _lg_memory(data: Data) -> Any:
    from langgraph.store.memory import InMemoryStore

    return InMemoryStore(index={"dims": DIMS, "embed": data.embed, "fields": ["text"]})


def _lg_sqlite(data: Data) -> Any:
    from langgraph.store.sqlite import SqliteStore
    from pysqlite3 import dbapi2 as sqlite3  # SQLite with extension loading, for sqlite-vec

    tmp = tempfile.TemporaryDirectory()
    conn = sqlite3.connect(
        str(Path(tmp.name) / "lg.db"), check_same_thread=False, isolation_level=None
    )
    store = SqliteStore(conn, index={"dims": DIMS, "embed": data.embed, "fields": ["text"]})
    store.setup()

    def close() -> None:
        conn.close()
        tmp.cleanup()

    store._bench_close = close
    return store


def _sizes(quick: bool) -> list[int]:
    chosen = os.environ.get("CANTATA_BENCH_MEMORY_SIZES")
    if chosen:
        return [int(s) for s in chosen.split(",")]
    return [2_000] if quick else [20_000, 100_000]


def _has_pysqlite3() -> bool:
    try:
        import pysqlite3  # noqa: F401
    except ImportError:
        return False
    return True


async def collect(quick: bool) -> list[Row]:
    """Rows for benchmarks/run.py, per size."""
    lg = peer_version("langgraph")
    rows: list[Row] = []
    for n in _sizes(quick):
        data = Data(n, queries=50 if quick else 200)
        size = f"{n:,} items"
        floor = _floor(data)
        with tempfile.TemporaryDirectory() as tmp:
            async with SQLiteItemStore(Path(tmp) / "items.db", dimensions=DIMS) as store:
                sqlite = await _ours(store, data)
        async with InMemoryItemStore(dimensions=DIMS) as memory_store:
            memory = await _ours(memory_store, data)
        peer_queries = max(5, min(50, 1_000_000 // n))
        lg_sqlite = _langgraph(_lg_sqlite, data, peer_queries) if _has_pysqlite3() else {}
        lg_memory = _langgraph(_lg_memory, data, max(3, peer_queries // 5))
        extra = {
            "recall_at_10": sqlite["recall"],
            "first_query_ms": sqlite["first_query_ms"],
            "peer_queries": peer_queries,
        }
        rows += [
            Row(f"put, SQLite, {size}", "puts/s", sqlite["puts"], lg_sqlite.get("puts"),
                "langgraph SqliteStore", lg, goal=">= 2x", headline=n == 20_000),
            Row(f"search top 10, SQLite, {size}, p50", "ms", sqlite["search"][0],
                lg_sqlite.get("search", (None,))[0], "langgraph SqliteStore", lg,
                higher_is_better=False, goal=">= 10x", extra=extra, headline=n == 20_000),
            Row(f"search top 10, SQLite, {size}, p99", "ms", sqlite["search"][1],
                lg_sqlite.get("search", (None, None))[1], "langgraph SqliteStore", lg,
                higher_is_better=False),
            Row(f"search top 10, SQLite, {size}, p50", "ms", sqlite["search"][0], floor[0],
                "numpy exact top-k (floor)", np.__version__, higher_is_better=False,
                goal=">= 0.5x", note="within 2x of the floor"),
            Row(f"search top 10, in memory, {size}, p50", "ms", memory["search"][0],
                lg_memory.get("search", (None,))[0], "langgraph InMemoryStore", lg,
                higher_is_better=False, goal=">= 100x", extra={"recall_at_10": memory["recall"]},
                headline=n == 20_000),
            Row(f"put, in memory, {size}", "puts/s", memory["puts"], lg_memory.get("puts"),
                "langgraph InMemoryStore", lg),
            Row(f"hybrid search top 10, SQLite, {size}, p50", "ms", sqlite["hybrid"][0],
                higher_is_better=False, note="no peer: LangGraph's stores have no hybrid search",
                extra={"p99": sqlite["hybrid"][1]}),
            Row(f"hybrid search top 10, in memory, {size}, p50", "ms", memory["hybrid"][0],
                higher_is_better=False, extra={"p99": memory["hybrid"][1]}),
            Row(f"RSS per item beside the vector, SQLite, {size}", "bytes",
                sqlite["bytes_per_item"] - DIMS * 4, higher_is_better=False,
                goal="<= 2048 bytes"),
            Row(f"RSS per item beside the vector, in memory, {size}", "bytes",
                memory["bytes_per_item"] - DIMS * 4, higher_is_better=False),
        ]  # fmt: skip
    return rows


if __name__ == "__main__":
    import asyncio

    for row in asyncio.run(collect(quick=False)):
        ratio = f"{row.ratio:.2f}x" if row.ratio else "-"
        peer = "-" if row.peer is None else f"{row.peer:,.3f}"
        print(
            f"{row.name:55} {row.unit:7} ours {row.ours:12,.3f}  {row.peer_name or '':28} "
            f"{row.peer_version or '':8} {peer:>12}  {ratio:>9}  {row.goal or ''}  {row.extra}"
        )
