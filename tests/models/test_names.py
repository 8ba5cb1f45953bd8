"""Model names: each provider resolves to its client with its own URL and key variables (the
key of one provider is never sent to another), bad names are typed errors, and the CLI,
specs and ChatAgent take the same names. (Real servers: test_model_recipes.py.)"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cantata.agents import ChatAgent
from cantata.cli.client_options import ClientOptions
from cantata.core import ConfigurationError
from cantata.declarative import SpecError, load
from cantata.models import (
    PROVIDERS,
    AnthropicChatClient,
    AzureOpenAIChatClient,
    LocalChatClient,
    OpenAIChatClient,
    ScriptedChatClient,
    parse_model_name,
    resolve_model,
)

_KEYS = [
    "CANTATA_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL", "GEMINI_API_KEY", "GOOGLE_API_KEY", "GEMINI_BASE_URL",
    "OPENROUTER_API_KEY", "OLLAMA_HOST", "OLLAMA_API_KEY", "VLLM_BASE_URL", "VLLM_API_KEY",
    "AWS_BEARER_TOKEN_BEDROCK", "AWS_REGION", "AWS_DEFAULT_REGION", "AZURE_OPENAI_API_KEY",
    "AZURE_OPENAI_ENDPOINT", "OPENAI_API_VERSION", "BEDROCK_BASE_URL", "OPENROUTER_BASE_URL",
]  # fmt: skip


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _KEYS:
        monkeypatch.delenv(name, raising=False)


def test_each_openai_compatible_preset_has_its_url_and_its_own_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    monkeypatch.setenv("GEMINI_API_KEY", "gm")
    monkeypatch.setenv("OPENROUTER_API_KEY", "or")
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", "br")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    cases = {
        "openai:gpt-4o-mini": ("gpt-4o-mini", "https://api.openai.com/v1", "sk-openai"),
        "gemini:gemini-2.5-flash": (
            "gemini-2.5-flash", "https://generativelanguage.googleapis.com/v1beta/openai", "gm",
        ),
        "openrouter:openai/gpt-4o": ("openai/gpt-4o", "https://openrouter.ai/api/v1", "or"),
        "bedrock:openai.gpt-oss-20b-1:0": (
            "openai.gpt-oss-20b-1:0", "https://bedrock-runtime.eu-west-1.amazonaws.com/openai/v1",
            "br",
        ),
        "ollama:qwen2.5:7b": ("qwen2.5:7b", "http://127.0.0.1:11434/v1", None),
        "vllm:meta-llama/Llama-3.1-8B": (
            "meta-llama/Llama-3.1-8B", "http://127.0.0.1:8000/v1", None,
        ),
        "openai-compatible:http://127.0.0.1:8080/v1#smol:latest": (
            "smol:latest", "http://127.0.0.1:8080/v1", "sk-openai",
        ),
    }  # fmt: skip
    for name, (model, url, key) in cases.items():
        client = resolve_model(name)
        assert isinstance(client, OpenAIChatClient), name
        assert (client.model, client.base_url, client._api_key) == (model, url, key), name


def test_urls_and_keys_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLLAMA_HOST", "10.0.0.5:11434")
    assert resolve_model("ollama:llama3.2").base_url == "http://10.0.0.5:11434/v1"  # type: ignore[attr-defined]
    monkeypatch.setenv("GEMINI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("GOOGLE_API_KEY", "g2")
    gemini = resolve_model("gemini:gemini-2.5-pro")
    assert (gemini.base_url, gemini._api_key) == ("http://127.0.0.1:9/v1", "g2")  # type: ignore[attr-defined]
    # explicit arguments win over the preset and the environment
    mine = resolve_model("gemini:x", base_url="http://127.0.0.1:7/v1", api_key="k", timeout=5)
    assert (mine.base_url, mine._api_key, mine.timeout) == ("http://127.0.0.1:7/v1", "k", 5)  # type: ignore[attr-defined]


def test_a_provider_that_needs_a_key_says_which_variable() -> None:
    with pytest.raises(ConfigurationError, match="GEMINI_API_KEY or GOOGLE_API_KEY"):
        resolve_model("gemini:gemini-2.5-flash")
    with pytest.raises(ConfigurationError, match="ANTHROPIC_API_KEY"):
        resolve_model("anthropic:claude-sonnet-4-5")
    with pytest.raises(ConfigurationError, match="OPENROUTER_API_KEY"):
        resolve_model("openrouter:x")


def test_the_openai_key_never_goes_to_another_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    monkeypatch.setenv("CANTATA_API_KEY", "sk-cantata")
    ollama = resolve_model("ollama:llama3.2")
    assert ollama._api_key is None and ollama._omit_auth  # type: ignore[attr-defined]


def test_anthropic_azure_and_local(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant")
    claude = resolve_model("anthropic:claude-sonnet-4-5")
    assert isinstance(claude, AnthropicChatClient)
    assert (claude.model, claude.base_url, claude._api_key) == (
        "claude-sonnet-4-5", "https://api.anthropic.com", "sk-ant",
    )  # fmt: skip
    own = resolve_model("anthropic-compatible:http://127.0.0.1:8081#smol")
    assert isinstance(own, AnthropicChatClient) and own.base_url == "http://127.0.0.1:8081"
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", "https://res.openai.azure.com/")
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "az")
    azure = resolve_model("azure:gpt-4o-mini")
    assert isinstance(azure, AzureOpenAIChatClient)
    assert azure.base_url == "https://res.openai.azure.com/openai/deployments/gpt-4o-mini"
    assert azure.api_version == "2024-10-21" and azure._api_key == "az"
    monkeypatch.delenv("AZURE_OPENAI_API_KEY")
    with pytest.raises(ConfigurationError, match="token_provider"):
        resolve_model("azure:gpt-4o-mini")
    assert isinstance(resolve_model("azure:d", token_provider=lambda: "t"), AzureOpenAIChatClient)
    assert isinstance(resolve_model("local"), LocalChatClient)
    assert resolve_model("local:/models/x.gguf")._key.path == "/models/x.gguf"  # type: ignore[attr-defined]
    with pytest.raises(ConfigurationError, match="takes no base_url"):
        resolve_model("local", base_url="http://127.0.0.1:1/v1")
    scripted = ScriptedChatClient(["x"])
    assert resolve_model(scripted) is scripted


@pytest.mark.parametrize(
    ("name", "match"),
    [
        ("gpt-4o-mini", "does not start with a known provider"),
        ("openai:", "names no model"),
        ("openai-compatible:http://127.0.0.1:8080/v1", "URL#MODEL"),
        ("openai-compatible:ftp://x#m", "not an http"),
        ("openai-compatible:http://[::1#m", "not an http"),
        ("", "a model name is a string"),
    ],
)
def test_bad_names_are_typed_errors_that_say_how_to_write_one(name: str, match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        parse_model_name(name)


@given(st.text(max_size=80))
def test_any_text_either_parses_or_is_a_configuration_error(text: str) -> None:
    try:
        provider, _, model = parse_model_name(text)
    except ConfigurationError as exc:
        assert str(exc)
    else:
        assert provider.name in PROVIDERS
        assert provider.api == "local" or model


def test_the_cli_and_agents_take_the_same_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant")
    claude = ClientOptions(model="anthropic:claude-haiku-4-5").client()
    assert isinstance(claude, AnthropicChatClient) and claude.model == "claude-haiku-4-5"
    # a bare name on --base-url stays a model name there, even with a colon in it
    ollama = ClientOptions(model="qwen2.5:7b", base_url="http://127.0.0.1:11434/v1").client()
    assert isinstance(ollama, OpenAIChatClient) and ollama.model == "qwen2.5:7b"
    moved = ClientOptions(model="vllm:m", base_url="http://127.0.0.1:9000/v1").client()
    assert moved.base_url == "http://127.0.0.1:9000/v1"  # type: ignore[attr-defined]
    assert isinstance(ClientOptions(model="local").client(), LocalChatClient)
    with pytest.raises(ConfigurationError, match="--base-url"):
        ClientOptions(model="local", base_url="http://127.0.0.1:1/v1").client()
    agent = ChatAgent("anthropic:claude-haiku-4-5", name="a")
    assert isinstance(agent.client, AnthropicChatClient) and agent.owns_client


SPEC = "version: 1\ntype: chat_agent\nname: a\n"


def test_specs_take_a_model_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", "or")
    agent = load(SPEC + "model: openrouter:anthropic/claude-sonnet-4.5\ninstructions: hi\n")
    assert isinstance(agent.client, OpenAIChatClient)  # type: ignore[attr-defined]
    assert agent.client.base_url == "https://openrouter.ai/api/v1"  # type: ignore[attr-defined]
    long_form = load(
        SPEC + "model:\n  name: ollama:llama3.2\n  options: {temperature: 0}\n"
        "  connection: {base_url: 'http://127.0.0.1:9/v1', timeout: 7}\n"
    )
    assert long_form.client.base_url == "http://127.0.0.1:9/v1"  # type: ignore[attr-defined]
    assert long_form.client.timeout == 7  # type: ignore[attr-defined]
    assert long_form.options.temperature == 0  # type: ignore[attr-defined]
    with pytest.raises(SpecError, match="known provider"):
        load(SPEC + "model: gpt-4o\n")
    with pytest.raises(SpecError, match=r"replaces model\.id"):
        load(SPEC + "model: {name: 'openai:x', id: y}\n")
