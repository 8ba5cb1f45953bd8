"""cantata.models: the `ChatClient` protocol and its clients.

`OpenAIChatClient` is imported on first use: the `openai` package takes most of a second
to import, which every process that never talks to a server would otherwise pay.
"""

from typing import TYPE_CHECKING, Any

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
from .guard import (
    allow_model_requests,
    check_model_requests_allowed,
    model_requests_allowed,
    set_model_requests_allowed,
)
from .local import LocalChatClient
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
    from .openai_chat import MaxTokensField, OpenAIChatClient, StructuredOutputMode

_LAZY = frozenset({"MaxTokensField", "OpenAIChatClient", "StructuredOutputMode"})


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from . import openai_chat

        return getattr(openai_chat, name)
    raise AttributeError(f"module 'cantata.models' has no attribute {name!r}")


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
    "set_decode_niceness",
    "set_model_requests_allowed",
    "tool_call",
]
