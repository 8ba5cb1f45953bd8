"""A Chat Completions server on a free port of 127.0.0.1 that answers from a script, for
running the `cantata` command against (in-process or as a subprocess)."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from cantata.models import allow_model_requests


@dataclass
class Answer:
    """One scripted reply: streamed `text` (in pieces), or an HTTP error `status`; `hold`
    stops the stream after its first piece until the test sets it."""

    text: str = ""
    status: int = 200
    hold: threading.Event | None = None


@dataclass
class ScriptServer:
    answers: list[Answer]
    requests: list[dict[str, Any]] = field(default_factory=list)
    given: list[Answer] = field(default_factory=list)
    first_piece_sent: threading.Event = field(default_factory=threading.Event)
    url: str = ""


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    body = {
        "id": "chatcmpl-cli",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "script",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return f"data: {json.dumps(body)}\n\n".encode()


def _handler(state: ScriptServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_POST(self) -> None:
            size = int(self.headers.get("content-length", "0"))
            state.requests.append(json.loads(self.rfile.read(size)))
            answer = state.answers.pop(0) if state.answers else Answer(status=500)
            state.given.append(answer)
            if answer.status != 200:
                data = json.dumps({"error": {"message": "scripted failure"}}).encode()
                self.send_response(answer.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.end_headers()
            with contextlib.suppress(OSError):  # the client went away (a stopped answer)
                self._stream(answer)

        def _stream(self, answer: Answer) -> None:
            words = answer.text.split(" ")
            for i, word in enumerate(words):
                self.wfile.write(_chunk({"content": word if i == 0 else " " + word}))
                self.wfile.flush()
                if i == 0:
                    state.first_piece_sent.set()
                    if answer.hold is not None:
                        answer.hold.wait(30)
            self.wfile.write(_chunk({}, "stop") + b"data: [DONE]\n\n")

    return Handler


@pytest.fixture
def script_server() -> Iterator[ScriptServer]:
    state = ScriptServer([])
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        with allow_model_requests():
            yield state
    finally:
        for answer in state.answers + state.given:
            if answer.hold is not None:
                answer.hold.set()
        server.shutdown()
        server.server_close()
        thread.join()
