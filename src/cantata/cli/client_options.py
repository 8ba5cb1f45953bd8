"""Which model the CLI talks to: the embedded local model, or an OpenAI-compatible server."""

from __future__ import annotations

from dataclasses import dataclass

from ..core import ConfigurationError
from ..models import ChatClient, ChatOptions, LocalChatClient, OpenAIChatClient
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
        """`LocalChatClient` unless `--model` or `--base-url` names a server."""
        if self.model is None and self.base_url is None:
            return LocalChatClient(self.model_path)
        if self.model_path is not None:
            raise ConfigurationError(
                "--model-path runs a local GGUF file and cannot be combined with "
                "--model/--base-url; drop one of them"
            )
        if self.model is None:
            raise ConfigurationError(
                f"--base-url {self.base_url} needs --model NAME (the model the server runs)"
            )
        # the client reads the key from API_KEY_VARIABLES itself
        return OpenAIChatClient(self.model, base_url=self.base_url)

    def chat_options(self) -> ChatOptions:
        """Per-request options from the flags."""
        return ChatOptions(max_tokens=self.max_tokens, temperature=self.temperature)
