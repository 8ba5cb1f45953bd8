"""Everything cantata.models exports imports, and stays exported."""

from __future__ import annotations

import cantata.models as models

EXPECTED = {
    "CASSETTE_SCHEMA_VERSION",
    "FALLBACK_KEY",
    "PROVIDERS",
    "ROUTE_KEY",
    "THINKING_KEY",
    "AnthropicChatClient",
    "AzureOpenAIChatClient",
    "FallbackChatClient",
    "ModelRoute",
    "Provider",
    "RoutingChatClient",
    "client_label",
    "parse_model_name",
    "resolve_model",
    "Cassette",
    "CassetteMismatchError",
    "ChatClient",
    "ChatOptions",
    "ChatResponse",
    "ChatResponseUpdate",
    "FinishReason",
    "Interaction",
    "RecordedError",
    "LocalChatClient",
    "MaxTokensField",
    "OpenAIChatClient",
    "RecordingChatClient",
    "ReplayChatClient",
    "ResponseFormat",
    "ScriptedCall",
    "ScriptedChatClient",
    "ScriptedTurn",
    "StructuredOutputMode",
    "ToolChoice",
    "ToolSpec",
    "allow_model_requests",
    "check_model_requests_allowed",
    "model_requests_allowed",
    "parse_structured",
    "request_snapshot",
    "response_format_schema",
    "set_decode_niceness",
    "set_model_requests_allowed",
    "tool_call",
}


def test_exports_are_stable_and_importable() -> None:
    assert set(models.__all__) == EXPECTED
    for name in EXPECTED:
        assert getattr(models, name) is not None


def test_every_client_satisfies_the_protocol(tmp_path: object) -> None:
    clients = [
        models.ScriptedChatClient(["x"]),
        models.LocalChatClient(),
        models.OpenAIChatClient("m", base_url="http://127.0.0.1:9/v1"),
        models.ReplayChatClient(models.Cassette()),
        models.RecordingChatClient(models.ScriptedChatClient(["x"]), f"{tmp_path}/c.json"),
    ]
    for client in clients:
        assert isinstance(client, models.ChatClient), type(client).__name__
