"""cantata.models: the `ChatClient` protocol and its clients."""

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
from .guard import (
    allow_model_requests,
    check_model_requests_allowed,
    model_requests_allowed,
    set_model_requests_allowed,
)
from .local import LocalChatClient
from .openai_chat import MaxTokensField, OpenAIChatClient, StructuredOutputMode
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

__all__ = [
    "CASSETTE_SCHEMA_VERSION",
    "Cassette",
    "CassetteMismatchError",
    "ChatClient",
    "ChatOptions",
    "ChatResponse",
    "ChatResponseUpdate",
    "FinishReason",
    "Interaction",
    "LocalChatClient",
    "MaxTokensField",
    "OpenAIChatClient",
    "RecordedError",
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
    "set_model_requests_allowed",
    "tool_call",
]
