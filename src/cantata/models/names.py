"""One way to name a model: ``"provider:model"`` resolves to a `ChatClient`, the same in
code, the CLI (``--model``), specs (``model: openai:gpt-4o-mini``) and ``cantata serve``.

A provider is a preset: which client speaks its API (OpenAI's Chat Completions, Anthropic's
Messages, Azure OpenAI, the embedded model), its base URL, and the environment variables its
key and URL come from. Keys are only ever read from the provider's own variables, so the key
of one provider is never sent to another.
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from ..core import ConfigurationError
from .client import ChatClient

__all__ = ["PROVIDERS", "Provider", "parse_model_name", "resolve_model"]

Api = Literal["openai", "anthropic", "azure", "local"]


@dataclass(frozen=True, slots=True)
class Provider:
    """A named configuration of one of cantata's clients."""

    name: str
    api: Api
    description: str
    base_url: str | None = None
    """Where the provider answers; None for the client's own default."""
    key_variables: tuple[str, ...] = ()
    """Environment variables read for the key, first set wins."""
    url_variable: str | None = None
    """An environment variable that replaces `base_url` when set."""
    needs_key: bool = False
    options: tuple[tuple[str, Any], ...] = ()
    """Client options the provider's server needs (e.g. a structured-output mode)."""

    def url(self) -> str | None:
        """The base URL: the environment's when `url_variable` is set, else the preset's."""
        if self.url_variable:
            value = os.environ.get(self.url_variable)
            if value:
                return _ollama_url(value) if self.name == "ollama" else value
        if self.name == "bedrock":
            region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
            return f"https://bedrock-runtime.{region or 'us-west-2'}.amazonaws.com/openai/v1"
        return self.base_url


def _ollama_url(host: str) -> str:
    """``OLLAMA_HOST`` is ``host:port`` or a URL without ``/v1``, as Ollama itself reads it."""
    url = host if "://" in host else f"http://{host}"
    return url.rstrip("/") + ("" if url.rstrip("/").endswith("/v1") else "/v1")


_OPENAI_KEYS = ("CANTATA_API_KEY", "OPENAI_API_KEY")

PROVIDERS: dict[str, Provider] = {
    p.name: p
    for p in (
        Provider("openai", "openai", "OpenAI", None, _OPENAI_KEYS, "OPENAI_BASE_URL", True),
        Provider(
            "openai-compatible", "openai",
            "any server speaking the Chat Completions API: openai-compatible:URL#model",
            None, _OPENAI_KEYS,
        ),
        Provider(
            "anthropic", "anthropic", "Anthropic", None, ("ANTHROPIC_API_KEY",),
            "ANTHROPIC_BASE_URL", True,
        ),
        Provider(
            "anthropic-compatible", "anthropic",
            "any server speaking the Messages API: anthropic-compatible:URL#model",
            None, ("ANTHROPIC_API_KEY",),
        ),
        Provider(
            "azure", "azure", "Azure OpenAI: azure:DEPLOYMENT (AZURE_OPENAI_ENDPOINT)",
            None, ("AZURE_OPENAI_API_KEY",),
        ),
        Provider(
            "gemini", "openai", "Google Gemini, through its OpenAI-compatible endpoint",
            "https://generativelanguage.googleapis.com/v1beta/openai",
            ("GEMINI_API_KEY", "GOOGLE_API_KEY"), "GEMINI_BASE_URL", True,
        ),
        Provider(
            "bedrock", "openai",
            "Amazon Bedrock, through its OpenAI-compatible endpoint (AWS_REGION)",
            None, ("AWS_BEARER_TOKEN_BEDROCK",), "BEDROCK_BASE_URL", True,
        ),
        Provider(
            "openrouter", "openai", "OpenRouter", "https://openrouter.ai/api/v1",
            ("OPENROUTER_API_KEY",), "OPENROUTER_BASE_URL", True,
        ),
        Provider(
            "ollama", "openai", "Ollama on this machine (OLLAMA_HOST)",
            "http://127.0.0.1:11434/v1", ("OLLAMA_API_KEY",), "OLLAMA_HOST",
        ),
        Provider(
            "vllm", "openai", "a vLLM server (VLLM_BASE_URL)", "http://127.0.0.1:8000/v1",
            ("VLLM_API_KEY",), "VLLM_BASE_URL",
        ),
        Provider("local", "local", "the embedded model (local, or local:PATH.gguf)"),
    )
}  # fmt: skip
"""The providers a model name may start with."""


