"""Backpressure on a real uvicorn (on the server's own small-buffer socket): a client that
opens a stream and never reads stops the generation once the buffers are full, and after
the write timeout the stream is ended and its run cancelled; a reading client gets all."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
import uvicorn

from cantata.agents import ChatAgent
from cantata.core import CancellationToken, Message
from cantata.models import ChatOptions, ChatResponseUpdate, ScriptedChatClient
from cantata.serve import Limits, build_app
from cantata.serve.server import listen_socket
from cantata.stores import MemoryStore

WAIT = 20.0
ANSWER = 20_000_000  # characters the model would write, in 1,000-character chunks
CHUNK = 1000


class _Counting(ScriptedChatClient):
    """The scripted model, counting the chunks it has produced (pulled by the stream)."""

    produced = 0

    async def get_streaming_response(  # type: ignore[override]
        self,
        messages: Sequence[Message],
        *,
        options: ChatOptions | None = None,
        cancellation_token: CancellationToken | None = None,
    ) -> AsyncIterator[ChatResponseUpdate]:
        stream = super().get_streaming_response(
            messages, options=options, cancellation_token=cancellation_token
        )
        async for update in stream:
            self.produced += 1
            yield update


def _long(messages: list[Message], options: ChatOptions) -> str:
    return "x" * ANSWER


@asynccontextmanager
async def _server(
    model: _Counting, limits: Limits, cors_origins: Sequence[str] = ()
) -> AsyncIterator[tuple[int, uvicorn.Server]]:
    sock = listen_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    store = MemoryStore()
    agent = ChatAgent(model, name="long")
    app = build_app(agent, store=store, limits=limits, cors_origins=cors_origins)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        async with asyncio.timeout(WAIT):
            while not server.started:  # noqa: ASYNC110 (uvicorn's flag)
                await asyncio.sleep(0.01)
        yield port, server
    finally:
        server.should_exit = True
        async with asyncio.timeout(WAIT):
            await task
        sock.close()
        await store.close()


def _request(port: int, origin: str | None = None) -> bytes:
    body = json.dumps(
        {"model": "long", "stream": True, "messages": [{"role": "user", "content": "go"}]}
    ).encode()
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        + (f"Origin: {origin}\r\n" if origin else "")
        + f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def _metric(port: int, name: str) -> float:
    async with httpx.AsyncClient(timeout=WAIT) as http:
        text = (await http.get(f"http://127.0.0.1:{port}/metrics")).text
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


@pytest.mark.parametrize("origin", [None, "http://app.test"])
async def test_a_client_that_never_reads_pauses_then_ends_its_stream_and_run(
    origin: str | None,
) -> None:
    """Also from a page of an origin the server allows, whose answer CORS wraps."""
    model = _Counting(_long, chunk_size=CHUNK)
    cors = [origin] if origin else []
    async with _server(model, Limits(write_timeout=1.0), cors) as (port, server):
        client = socket.socket()
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        client.connect(("127.0.0.1", port))
        try:
            mine = client.getsockname()[1]
            client.sendall(_request(port, origin))  # then never read a byte
            async with asyncio.timeout(WAIT):
                while await _metric(port, "cantata_serve_stalled_streams_total") < 1:  # noqa: ASYNC110
                    await asyncio.sleep(0.05)
                while await _metric(port, "cantata_serve_running_requests") != 0:  # noqa: ASYNC110
                    await asyncio.sleep(0.05)
            produced = model.produced
            # the buffers hold a few hundred KB: generation stopped far short of the answer
            assert 0 < produced < ANSWER // CHUNK // 20
            # the run was cancelled, not just paused: a second request goes through and
            # the first one's count does not move while it does
            async with httpx.AsyncClient(timeout=WAIT) as http:
                short = await http.get(f"http://127.0.0.1:{port}/v1/models")
            assert short.status_code == 200 and model.produced == produced
            # the server let go of the connection at once: uvicorn no longer holds it, and
            # the kernel holds no socket (and so no unsent bytes) for it
            async with asyncio.timeout(WAIT):
                while any(_peer_port(c) == mine for c in server.server_state.connections):  # noqa: ASYNC110
                    await asyncio.sleep(0.02)
            assert _kernel_sockets(port, mine) == []
            # and the client sees a reset, not a stream it could go on reading
            client.setblocking(False)
            with pytest.raises(ConnectionResetError):
                while client.recv(1 << 20):
                    pass
        finally:
            client.close()


def _peer_port(protocol: object) -> int | None:
    peer = getattr(protocol, "client", None)
    return peer[1] if peer else None


def _kernel_sockets(port: int, peer: int) -> list[str]:
    """The lines of /proc/net/tcp for the server's end of the connection from `peer`."""
    found = []
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, remote = line.split()[1:3]
        if int(local.split(":")[1], 16) == port and int(remote.split(":")[1], 16) == peer:
            found.append(line)
    return found


async def test_a_reading_client_gets_the_whole_stream() -> None:
    model = _Counting(lambda messages, options: "y" * 300_000, chunk_size=CHUNK)
    async with _server(model, Limits(write_timeout=1.0)) as (port, _uvicorn):
        got = 0
        body = {"model": "long", "stream": True, "messages": [{"role": "user", "content": "go"}]}
        async with httpx.AsyncClient(timeout=WAIT) as http:
            url = f"http://127.0.0.1:{port}/v1/chat/completions"
            async with http.stream("POST", url, json=body) as reply:
                async for line in reply.aiter_lines():
                    if line.startswith("data: {"):
                        delta = json.loads(line[6:])["choices"][0]["delta"]
                        got += len(delta.get("content", ""))
        assert got == 300_000
        assert await _metric(port, "cantata_serve_stalled_streams_total") == 0


async def test_connections_of_the_servers_socket_send_without_delay() -> None:
    # found by bench_serve: without IPPROTO_TCP on the socket, asyncio left Nagle on and
    # every response waited 40 ms for the client's delayed ACK
    sock = listen_socket("127.0.0.1", 0)
    nodelay: list[int] = []

    async def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raw = writer.get_extra_info("socket")
        nodelay.append(raw.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        writer.close()

    server = await asyncio.start_server(accepted, sock=sock)
    async with server:
        _reader, writer = await asyncio.open_connection(*sock.getsockname())
        async with asyncio.timeout(WAIT):
            await _reader.read()
        writer.close()
        await writer.wait_closed()
    assert nodelay == [1]
