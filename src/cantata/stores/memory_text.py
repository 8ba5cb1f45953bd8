"""Full text: one tokenizer for every backend, BM25 for the in-process one, query builders.

Words are runs of letters and digits, lowercased, accents removed: what SQLite's FTS5
``unicode61 remove_diacritics 2`` tokenizer and PostgreSQL's ``simple`` configuration
produce too, so a query finds the same items whatever backend holds them. A text query
matches an item holding any of its words, ranked by BM25 (most words, rarest words and
shortest texts first): the relevance a person expects from a search box.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Hashable, Iterable
from typing import TypeVar

__all__ = [
    "TextIndex",
    "bm25",
    "fts5_query",
    "fuse",
    "reciprocal_rank_fusion",
    "tokenize",
    "tsquery",
]

K = TypeVar("K", bound=Hashable)

_WORD = re.compile(r"[^\W_]+")
MAX_QUERY_WORDS = 64
_K1 = 1.2
_B = 0.75


def tokenize(text: str) -> list[str]:
    """The words of `text`, lowercased and without accents."""
    folded = unicodedata.normalize("NFKD", text.lower())
    plain = "".join(c for c in folded if not unicodedata.combining(c))
    return _WORD.findall(plain)


def query_words(text: str) -> list[str]:
    """The distinct words of a query, in order, at most `MAX_QUERY_WORDS`."""
    return list(dict.fromkeys(tokenize(text)))[:MAX_QUERY_WORDS]


def fts5_query(text: str) -> str | None:
    """An FTS5 MATCH expression for any word of `text` (None if it has no word)."""
    words = query_words(text)
    return " OR ".join(f'"{w}"' for w in words) if words else None


def tsquery(text: str) -> str | None:
    """A PostgreSQL ``to_tsquery('simple', ...)`` text for any word of `text`."""
    words = query_words(text)
    return " | ".join(f"'{w}'" for w in words) if words else None


class TextIndex:
    """An inverted index of one namespace's texts, for BM25 in process."""

    __slots__ = ("lengths", "postings", "total")

    def __init__(self) -> None:
        self.postings: dict[str, dict[str, int]] = {}
        self.lengths: dict[str, int] = {}
        self.total = 0

    def add(self, key: str, text: str) -> None:
        words = tokenize(text)
        self.lengths[key] = len(words)
        self.total += len(words)
        for word, count in Counter(words).items():
            self.postings.setdefault(word, {})[key] = count

    def remove(self, key: str, text: str) -> None:
        self.total -= self.lengths.pop(key, 0)
        for word in set(tokenize(text)):
            keys = self.postings.get(word)
            if keys is not None:
                keys.pop(key, None)
                if not keys:
                    del self.postings[word]


def bm25(
    indexes: Iterable[tuple[object, TextIndex]], words: list[str]
) -> dict[tuple[object, str], float]:
    """BM25 scores of every (namespace, key) holding a word, over the given indexes together."""
    chosen = list(indexes)
    docs = sum(len(index.lengths) for _, index in chosen)
    if not docs or not words:
        return {}
    average = max(sum(index.total for _, index in chosen) / docs, 1e-9)
    scores: dict[tuple[object, str], float] = {}
    for word in words:
        df = sum(len(index.postings.get(word, ())) for _, index in chosen)
        if not df:
            continue
        idf = math.log(1 + (docs - df + 0.5) / (df + 0.5))
        for ns, index in chosen:
            for key, tf in index.postings.get(word, {}).items():
                norm = tf + _K1 * (1 - _B + _B * index.lengths[key] / average)
                scores[(ns, key)] = scores.get((ns, key), 0.0) + idf * tf * (_K1 + 1) / norm
    return scores


def reciprocal_rank_fusion(rankings: Iterable[list[K]], k: int = 60) -> dict[K, float]:
    """Each id's sum of ``1 / (k + rank)`` over the rankings it appears in (rank from 1)."""
    fused: dict[K, float] = {}
    for ranking in rankings:
        for rank, ident in enumerate(ranking, start=1):
            fused[ident] = fused.get(ident, 0.0) + 1.0 / (k + rank)
    return fused


def fuse(
    vector_hits: list[tuple[K, float]],
    text_hits: list[tuple[K, float]],
    limit: int,
    k: int = 60,
) -> list[tuple[K, float, float | None, float | None]]:
    """The best `limit` of two rankings fused by reciprocal rank: (id, fused, cosine, text).

    Ties go to the better vector rank, then the better text rank, so the order is stable.
    """
    similarity = dict(vector_hits)
    relevance = dict(text_hits)
    fused = reciprocal_rank_fusion([[i for i, _ in vector_hits], [i for i, _ in text_hits]], k)
    vrank = {i: r for r, (i, _) in enumerate(vector_hits)}
    trank = {i: r for r, (i, _) in enumerate(text_hits)}
    worst = len(vector_hits) + len(text_hits) + 1
    order = sorted(fused, key=lambda i: (-fused[i], vrank.get(i, worst), trank.get(i, worst)))[
        :limit
    ]
    return [(i, fused[i], similarity.get(i), relevance.get(i)) for i in order]
