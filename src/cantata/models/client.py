"""The one seam between cantata and a language model."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Protocol, runtime_checkable

from ..core import CancellationToken, Message
from .types import ChatOptions, ChatResponse, ChatResponseUpdate

__all__ = ["ChatClient"]


@runtime_checkable
class ChatClient(Protocol):
    """Anything that turns a list of messages into an answer, whole or streamed.

    Implementations must not keep per-conversation state: one client serves many agents
    and threads at once.
    """

    async def get_response(
        self,
        messages: Sequence[Message],
        *,
        options: ChatOptions | None = None,
        cancellation_token: CancellationToken | None = None,
    ) -> ChatResponse:
        """The whole answer."""
        ...

    def get_streaming_response(
        self,
        messages: Sequence[Message],
        *,
        options: ChatOptions | None = None,
        cancellation_token: CancellationToken | None = None,
    ) -> AsyncIterator[ChatResponseUpdate]:
        """The answer as it is produced: text in pieces, tool calls whole."""
        ...
