"""The embedded offline default: WordLlama's ``l2_supercat`` model, shipped inside its wheel.

WordLlama (the `wordllama` package, in ``cantata[local]``) pools token embeddings taken
from a large language model's vocabulary: 256 dimensions, a 16 MB weight file that the
wheel carries, numpy and `tokenizers` only, tens of thousands of texts a second on a CPU.
Nothing is downloaded: the files are read from the installed package.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...core import ConfigurationError
from .client import BaseEmbeddingClient

__all__ = ["LocalEmbeddingClient"]

DIMENSIONS = 256


class LocalEmbeddingClient(BaseEmbeddingClient):
    """An `EmbeddingClient` on the embedded WordLlama model (256 dimensions), fully offline.

    The model loads on first use (under a second), in a worker thread, as does each batch.
    `dimensions` below 256 keeps the first components (the model is trained so that
    truncated vectors still work: Matryoshka representation learning).
    """

    def __init__(
        self,
        *,
        dimensions: int = DIMENSIONS,
        batch_size: int = 256,
        max_concurrency: int = 1,
        cache_size: int = 10_000,
    ) -> None:
        if type(dimensions) is not int or not 1 <= dimensions <= DIMENSIONS:
            raise ConfigurationError(
                f"LocalEmbeddingClient: dimensions must be an int from 1 to {DIMENSIONS}"
            )
        super().__init__(
            dimensions=dimensions,
            batch_size=batch_size,
            max_concurrency=max_concurrency,
            cache_size=cache_size,
        )
        self._model: Any = None
        self._loading: asyncio.Lock | None = None

    def __repr__(self) -> str:
        return f"LocalEmbeddingClient(dimensions={self._dimensions})"

    async def _embed_batch(self, texts: list[str]) -> Sequence[Sequence[float]]:
        model = await self._loaded()
        vectors = await asyncio.to_thread(model.embed, texts, norm=True)
        if self._dimensions != DIMENSIONS:
            import numpy as np

            cut = vectors[:, : self._dimensions]
            vectors = cut / np.maximum(np.linalg.norm(cut, axis=1, keepdims=True), 1e-12)
        return list(vectors)

    async def _loaded(self) -> Any:
        if self._model is not None:
            return self._model
        if self._loading is None:
            self._loading = asyncio.Lock()
        async with self._loading:
            if self._model is None:
                self._model = await asyncio.to_thread(load_model)
        return self._model


def load_model() -> Any:
    """WordLlama's default model from the installed package's own files."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        import wordllama  # configures the root logger on import: undone below
    except ModuleNotFoundError as exc:
        raise ConfigurationError(
            "LocalEmbeddingClient needs the 'wordllama' package, which is not installed: "
            "pip install 'cantata[local]'"
        ) from exc
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    package = Path(wordllama.__file__).parent
    # The wheel holds weights/ and tokenizers/; given the package as its cache directory,
    # WordLlama finds both there and never tries to download.
    return wordllama.WordLlama.load(cache_dir=package, disable_download=True)
