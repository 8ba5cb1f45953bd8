"""`AzureOpenAIChatClient`: Azure OpenAI through the `openai` SDK's own Azure client.

Everything but the connection is `OpenAIChatClient`'s (mapping, streaming, fallbacks,
errors); the connection is ``AsyncAzureOpenAI``, which builds Azure's deployment URLs, sends
``api-version`` and takes an Entra ID token provider instead of a key.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any

from openai import AsyncAzureOpenAI, AsyncOpenAI

from ..core import ConfigurationError
from .openai_chat import OpenAIChatClient

__all__ = ["AZURE_API_VERSION", "AzureOpenAIChatClient", "TokenProvider"]

AZURE_API_VERSION = "2024-10-21"
"""The Azure OpenAI API version used when neither `api_version` nor ``OPENAI_API_VERSION``
names one (the newest generally available one with tools and structured output)."""

TokenProvider = Callable[[], "str | Awaitable[str]"]
"""Returns a Microsoft Entra ID bearer token, e.g. ``azure.identity``'s
``get_bearer_token_provider(DefaultAzureCredential(), "https://cognitiveservices.azure.com/.default")``."""


class AzureOpenAIChatClient(OpenAIChatClient):
    """A chat client for one Azure OpenAI deployment.

    ``AzureOpenAIChatClient("gpt-4o-mini")`` talks to the deployment of that name at
    ``AZURE_OPENAI_ENDPOINT`` (``https://<resource>.openai.azure.com``) with the key in
    ``AZURE_OPENAI_API_KEY`` and the API version in ``OPENAI_API_VERSION`` (else
    `AZURE_API_VERSION`); `token_provider` authenticates with Entra ID instead of a key.
    `base_url` (e.g. ``https://<resource>.openai.azure.com/openai/v1``) replaces the endpoint
    for Azure's v1 API, where `deployment` is sent as the model. Other options are
    `OpenAIChatClient`'s.
    """

    def __init__(
        self,
        deployment: str,
        *,
        endpoint: str | None = None,
        api_version: str | None = None,
        api_key: str | None = None,
        token_provider: TokenProvider | None = None,
        base_url: str | None = None,
        **options: Any,
    ) -> None:
        if not deployment:
            raise ConfigurationError(
                "AzureOpenAIChatClient needs the deployment name (as created in Azure)"
            )
        endpoint = endpoint or os.environ.get("AZURE_OPENAI_ENDPOINT") or None
        if (endpoint is None) == (base_url is None):
            raise ConfigurationError(
                f"AzureOpenAIChatClient for deployment {deployment!r} needs "
                + (
                    "the resource's endpoint: set AZURE_OPENAI_ENDPOINT or pass endpoint= "
                    "(https://<resource>.openai.azure.com), or base_url= for the v1 API"
                    if endpoint is None
                    else "endpoint= or base_url=, not both"
                )
            )
        api_key = api_key or os.environ.get("AZURE_OPENAI_API_KEY") or None
        if api_key is None and token_provider is None:
            raise ConfigurationError(
                f"AzureOpenAIChatClient for deployment {deployment!r} needs a credential: "
                "set AZURE_OPENAI_API_KEY, pass api_key=, or pass token_provider= (Entra ID)"
            )
        url = base_url or f"{str(endpoint).rstrip('/')}/openai/deployments/{deployment}"
        super().__init__(deployment, base_url=url, api_key=api_key, key_variables=(), **options)
        self.endpoint = endpoint.rstrip("/") if endpoint else None
        self.api_version = api_version or os.environ.get("OPENAI_API_VERSION") or AZURE_API_VERSION
        self.token_provider = token_provider
        self._omit_auth = False  # the SDK sends api-key, or the provider's bearer token

    def __repr__(self) -> str:
        return f"AzureOpenAIChatClient(deployment={self.model!r}, base_url={self.base_url!r})"

    def _new_sdk(self) -> AsyncOpenAI:
        where: dict[str, Any] = (
            {"azure_endpoint": self.endpoint, "azure_deployment": self.model}
            if self.endpoint is not None
            else {"base_url": self.base_url}
        )
        return AsyncAzureOpenAI(
            **where,
            api_version=self.api_version,
            api_key=self._api_key,
            azure_ad_token_provider=self.token_provider,
            timeout=self.timeout,
            max_retries=self.max_retries,
            default_headers=self._headers or None,
        )
