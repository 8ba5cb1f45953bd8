"""The `EmbeddingClient` protocol, and the base that batches, bounds and caches for every client.

A text is embedded once: the base keeps vectors by the SHA-256 of their text (a bounded
LRU), so re-embedding unchanged text costs nothing, and concurrent calls that ask for the
same text share one request. Misses go out in batches of `batch_size`, at most
`max_concurrency` at a time. Vectors are float32 values (what stores keep), returned as
lists of floats, so a cached vector and a fresh one are the same numbers.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from ...core import ConfigurationError, UsageError, short_repr, tracing

__all__ = ["BaseEmbeddingClient", "EmbeddingClient", "EmbeddingStats"]


@runtime_checkable
class EmbeddingClient(Protocol):
    """Turns texts into vectors of one size, for similarity search."""

    @property
    def dimensions(self) -> int | None:
        """The size of the vectors (None while unknown: before a server's first answer)."""
        ...

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order."""
        ...


@dataclass(frozen=True, slots=True)
class EmbeddingStats:
    """What a client did: texts found in its cache, texts it embedded, batches it sent."""

    hits: int
    misses: int
    batches: int


class BaseEmbeddingClient:
    """Batching, bounded concurrency and a content-hash cache around `_embed_batch`.

    Subclasses implement ``async _embed_batch(texts) -> list of vectors`` for one batch.
    `cache_size` is the number of vectors kept (0: no cache).
    """

    def __init__(
        self,
        *,
        dimensions: int | None,
        batch_size: int = 64,
        max_concurrency: int = 4,
        cache_size: int = 10_000,
    ) -> None:
        label = type(self).__name__
        for name, value, low in (
            ("batch_size", batch_size, 1),
            ("max_concurrency", max_concurrency, 1),
            ("cache_size", cache_size, 0),
        ):
            if type(value) is not int or value < low:
                raise ConfigurationError(f"{label}: {name} must be an int >= {low}, got {value!r}")
        if dimensions is not None and (type(dimensions) is not int or dimensions < 1):
            raise ConfigurationError(f"{label}: dimensions must be an int >= 1, got {dimensions!r}")
        self._dimensions = dimensions
        self.batch_size = batch_size
        self.max_concurrency = max_concurrency
        self.cache_size = cache_size
        self._cache: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self._pending: dict[bytes, asyncio.Future[np.ndarray]] = {}
        self._slots: asyncio.Semaphore | None = None
        self._hits = self._misses = self._batches = 0

    @property
    def dimensions(self) -> int | None:
        """The size of the vectors (None while unknown)."""
        return self._dimensions

    @property
    def stats(self) -> EmbeddingStats:
        """Cache hits, texts embedded and batches sent so far."""
        return EmbeddingStats(self._hits, self._misses, self._batches)

    @property
    def model_name(self) -> str:
        """The model's name in traces (the client's own name where it has none)."""
        return str(getattr(self, "model", None) or type(self).__name__)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order; cached texts and repeats are not embedded again.

        Traced as an ``embeddings <model>`` span (the GenAI conventions' operation), with
        how many texts were asked for, found in the cache, and sent in how many batches.
        """
        if isinstance(texts, str) or not isinstance(texts, Sequence):
            raise UsageError(
                f"{type(self).__name__}.embed takes a list of strings, got "
                f"{type(texts).__name__}; wrap a single text in a list"
            )
        if not tracing.enabled():
            return await self._embed(texts)
        model = self.model_name
        attributes = {
            "gen_ai.operation.name": "embeddings",
            "gen_ai.request.model": model,
            "cantata.embeddings.texts": len(texts),
        }
        with tracing.span(f"embeddings {model}", attributes, kind="client") as span:
            before = self.stats
            vectors = await self._embed(texts)
            after = self.stats
            span.set_attribute("cantata.embeddings.cached", after.hits - before.hits)
            span.set_attribute("cantata.embeddings.batches", after.batches - before.batches)
            if self._dimensions is not None:
                span.set_attribute("gen_ai.embeddings.dimension.count", self._dimensions)
            return vectors

    async def _embed(self, texts: Sequence[str]) -> list[list[float]]:
        digests = [_digest(t, type(self).__name__) for t in texts]
        found: dict[bytes, np.ndarray] = {}
        waiting: dict[bytes, asyncio.Future[np.ndarray]] = {}
        missing: dict[bytes, str] = {}
        for digest, text in zip(digests, texts, strict=True):
            if digest in found or digest in waiting or digest in missing:
                self._hits += 1  # a repeat within the call: embedded once
                continue
            cached = self._cache.get(digest)
            if cached is not None:
                self._cache.move_to_end(digest)
                found[digest] = cached
                self._hits += 1
            elif digest in self._pending:
                waiting[digest] = self._pending[digest]
                self._hits += 1
            else:
                missing[digest] = text
        if missing:
            found.update(await self._fetch(missing))
        for digest, future in waiting.items():
            found[digest] = await asyncio.shield(future)
        return [found[d].tolist() for d in digests]

    async def _fetch(self, missing: dict[bytes, str]) -> dict[bytes, np.ndarray]:
        loop = asyncio.get_running_loop()
        futures = {d: loop.create_future() for d in missing}
        self._pending.update(futures)
        keys = list(missing)
        batches = [keys[i : i + self.batch_size] for i in range(0, len(keys), self.batch_size)]
        try:
            results = await asyncio.gather(
                *(self._one_batch([missing[d] for d in batch]) for batch in batches)
            )
        except BaseException as exc:
            for future in futures.values():
                if not future.done():
                    future.set_exception(exc)
                    future.exception()  # retrieved: the caller gets `exc` itself
            raise
        finally:
            for digest in futures:
                self._pending.pop(digest, None)
        out: dict[bytes, np.ndarray] = {}
        for batch, vectors in zip(batches, results, strict=True):
            for digest, vector in zip(batch, vectors, strict=True):
                out[digest] = vector
                futures[digest].set_result(vector)
                self._remember(digest, vector)
        self._misses += len(missing)
        return out

    async def _one_batch(self, texts: list[str]) -> list[np.ndarray]:
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.max_concurrency)
        async with self._slots:
            vectors = await self._embed_batch(texts)
            self._batches += 1
        return self._checked(vectors, len(texts))

    def _checked(self, vectors: Sequence[Sequence[float]], count: int) -> list[np.ndarray]:
        from ...core import ModelOutputError

        label = type(self).__name__
        if len(vectors) != count:
            raise ModelOutputError(
                f"{label}: asked for {count} vectors, got {len(vectors)}; the server's answer "
                "does not match its request"
            )
        out = []
        for vector in vectors:
            array = np.asarray(vector, dtype=np.float32)
            if array.ndim != 1 or not array.size or not np.isfinite(array).all():
                raise ModelOutputError(
                    f"{label}: the model returned a vector that is not a flat list of finite "
                    f"numbers: {short_repr(vector)}"
                )
            if self._dimensions is None:
                self._dimensions = int(array.size)
            elif array.size != self._dimensions:
                raise ModelOutputError(
                    f"{label}: the model returned a vector of {array.size} dimensions, "
                    f"expected {self._dimensions}; check the model name and `dimensions`"
                )
            array.flags.writeable = False
            out.append(array)
        return out

    def _remember(self, digest: bytes, vector: np.ndarray) -> None:
        if not self.cache_size:
            return
        self._cache[digest] = vector
        self._cache.move_to_end(digest)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)

    async def _embed_batch(self, texts: list[str]) -> Sequence[Sequence[float]]:
        raise NotImplementedError


def _digest(text: object, label: str) -> bytes:
    if type(text) is not str:
        raise UsageError(f"{label}.embed takes strings, got {type(text).__name__}")
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
