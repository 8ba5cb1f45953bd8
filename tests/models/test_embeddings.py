"""Embedding clients: the shared batching, concurrency bound and cache; the deterministic
client; the OpenAI-compatible client against a real HTTP server on 127.0.0.1 (scripted
answers and failures); the embedded WordLlama model."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pytest

from cantata.core import ModelConnectionError, ModelHTTPError, ModelOutputError, UsageError
from cantata.core import TimeoutError as CantataTimeoutError
from cantata.models.embeddings import (
    BaseEmbeddingClient,
    EmbeddingClient,
    HashEmbeddingClient,
    LocalEmbeddingClient,
    OpenAIEmbeddingClient,
)

from .._chat_server import Reply, chat_server
from ._llama_server import llama_server


class Counting(BaseEmbeddingClient):
    """Vectors from the text's length; records each batch and how many ran at once."""

    def __init__(self, **options: object) -> None:
        super().__init__(dimensions=3, **options)  # type: ignore[arg-type]
        self.batches: list[list[str]] = []
        self.running = 0
        self.most = 0

    async def _embed_batch(self, texts: list[str]) -> Sequence[Sequence[float]]:
        self.batches.append(texts)
        self.running += 1
        self.most = max(self.most, self.running)
        await asyncio.sleep(0.01)
        self.running -= 1
        return [[len(t), 1.0, 0.5] for t in texts]


async def test_cache_and_repeats_cost_nothing() -> None:
    client = Counting(batch_size=2)
    first = await client.embed(["a", "bb", "a", "ccc"])
    assert first == [[1.0, 1.0, 0.5], [2.0, 1.0, 0.5], [1.0, 1.0, 0.5], [3.0, 1.0, 0.5]]
    assert client.batches == [["a", "bb"], ["ccc"]]
    assert await client.embed(["ccc", "a"]) == [[3.0, 1.0, 0.5], [1.0, 1.0, 0.5]]
    assert len(client.batches) == 2
    stats = client.stats
    assert (stats.hits, stats.misses, stats.batches) == (3, 3, 2)


async def test_concurrency_is_bounded_and_calls_share_requests() -> None:
    client = Counting(batch_size=1, max_concurrency=2)
    texts = [f"t{i}" for i in range(8)]
    results = await asyncio.gather(client.embed(texts), client.embed(texts[::-1]))
    assert results[0] == results[1][::-1]
    assert client.most == 2
    assert sorted(t for b in client.batches for t in b) == sorted(texts)  # each once


async def test_cache_is_bounded() -> None:
    client = Counting(cache_size=2)
    await client.embed(["a", "b", "c"])
    await client.embed(["a"])
    assert client.stats.misses == 4


async def test_bad_input_and_bad_answers() -> None:
    client = Counting()
    with pytest.raises(UsageError, match="list of strings"):
        await client.embed("one text")
    with pytest.raises(UsageError):
        await client.embed([b"bytes"])  # type: ignore[list-item]

    class Wrong(BaseEmbeddingClient):
        def __init__(self, answer: list[list[float]]) -> None:
            super().__init__(dimensions=2)
            self.answer = answer

        async def _embed_batch(self, texts: list[str]) -> Sequence[Sequence[float]]:
            return self.answer

    with pytest.raises(ModelOutputError, match="asked for 1 vectors, got 2"):
        await Wrong([[1, 0], [0, 1]]).embed(["x"])
    with pytest.raises(ModelOutputError, match="3 dimensions, expected 2"):
        await Wrong([[1, 0, 0]]).embed(["x"])
    with pytest.raises(ModelOutputError, match="finite"):
        await Wrong([[float("nan"), 0]]).embed(["x"])


def test_hash_vectors_are_unit_stable_and_meaningful() -> None:
    client = HashEmbeddingClient(64)
    tea, tea2, coffee = (client.vector(t) for t in ("green tea", "Green teas!", "black coffee"))
    assert tea.shape == (64,) and tea.dtype == np.float32
    assert np.linalg.norm(tea) == pytest.approx(1.0, abs=1e-6)
    assert float(tea @ tea2) > float(tea @ coffee)
    assert np.linalg.norm(client.vector("!!!")) == pytest.approx(1.0, abs=1e-6)
    code = (
        "from cantata.models.embeddings import HashEmbeddingClient;"
        "print(HashEmbeddingClient(64).vector('green tea').tolist())"
    )
    other = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert eval(other.stdout) == tea.tolist()  # the same in another process


async def test_clients_satisfy_the_protocol() -> None:
    for client in (HashEmbeddingClient(), LocalEmbeddingClient(), OpenAIEmbeddingClient("m")):
        assert isinstance(client, EmbeddingClient)


# -- the OpenAI-compatible client against a real HTTP server ------------------------------------


def _answer(*vectors: list[float], shuffled: bool = False) -> Reply:
    data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
    if shuffled:
        data.reverse()
    return Reply(body={"object": "list", "data": data, "model": "m"})


