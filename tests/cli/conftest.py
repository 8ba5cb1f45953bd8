"""A Chat Completions server on a free port of 127.0.0.1 that answers from a script, for
running the `cantata` command against (in-process or as a subprocess); the server itself is
tests/_chat_server.py."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from .._chat_server import ChatServer, Reply, chat_server, streamed


def answer(text: str = "", *, status: int = 200, hold: threading.Event | None = None) -> Reply:
    """One scripted reply: `text` streamed a word at a time, or an HTTP error `status`; `hold`
    stops the stream after its first word until the test sets it."""
    if status != 200:
        return Reply(status, {"error": {"message": "scripted failure"}})
    words = text.split(" ")
    return streamed(words[0], *[" " + word for word in words[1:]], pause=hold)


@pytest.fixture
def script_server() -> Iterator[ChatServer]:
    """A server with no replies yet: a test adds them to `replies`."""
    with chat_server() as server:
        yield server
