"""Which client the CLI builds from its flags and the environment."""

from __future__ import annotations

import pytest

from cantata.cli.client_options import ClientOptions
from cantata.core import ConfigurationError
from cantata.models import LocalChatClient, OpenAIChatClient


def test_local_model_by_default() -> None:
    client = ClientOptions().client()
    assert isinstance(client, LocalChatClient)


def test_local_gguf_path() -> None:
    client = ClientOptions(model_path="/models/x.gguf").client()
    assert isinstance(client, LocalChatClient) and client.model_path == "/models/x.gguf"


def test_server_with_cantata_api_key_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CANTATA_API_KEY", "k-cantata")
    monkeypatch.setenv("OPENAI_API_KEY", "k-openai")
    client = ClientOptions(model="m", base_url="http://127.0.0.1:9/v1").client()
    assert isinstance(client, OpenAIChatClient)
    assert (client.model, client.base_url, client._api_key) == (
        "m",
        "http://127.0.0.1:9/v1",
        "k-cantata",
    )


def test_openai_key_is_the_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CANTATA_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "k-openai")
    client = ClientOptions(model="gpt-4o-mini").client()
    assert isinstance(client, OpenAIChatClient) and client._api_key == "k-openai"


def test_openai_without_any_key_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CANTATA_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        ClientOptions(model="gpt-4o-mini").client()


def test_chat_options_carry_the_flags() -> None:
    options = ClientOptions(max_tokens=5, temperature=0.3).chat_options()
    assert (options.max_tokens, options.temperature) == (5, 0.3)
