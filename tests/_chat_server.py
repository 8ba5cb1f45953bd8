"""A tiny OpenAI-compatible Chat Completions server for tests: it answers scripted `Reply`s
in order on a free port of 127.0.0.1 and records what it was sent. Besides answers and HTTP
errors it can hold an answer, pause or cut a stream after its first chunk, and drop a
connection: the failures a real client meets. It speaks HTTP/1.1 with keep-alive like real
servers, so every wait of its own is bounded and `chat_server` closes what is still open."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from cantata.models import allow_model_requests

BOUND = 30.0
"""Seconds the server waits at most: for a held reply, a paused stream, an idle connection."""

_CUT_SHORT = 999  # bytes a cut stream promises beyond what it sends: the client sees a cut body


@dataclass
class Reply:
    """One answer: a status with a JSON `body`, or a stream of `chunks` (objects sent as
    server-sent events, then `[DONE]`). `hold` delays the answer until set; `pause` stops a
    stream after its first chunk until set; `cut` ends a stream's connection after its first
    chunk; `drop` ends the connection without answering."""

    status: int = 200
    body: Any = None
    chunks: list[dict[str, Any]] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    hold: threading.Event | None = None
    pause: threading.Event | None = None
    cut: bool = False
    drop: bool = False


@dataclass
class ChatServer:
    """The running server: `replies` left (a test may add more), and what it was sent."""

    replies: list[Reply]
    requests: list[dict[str, Any]] = field(default_factory=list)
    auth: list[str] = field(default_factory=list)
    given: list[Reply] = field(default_factory=list)
    arrived: threading.Event = field(default_factory=threading.Event)
    first_chunk_sent: threading.Event = field(default_factory=threading.Event)
    url: str = ""
    _open: set[socket.socket] = field(default_factory=set)

    def _release(self) -> None:
        for reply in self.replies + self.given:
            for event in (reply.hold, reply.pause):
                if event is not None:
                    event.set()


def _handler(state: ChatServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = BOUND  # an idle keep-alive connection is closed after this

        def log_message(self, format: str, *args: Any) -> None:
            return

        def setup(self) -> None:
            super().setup()
            state._open.add(self.connection)

        def finish(self) -> None:
            state._open.discard(self.connection)
            with contextlib.suppress(OSError):
                super().finish()

        def do_POST(self) -> None:
            size = int(self.headers.get("content-length", "0"))
            state.requests.append(json.loads(self.rfile.read(size)))
            state.auth.append(self.headers.get("authorization", ""))
            state.arrived.set()
            reply = state.replies.pop(0) if state.replies else _unscripted()
            state.given.append(reply)
            if reply.hold is not None:
                reply.hold.wait(BOUND)
            with contextlib.suppress(OSError):  # the client went away (it stopped or timed out)
                if reply.drop:
                    self._end_connection()
                elif reply.chunks is not None:
                    self._stream(reply, reply.chunks)
                else:
                    self._answer(reply)

        def _answer(self, reply: Reply) -> None:
            data = json.dumps(reply.body).encode()
            self._head(reply, "application/json", len(data))
            self.wfile.write(data)

        def _stream(self, reply: Reply, chunks: list[dict[str, Any]]) -> None:
            events = [f"data: {json.dumps(item)}\n\n".encode() for item in chunks]
            events.append(b"data: [DONE]\n\n")
            length = sum(map(len, events)) + (_CUT_SHORT if reply.cut else 0)
            self._head(reply, "text/event-stream", length)
            for i, event in enumerate(events):
                self.wfile.write(event)
                self.wfile.flush()
                if i == 0:
                    state.first_chunk_sent.set()
                    if reply.cut:
                        self._end_connection()
                        return
                    if reply.pause is not None:
                        reply.pause.wait(BOUND)

        def _head(self, reply: Reply, content_type: str, length: int) -> None:
            self.send_response(reply.status)
            for key, value in reply.headers.items():
                self.send_header(key, value)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(length))
            self.end_headers()

        def _end_connection(self) -> None:
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True

    return Handler


def _unscripted() -> Reply:
    return Reply(500, {"error": {"message": "no reply was scripted for this request"}})


@contextlib.contextmanager
def chat_server(*replies: Reply) -> Iterator[ChatServer]:
    """Serve `replies` in order on a free port of 127.0.0.1, with model requests allowed;
    when the block ends, held replies are released, open connections closed and the server
    stopped."""
    state = ChatServer(list(replies))
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        with allow_model_requests():
            yield state
    finally:
        state._release()
        server.shutdown()
        for connection in list(state._open):
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        server.server_close()
        thread.join(BOUND)


def completion(message: dict[str, Any], *, finish: str = "stop", usage: bool = True) -> Reply:
    """A whole (not streamed) completion whose one choice is `message`."""
    body: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "fake-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    }
    if usage:
        body["usage"] = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
    return Reply(body=body)


def chunk(
    delta: dict[str, Any] | None, *, finish: str | None = None, **extra: Any
) -> dict[str, Any]:
    """One stream chunk with `delta` (none: a chunk without choices, as usage comes in)."""
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return {
        "id": "chatcmpl-2",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "fake-model",
        "choices": choices,
        **extra,
    }


def streamed(*pieces: str, pause: threading.Event | None = None, cut: bool = False) -> Reply:
    """An assistant answer streamed a chunk per piece, then a chunk that finishes it."""
    deltas = [{"content": piece} for piece in pieces]
    if deltas:
        deltas[0]["role"] = "assistant"
    chunks = [chunk(delta) for delta in deltas] + [chunk({}, finish="stop")]
    return Reply(chunks=chunks, pause=pause, cut=cut)


def text_reply(text: str, stream: bool = False) -> Reply:
    """An answer with `text`, as a whole completion or as a stream of one piece."""
    if stream:
        return streamed(text)
    return completion({"role": "assistant", "content": text})
