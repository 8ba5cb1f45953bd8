"""Which model the CLI talks to: the embedded local model, a ``provider:model`` name (see
`cantata.models.resolve_model`), or a model on an OpenAI-compatible server."""

from __future__ import annotations

from dataclasses import dataclass

from ..core import ConfigurationError
from ..models import (
    PROVIDERS,
    ChatClient,
    ChatOptions,
    LocalChatClient,
    OpenAIChatClient,
    resolve_model,
)
from ..models.openai_chat import API_KEY_VARIABLES

__all__ = ["API_KEY_VARIABLES", "ClientOptions"]


@dataclass(slots=True, kw_only=True)
class ClientOptions:
    """The model flags shared by every command."""

    model: str | None = None
    base_url: str | None = None
    model_path: str | None = None
    system: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None

    def client(self) -> ChatClient:
        """`LocalChatClient` unless `--model` names another model or `--base-url` a server.

        A `--model` that starts with a provider (``anthropic:claude-...``) resolves through
        `resolve_model`, with `--base-url` in place of the provider's URL; any other name is
        a model on the `--base-url` server (``qwen2.5:7b`` on Ollama stays a model name)."""
        if self.model is None and self.base_url is None:
            return LocalChatClient(self.model_path)
        if self.model is not None and _provider(self.model) == "local":
            if self.base_url is not None:
                raise ConfigurationError(
                    f"--model {self.model} runs the embedded model and cannot be combined "
                    "with --base-url; drop one of them"
                )
            path = self.model.partition(":")[2] or None
            if path is not None and self.model_path is not None:
                raise ConfigurationError("--model local:PATH and --model-path: give one of them")
            return LocalChatClient(path or self.model_path)
        if self.model_path is not None:
            raise ConfigurationError(
                "--model-path runs a local GGUF file and cannot be combined with "
                "--model/--base-url; drop one of them"
            )
        if self.model is None:
            raise ConfigurationError(
                f"--base-url {self.base_url} needs --model NAME (the model the server runs)"
            )
        if _provider(self.model) is not None:
            return resolve_model(self.model, base_url=self.base_url)
        # the client reads the key from API_KEY_VARIABLES itself
        return OpenAIChatClient(self.model, base_url=self.base_url)

    def chat_options(self) -> ChatOptions:
        """Per-request options from the flags."""
        return ChatOptions(max_tokens=self.max_tokens, temperature=self.temperature)


def _provider(model: str) -> str | None:
    """The provider a ``--model`` starts with, or None for a bare model name."""
    head, sep, _ = model.partition(":")
    name = head.strip().lower()
    if name == "local":
        return name
    return name if sep and name in PROVIDERS else None
