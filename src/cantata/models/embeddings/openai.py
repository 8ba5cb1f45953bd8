"""Embeddings from any server that speaks OpenAI's ``POST /v1/embeddings`` (OpenAI, Azure
OpenAI, Ollama, vLLM, llama.cpp's server), over httpx: one request per batch."""

from __future__ import annotations

import email.utils
import os
import time
from collections.abc import Sequence
from typing import Any

import httpx

from ...core import (
    ConfigurationError,
    ModelConnectionError,
    ModelHTTPError,
    ModelOutputError,
    TimeoutError,
    short_repr,
)
from ..guard import check_model_requests_allowed
from .client import BaseEmbeddingClient

__all__ = ["OpenAIEmbeddingClient"]


class OpenAIEmbeddingClient(BaseEmbeddingClient):
    """An `EmbeddingClient` on an OpenAI-compatible ``/embeddings`` endpoint.

    `base_url` ends before ``/embeddings`` (``http://127.0.0.1:8080/v1``); the key comes
    from `api_key`, else ``CANTATA_API_KEY`` or ``OPENAI_API_KEY``, else none is sent (a
    local server). `dimensions` is the model's size if known (else the first answer tells
    it); `request_dimensions` also asks the server for that size (OpenAI's
    ``text-embedding-3`` models can shorten their vectors). Every request waits at most
    `timeout` seconds; an unreachable server is a `ModelConnectionError`, an HTTP error a
    `ModelHTTPError` with its status, body and Retry-After.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str = "https://api.openai.com/v1",
        api_key: str | None = None,
        dimensions: int | None = None,
        request_dimensions: bool = False,
        timeout: float = 60.0,
        batch_size: int = 64,
        max_concurrency: int = 4,
        cache_size: int = 10_000,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        super().__init__(
            dimensions=dimensions,
            batch_size=batch_size,
            max_concurrency=max_concurrency,
            cache_size=cache_size,
        )
        if type(model) is not str or not model:
            raise ConfigurationError("OpenAIEmbeddingClient: model must be a non-empty str")
        if not (isinstance(timeout, int | float) and 0 < timeout < 1e6):
            raise ConfigurationError("OpenAIEmbeddingClient: timeout must be seconds > 0")
        if request_dimensions and dimensions is None:
            raise ConfigurationError(
                "OpenAIEmbeddingClient: request_dimensions=True needs dimensions=<size>"
            )
        self.model = model
        self.base_url = base_url.rstrip("/")
        key = api_key or os.environ.get("CANTATA_API_KEY") or os.environ.get("OPENAI_API_KEY")
        self._headers = {"authorization": f"Bearer {key}"} if key else {}
        self._request_dimensions = request_dimensions
        self._timeout = float(timeout)
        self._http = http_client
        self._own_http = http_client is None

    def __repr__(self) -> str:
        return f"OpenAIEmbeddingClient(model={self.model!r}, base_url={self.base_url!r})"

    async def close(self) -> None:
        """Close the HTTP connections this client opened (not a client it was given)."""
        if self._own_http and self._http is not None:
            await self._http.aclose()
        self._http = None

    async def __aenter__(self) -> OpenAIEmbeddingClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _embed_batch(self, texts: list[str]) -> Sequence[Sequence[float]]:
        check_model_requests_allowed("OpenAIEmbeddingClient")
        if self._http is None:
            self._http = httpx.AsyncClient(timeout=self._timeout)
            self._own_http = True
        body: dict[str, Any] = {"model": self.model, "input": texts, "encoding_format": "float"}
        if self._request_dimensions:
            body["dimensions"] = self._dimensions
        url = f"{self.base_url}/embeddings"
        where = f"model {self.model!r} at {self.base_url}"
        try:
            response = await self._http.post(
                url, json=body, headers=self._headers, timeout=self._timeout
            )
        except httpx.TimeoutException as exc:
            raise TimeoutError(
                f"the embeddings request to {where} took longer than {self._timeout}s; "
                "raise timeout=, or send smaller batches (batch_size=)",
                timeout=self._timeout,
            ) from exc
        except httpx.HTTPError as exc:
            raise ModelConnectionError(
                f"cannot reach the embeddings server for {where}: {exc}; check that it runs "
                "and that base_url is right"
            ) from exc
        if response.status_code >= 400:
            raise _http_error(response, where)
        return _vectors(response, len(texts), where)


def _http_error(response: httpx.Response, where: str) -> ModelHTTPError:
    try:
        body: Any = response.json()
    except ValueError:
        body = response.text[:2000]
    detail = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(detail, dict):
        detail = detail.get("message", detail)
    hint = {
        401: "check the API key",
        404: "check base_url and the model name",
        429: "slow down, or retry after the time the server asked for",
    }.get(response.status_code, "see the server's message")
    return ModelHTTPError(
        f"the embeddings server for {where} answered {response.status_code}: "
        f"{detail[:300] if isinstance(detail, str) else short_repr(detail, 300)}; {hint}",
        status_code=response.status_code,
        body=body,
        retry_after=_retry_after(response.headers.get("retry-after")),
    )


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _vectors(response: httpx.Response, count: int, where: str) -> list[list[float]]:
    try:
        payload = response.json()
        data = payload["data"]
        ordered = sorted(data, key=lambda d: d.get("index", 0))
        vectors = [d["embedding"] for d in ordered]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ModelOutputError(
            f"the embeddings server for {where} answered something that is not an embeddings "
            f"response ({short_repr(response.text, 200)}): {exc!r}"
        ) from exc
    if len(vectors) != count or not all(isinstance(v, list) for v in vectors):
        raise ModelOutputError(
            f"the embeddings server for {where} returned {len(vectors)} vectors for {count} "
            "texts (or vectors that are not lists; ask for encoding_format 'float')"
        )
    return [_pooled(v, where) for v in vectors]


def _pooled(vector: list[Any], where: str) -> list[float]:
    """A text's vector; token vectors (llama-cpp-python's server on a model without pooling
    answers one per token) are averaged into one, as a pooling model would."""
    if not vector or not isinstance(vector[0], list):
        return vector
    import numpy as np

    try:
        tokens = np.asarray(vector, dtype=np.float64)
    except ValueError as exc:
        raise ModelOutputError(
            f"the embeddings server for {where} returned token vectors of different sizes"
        ) from exc
    if tokens.ndim != 2:
        raise ModelOutputError(f"the embeddings server for {where} returned nested vectors")
    pooled: list[float] = tokens.mean(axis=0).tolist()
    return pooled
