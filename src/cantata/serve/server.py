"""Running the app on uvicorn: the one blocking call behind `cantata serve`.

On SIGTERM or Ctrl-C uvicorn stops accepting connections and this server tells the app's
`Drain` (runs under way get the grace period, then end with their protocol's terminal
event). The listening socket's send buffer is small (`SEND_BUFFER_BYTES`, inherited by
every connection), so a stream whose client stops reading fills it quickly and the run
behind it waits instead of filling the kernel's buffers for nobody.
"""

from __future__ import annotations

import logging
import math
import os
import socket
from pathlib import Path
from typing import Any

import uvicorn

from ..core import ConfigurationError
from .app import build_app
from .auth import check_bind
from .drain import Drain
from .limits import Limits, ended_on_purpose

__all__ = ["DEFAULT_GRACE", "DEFAULT_STORE_URL", "SEND_BUFFER_BYTES", "listen_socket", "serve"]

DEFAULT_STORE_URL = "sqlite:///.cantata/serve.db"
"""Where `serve` keeps server-side threads unless told otherwise (relative to the
working directory)."""

DEFAULT_GRACE = 10.0
"""Seconds open requests get to finish when the server is told to stop."""

_KEEP_ALIVE = 75  # seconds an idle connection is kept open

SEND_BUFFER_BYTES = 64 * 1024
"""The send buffer asked of the kernel for each connection (Linux doubles it)."""


def listen_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to `host`:`port` with the server's small send buffer (connections
    accepted from it inherit it)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP by name: asyncio turns Nagle off only on sockets that say so, and Nagle
    # with the client's delayed ACK adds 40 ms to every response
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER_BYTES)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


class _QuietEndings(logging.Filter):
    """Drops uvicorn's complaint about a response the app left unfinished on purpose (it
    logs one line from the request's own task, where the app marked it)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (
            record.getMessage().startswith("ASGI callable returned without completing")
            and ended_on_purpose()
        )


def serve(
    served: Any,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    token: str | None = None,
    store: str = DEFAULT_STORE_URL,
    limits: Limits | None = None,
    log_level: str = "info",
    grace: float = DEFAULT_GRACE,
) -> None:
    """Serve `served` until interrupted (Ctrl-C, SIGTERM). Refuses a non-loopback `host`
    without a `token`; the store keeps the Responses API's conversations across restarts.
    When told to stop, requests under way get `grace` seconds to finish."""
    check_bind(host, token)
    if type(port) is not int or not 0 <= port <= 65535:
        raise ConfigurationError(f"port must be a whole number from 0 to 65535, got {port!r}")
    if isinstance(grace, bool) or not isinstance(grace, int | float) or not 0 < grace <= 3600:
        raise ConfigurationError(f"grace must be from 0 to 3600 seconds, got {grace!r}")
    if store == DEFAULT_STORE_URL:
        os.makedirs(Path(".cantata"), exist_ok=True)
    drain = Drain()
    app = build_app(served, store=store, token=token, limits=limits, drain=drain)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        lifespan="on",
        timeout_graceful_shutdown=math.ceil(grace),
        # longer than a proxy keeps an idle upstream connection (nginx, cloud balancers: 60
        # s), so the proxy never reuses one the server is closing at that moment
        timeout_keep_alive=_KEEP_ALIVE,
        server_header=False,
    )
    logging.getLogger("uvicorn.error").addFilter(_QuietEndings())
    _log_beside_uvicorn(log_level)
    _keep_sse_streams_to_the_drain()
    sock = listen_socket(host, port)
    try:
        _DrainingServer(config, drain, grace).run(sockets=[sock])
    finally:
        sock.close()


def _log_beside_uvicorn(level: str) -> None:
    """cantata's own lines (shed load, stalled streams, the drain) in uvicorn's format."""
    from uvicorn.logging import DefaultFormatter

    log = logging.getLogger("cantata")
    if not log.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(DefaultFormatter("%(levelprefix)s %(message)s", use_colors=False))
        log.addHandler(handler)
        log.setLevel(level.upper())


def _keep_sse_streams_to_the_drain() -> None:
    """sse-starlette (the A2A SDK's event streams) ends every stream the moment uvicorn is
    told to stop, before the run behind it can say how it ended; the drain ends them."""
    try:
        from sse_starlette.sse import AppStatus
    except ImportError:  # no A2A here
        return
    AppStatus.disable_automatic_graceful_drain()  # type: ignore[no-untyped-call]


class _DrainingServer(uvicorn.Server):
    """uvicorn's `Server` that tells the app's drain when shutdown begins."""

    def __init__(self, config: uvicorn.Config, drain: Drain, grace: float) -> None:
        super().__init__(config)
        self._drain = drain
        self._grace = grace

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self._drain.begin(self._grace)
        await super().shutdown(sockets)