async def test_openai_client_batches_and_caches() -> None:
    with chat_server(_answer([1, 0], [0, 1], shuffled=True), _answer([1, 1])) as server:
        async with OpenAIEmbeddingClient(
            "nomic", base_url=server.url, api_key="k", batch_size=2, max_concurrency=1
        ) as client:
            vectors = await client.embed(["a", "b", "c"])
            assert vectors == [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
            assert client.dimensions == 2
            assert await client.embed(["c", "a"]) == [[1.0, 1.0], [1.0, 0.0]]
    assert [r["input"] for r in server.requests] == [["a", "b"], ["c"]]
    assert server.requests[0]["model"] == "nomic"
    assert server.requests[0]["encoding_format"] == "float"
    assert server.auth == ["Bearer k", "Bearer k"]


async def test_openai_client_errors() -> None:
    replies = [
        Reply(429, {"error": {"message": "slow down"}}, headers={"retry-after": "7"}),
        Reply(200, {"nothing": "here"}),
        _answer([1, 0]),
        Reply(drop=True),
    ]
    with chat_server(*replies) as server:
        client = OpenAIEmbeddingClient("m", base_url=server.url, dimensions=2)
        with pytest.raises(ModelHTTPError, match="429: slow down") as caught:
            await client.embed(["a"])
        assert caught.value.status_code == 429 and caught.value.retry_after == 7.0
        with pytest.raises(ModelOutputError, match="not an embeddings response"):
            await client.embed(["a"])
        with pytest.raises(ModelOutputError, match="1 vectors for 2 texts"):
            await client.embed(["a", "b"])
        with pytest.raises(ModelConnectionError):
            await client.embed(["z"])
        await client.close()


async def test_openai_client_times_out() -> None:
    hold = threading.Event()
    with chat_server(Reply(hold=hold)) as server:
        client = OpenAIEmbeddingClient("m", base_url=server.url, timeout=0.2)
        with pytest.raises(CantataTimeoutError, match=r"longer than 0\.2s"):
            await client.embed(["a"])
        await client.close()


async def test_openai_client_refuses_without_permission() -> None:
    with pytest.raises(UsageError, match="blocked"):
        await OpenAIEmbeddingClient("m", base_url="http://127.0.0.1:9/v1").embed(["a"])


# -- the embedded model ---------------------------------------------------------------------------


async def test_local_model_embeds_offline() -> None:
    client = LocalEmbeddingClient()
    texts = ["I like green tea", "Tea is my favourite drink", "The stock market fell today"]
    vectors = np.array(await client.embed(texts))
    assert vectors.shape == (3, 256)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]
    short = LocalEmbeddingClient(dimensions=64)
    cut = np.array(await short.embed(texts[:1]))
    assert cut.shape == (1, 64) and np.linalg.norm(cut) == pytest.approx(1.0, abs=1e-5)


async def test_openai_client_pools_token_vectors() -> None:
    tokens = Reply(body={"data": [{"index": 0, "embedding": [[1.0, 0.0], [0.0, 1.0]]}]})
    with chat_server(tokens) as server:
        client = OpenAIEmbeddingClient("m", base_url=server.url)
        assert await client.embed(["two tokens"]) == [[0.5, 0.5]]
        await client.close()


# -- llama.cpp's server, for real ---------------------------------------------------------------


@pytest.fixture(scope="module")
def llama_embedding_server() -> Iterator[str]:
    """llama_cpp.server with embeddings on, on the default SmolLM2 model, on 127.0.0.1."""
    with llama_server("--embedding", "true", "--n_ctx", "512") as url:
        yield url


@pytest.mark.openai_server
async def test_llama_server_embeddings(llama_embedding_server: str) -> None:
    async with OpenAIEmbeddingClient(
        "smollm2", base_url=llama_embedding_server, timeout=120, batch_size=2
    ) as client:
        texts = ["I like green tea", "green tea is what I like", "the stock market fell"]
        vectors = np.array(await client.embed(texts))
        assert vectors.shape == (3, client.dimensions) and client.dimensions == 576
        assert np.isfinite(vectors).all() and not np.allclose(vectors[0], vectors[2])
        batches = client.stats.batches
        assert batches == 2
        again = await client.embed(texts[::-1])
        assert again == vectors.tolist()[::-1] and client.stats.batches == batches
    # A chat model's pooled vectors carry little meaning, so the test checks the protocol:
    # a fresh client asking for one text alone gets the vector the batch gave it.
    async with OpenAIEmbeddingClient("smollm2", base_url=llama_embedding_server) as fresh:
        alone = np.array(await fresh.embed(texts[2:]))
        assert np.allclose(alone[0], vectors[2], atol=1e-3)


async def test_embedding_spans(spans: Any) -> None:
    """An ``embeddings <model>`` client span per call: texts, cache hits and batches as
    sent to a real HTTP server; a failed call's span is an error."""
    with chat_server(_answer([1, 0], [0, 1]), Reply(503, {"error": {"message": "busy"}})) as srv:
        async with OpenAIEmbeddingClient(
            "nomic", base_url=srv.url, api_key="k", batch_size=2
        ) as client:
            await client.embed(["a", "b"])
            await client.embed(["b", "a"])
            with pytest.raises(ModelHTTPError):
                await client.embed(["c"])
    await HashEmbeddingClient(8).embed(["x"])
    found = [s for s in spans.get_finished_spans() if s.name.startswith("embeddings")]
    assert [s.name for s in found] == ["embeddings nomic"] * 3 + ["embeddings HashEmbeddingClient"]
    first, cached, failed, _ = (dict(s.attributes) for s in found)
    assert first["gen_ai.operation.name"] == "embeddings"
    assert first["gen_ai.request.model"] == "nomic"
    assert (first["cantata.embeddings.texts"], first["cantata.embeddings.batches"]) == (2, 1)
    assert first["gen_ai.embeddings.dimension.count"] == 2
    assert (cached["cantata.embeddings.cached"], cached["cantata.embeddings.batches"]) == (2, 0)
    assert found[2].status.status_code.name == "ERROR" and "cantata.embeddings.cached" not in failed
