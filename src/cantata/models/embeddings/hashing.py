"""A deterministic embedding for tests and examples: feature hashing of words and trigrams.

The same text gives the same vector in every process and on every machine (BLAKE2b, not
Python's salted `hash`), and texts that share words or word pieces are closer than texts
that share none, so a test of recall or ranking means something without a model.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from ...stores.memory_text import tokenize
from .client import BaseEmbeddingClient

__all__ = ["HashEmbeddingClient"]

_WORD_WEIGHT = 1.0
_TRIGRAM_WEIGHT = 0.5


class HashEmbeddingClient(BaseEmbeddingClient):
    """Unit vectors of `dimensions` (default 384) from the hashed words and trigrams of a text.

    Not a language model: it knows no synonyms. Use it where a test needs stable vectors
    and overlap-driven similarity; a text without any word gets a vector of its own bytes.
    """

    def __init__(
        self,
        dimensions: int = 384,
        *,
        batch_size: int = 256,
        max_concurrency: int = 1,
        cache_size: int = 10_000,
    ) -> None:
        super().__init__(
            dimensions=dimensions,
            batch_size=batch_size,
            max_concurrency=max_concurrency,
            cache_size=cache_size,
        )

    def vector(self, text: str) -> np.ndarray:
        """The unit float32 vector of one text, without the cache."""
        dims = self._dimensions or 384
        out = np.zeros(dims, dtype=np.float64)
        features = _features(text)
        for feature, weight in features:
            number = _hash(feature)
            out[number % dims] += weight if (number >> 63) & 1 else -weight
        norm = float(np.linalg.norm(out))
        if norm == 0.0:  # the features cancelled out: one dimension of the text's own hash
            out[_hash(text) % dims] = 1.0
            norm = 1.0
        return (out / norm).astype(np.float32)

    async def _embed_batch(self, texts: list[str]) -> Sequence[Sequence[float]]:
        return [self.vector(t) for t in texts]  # type: ignore[misc]


def _hash(text: str) -> int:
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def _features(text: str) -> list[tuple[str, float]]:
    words = tokenize(text)
    if not words:
        return [("\x00" + text, _WORD_WEIGHT)]
    found: list[tuple[str, float]] = []
    for word in words:
        found.append(("w:" + word, _WORD_WEIGHT))
        padded = f"^{word}$"
        found.extend(("t:" + padded[i : i + 3], _TRIGRAM_WEIGHT) for i in range(len(padded) - 2))
    return found
