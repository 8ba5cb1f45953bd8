"""cantata.models.embeddings: the `EmbeddingClient` protocol and its clients.

- `OpenAIEmbeddingClient`: any server that speaks OpenAI's ``/v1/embeddings``.
- `LocalEmbeddingClient`: the embedded offline default (WordLlama, 256 dimensions,
  shipped in the ``cantata[local]`` extra).
- `HashEmbeddingClient`: deterministic feature hashing, for tests and examples.

Every client batches, bounds its concurrency and caches vectors by the hash of their text
(`BaseEmbeddingClient`), so embedding unchanged text again costs nothing.
"""

from .client import BaseEmbeddingClient, EmbeddingClient, EmbeddingStats
from .hashing import HashEmbeddingClient
from .local import LocalEmbeddingClient
from .openai import OpenAIEmbeddingClient

__all__ = [
    "BaseEmbeddingClient",
    "EmbeddingClient",
    "EmbeddingStats",
    "HashEmbeddingClient",
    "LocalEmbeddingClient",
    "OpenAIEmbeddingClient",
]
