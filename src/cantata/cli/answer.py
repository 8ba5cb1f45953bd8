"""The model side of a command: load it (with a status line on a terminal), stream an answer
to the console, and close the client afterwards."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from rich.console import Console

from ..core import Message
from ..models import (
    ChatClient,
    ChatOptions,
    ChatResponse,
    ChatResponseUpdate,
    LocalChatClient,
    check_model_requests_allowed,
)

__all__ = ["close_client", "load_model", "quiet_loop_errors", "stream_answer"]

_log = logging.getLogger("cantata.cli")


async def load_model(client: ChatClient, status: Console) -> None:
    """Load a local model up front, so its wait shows as a status line rather than as a
    silent first answer; a server needs no loading."""
    if not isinstance(client, LocalChatClient):
        return
    check_model_requests_allowed("LocalChatClient")  # a blocked request loads nothing
    if not status.is_terminal:
        await client.load()
        return
    with status.status(f"loading the model {client.model}...", spinner="dots"):
        await client.load()


async def stream_answer(
    client: ChatClient, messages: list[Message], options: ChatOptions, out: Console
) -> ChatResponse:
    """Print the answer as it comes; the whole response once it is complete."""
    updates: list[ChatResponseUpdate] = []
    async for update in client.get_streaming_response(messages, options=options):
        updates.append(update)
        if update.text:
            out.print(update.text, end="", markup=False, highlight=False)
    out.print()
    return ChatResponse.from_updates(updates)


async def close_client(client: ChatClient) -> None:
    """Close what the client opened (its model or HTTP connections)."""
    close = getattr(client, "close", None)
    if close is not None:
        await close()


def quiet_loop_errors(loop: asyncio.AbstractEventLoop, *, debug: bool) -> None:
    """Send errors of the event loop's own callbacks to the debug log, not the terminal.

    A stopped answer can leave a library's connection protocol (anyio's) failing in a
    callback, which asyncio would print as a traceback; the user's answer is already over.
    """

    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        _log.debug("event loop: %s", context.get("message"), exc_info=context.get("exception"))
        if debug:
            loop.default_exception_handler(context)

    loop.set_exception_handler(handle)