def parse_model_name(name: str) -> tuple[Provider, str | None, str]:
    """``(provider, base_url, model)`` of a model name; `ConfigurationError` when unusable.

    ``openai:gpt-4o-mini``; ``ollama:qwen2.5:7b`` (only the first ``:`` separates);
    ``openai-compatible:http://127.0.0.1:8080/v1#smollm2``: a URL may hold ``:`` and ``/``
    but a base URL never has a fragment, so the model follows the ``#``.
    """
    if not isinstance(name, str) or not name.strip():
        raise ConfigurationError(
            f"a model name is a string like 'openai:gpt-4o-mini' or 'local', got {name!r:.80}"
        )
    text = name.strip()
    head, sep, rest = text.partition(":")
    provider = PROVIDERS.get(head.lower())
    if provider is None:
        raise ConfigurationError(
            f"model name {text!r:.200} does not start with a known provider; write "
            f"'provider:model' with one of {sorted(PROVIDERS)} (e.g. 'openai:{text:.60}')"
        )
    if provider.api == "local":
        return provider, None, rest
    if provider.name.endswith("-compatible"):
        url, hash_, model = rest.rpartition("#")
        if not hash_ or not url or not model:
            raise ConfigurationError(
                f"model name {text!r:.200}: write {provider.name}:URL#MODEL, e.g. "
                f"'{provider.name}:http://127.0.0.1:8080/v1#smollm2'"
            )
        _check_url(url, text)
        return provider, url, model
    if not sep or not rest:
        raise ConfigurationError(
            f"model name {text!r:.200} names no model; write '{provider.name}:MODEL'"
        )
    return provider, provider.url(), rest


def _check_url(url: str, name: str) -> None:
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 -- parsing the port is what checks it
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(
            f"model name {name!r:.200}: {url!r:.200} is not an http(s) URL with a host"
        )


def resolve_model(
    name: str | ChatClient,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    **options: Any,
) -> ChatClient:
    """The client a model name stands for (a client is returned as it is).

    ``resolve_model("openai:gpt-4o-mini")``, ``resolve_model("anthropic:claude-sonnet-4-5")``,
    ``resolve_model("local")``, ``resolve_model("ollama:llama3.2")``,
    ``resolve_model("openai-compatible:http://127.0.0.1:8080/v1#smollm2")``; `base_url` and
    `api_key` replace the preset's, and other keyword `options` go to the client
    (``timeout=``, ``default_options=``, Azure's ``token_provider=``...). See `PROVIDERS`.
    """
    if not isinstance(name, str):
        if isinstance(name, ChatClient):
            return name
        raise ConfigurationError(
            "a model is a name like 'openai:gpt-4o-mini' or a ChatClient, got "
            + type(name).__name__
        )
    provider, url, model = parse_model_name(name)
    return _BUILDERS[provider.api](provider, model, base_url or url, api_key, options)


def _key(provider: Provider, api_key: str | None, model: str) -> str | None:
    key = api_key or next(
        (os.environ[v] for v in provider.key_variables if os.environ.get(v)), None
    )
    if key is None and provider.needs_key:
        raise ConfigurationError(
            f"model '{provider.name}:{model}' needs an API key: set "
            f"{' or '.join(provider.key_variables)}, or pass api_key="
        )
    return key


def _openai(
    provider: Provider, model: str, url: str | None, api_key: str | None, options: dict[str, Any]
) -> ChatClient:
    from .openai_chat import OpenAIChatClient

    key = _key(provider, api_key, model)
    args = dict(provider.options) | options
    return OpenAIChatClient(
        model, base_url=url, api_key=key, key_variables=provider.key_variables, **args
    )


def _anthropic(
    provider: Provider, model: str, url: str | None, api_key: str | None, options: dict[str, Any]
) -> ChatClient:
    from .anthropic import AnthropicChatClient

    key = _key(provider, api_key, model)
    return AnthropicChatClient(model, base_url=url, api_key=key, **options)


def _azure(
    provider: Provider, model: str, url: str | None, api_key: str | None, options: dict[str, Any]
) -> ChatClient:
    from .azure_openai import AzureOpenAIChatClient

    return AzureOpenAIChatClient(model, base_url=url, api_key=api_key, **options)


def _local(
    provider: Provider, model: str, url: str | None, api_key: str | None, options: dict[str, Any]
) -> ChatClient:
    from .local import LocalChatClient

    if url is not None or api_key is not None:
        raise ConfigurationError(
            "the embedded model ('local') takes no base_url= or api_key=; name a server's "
            "model as 'openai-compatible:URL#MODEL'"
        )
    return LocalChatClient(model or None, **options)


_BUILDERS: dict[Api, Callable[..., ChatClient]] = {
    "openai": _openai,
    "anthropic": _anthropic,
    "azure": _azure,
    "local": _local,
}
