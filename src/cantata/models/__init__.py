"""cantata.models: the `ChatClient` protocol and its clients.

`OpenAIChatClient`, `AzureOpenAIChatClient` and `AnthropicChatClient` are imported on first
use: the `openai` and `anthropic` packages take most of a second each to import, which every
process that never talks to a server would otherwise pay.
"""

from typing import TYPE_CHECKING, Any

from ._anthropic_mapping import THINKING_KEY
from ._batch_decoder import set_decode_niceness
from .cassette import (
    CASSETTE_SCHEMA_VERSION,
    Cassette,
    CassetteMismatchError,
    Interaction,
    RecordedError,
    RecordingChatClient,
    ReplayChatClient,
    request_snapshot,
)
from .client import ChatClient
from .fallback import (
    FALLBACK_KEY,
    ROUTE_KEY,
    FallbackChatClient,
    ModelRoute,
    RoutingChatClient,
    client_label,
)
from .guard import (
    allow_model_requests,
    check_model_requests_allowed,
    model_requests_allowed,
    set_model_requests_allowed,
)
from .local import LocalChatClient
from .names import PROVIDERS, Provider, parse_model_name, resolve_model
from .scripted import ScriptedCall, ScriptedChatClient, ScriptedTurn, tool_call
from .types import (
    ChatOptions,
    ChatResponse,
    ChatResponseUpdate,
    FinishReason,
    ResponseFormat,
    ToolChoice,
    ToolSpec,
    parse_structured,
    response_format_schema,
)

if TYPE_CHECKING:
    from .anthropic import AnthropicChatClient
    from .azure_openai import AzureOpenAIChatClient
    from .openai_chat import MaxTokensField, OpenAIChatClient, StructuredOutputMode

_LAZY = {
    "MaxTokensField": "openai_chat",
    "OpenAIChatClient": "openai_chat",
    "StructuredOutputMode": "openai_chat",
    "AzureOpenAIChatClient": "azure_openai",
    "AnthropicChatClient": "anthropic",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is not None:
        import importlib

        return getattr(importlib.import_module(f".{module}", __name__), name)
    raise AttributeError(f"module 'cantata.models' has no attribute {name!r}")


__all__ = [
    "CASSETTE_SCHEMA_VERSION",
    "FALLBACK_KEY",
    "PROVIDERS",
    "ROUTE_KEY",
    "THINKING_KEY",
    "AnthropicChatClient",
    "AzureOpenAIChatClient",
    "Cassette",
    "CassetteMismatchError",
    "ChatClient",
    "ChatOptions",
    "ChatResponse",
    "ChatResponseUpdate",
    "FallbackChatClient",
    "FinishReason",
    "Interaction",
    "LocalChatClient",
    "MaxTokensField",
    "ModelRoute",
    "OpenAIChatClient",
    "Provider",
    "RecordedError",
    "RecordingChatClient",
    "ReplayChatClient",
    "ResponseFormat",
    "RoutingChatClient",
    "ScriptedCall",
    "ScriptedChatClient",
    "ScriptedTurn",
    "StructuredOutputMode",
    "ToolChoice",
    "ToolSpec",
    "allow_model_requests",
    "check_model_requests_allowed",
    "client_label",
    "model_requests_allowed",
    "parse_model_name",
    "parse_structured",
    "request_snapshot",
    "resolve_model",
    "response_format_schema",
    "set_decode_niceness",
    "set_model_requests_allowed",
    "tool_call",
]
