"""Running the app on uvicorn: the one blocking call behind `cantata serve`.

On SIGTERM or Ctrl-C uvicorn stops accepting connections and this server tells the app's
`Drain` (runs under way get the grace period, then end with their protocol's terminal
event). The listening socket's send buffer is small (`SEND_BUFFER_BYTES`, inherited by
every connection), so a stream whose client stops reading fills it quickly and the run
behind it waits instead of filling the kernel's buffers for nobody.
"""

from __future__ import annotations

import gc
import logging
import math
import multiprocessing
import os
import shutil
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import uvicorn
from prometheus_client.multiprocess import mark_process_dead

from ..core import ConfigurationError
from ..models import set_decode_niceness
from .app import build_app
from .auth import check_bind
from .drain import DEFAULT_GRACE, Drain, process_drain
from .limits import Limits, ended_on_purpose
from .local_code import check_local_code
from .metrics import MULTIPROCESS_ENV, multiprocess_dir
from .served import ServedSet

__all__ = [
    "DECODE_NICENESS",
    "DEFAULT_GRACE",
    "DEFAULT_STORE_URL",
    "SEND_BUFFER_BYTES",
    "listen_socket",
    "prepare_process",
    "serve",
    "serve_workers",
]

DEFAULT_STORE_URL = "sqlite:///.cantata/serve.db"
"""Where `serve` keeps server-side threads unless told otherwise (relative to the
working directory)."""

_KEEP_ALIVE = 75  # seconds an idle connection is kept open
_STOP_MARGIN = 5.0  # seconds a worker gets past the grace period before it is killed
_log = logging.getLogger("cantata.serve")

DECODE_NICENESS = 10
"""How much nicer than the server's event loop the embedded model's decode thread runs: on
cores that decoding keeps busy, a request (a refusal, a stream's next chunk) would otherwise
wait for a time slice behind it (see `cantata.models.set_decode_niceness`). Measured on two
cores, at twice the load the server takes, 192 refusals a run: p99 of a refusal 35 to 39
ms with it against 55 to 86 ms without (both before the start-up `gc.freeze`), throughput
unchanged."""

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
    allowed_hosts: Sequence[str] = (),
    cors_origins: Sequence[str] = (),
    public_url: str | None = None,
    allow_remote_code_execution: bool = False,
    keys: Mapping[str, str] | None = None,
    trust_identity_header: str | None = None,
    trusted_proxies: Sequence[str] = (),
) -> None:
    """Serve `served` until interrupted (Ctrl-C, SIGTERM). Refuses a non-loopback `host`
    without a `token`, and agents that run model-written code outside a sandbox unless
    `allow_remote_code_execution` (see `local_code`); the store keeps the Responses API's
    conversations across restarts. When told to stop, requests under way get `grace`
    seconds to finish. `allowed_hosts`, `cors_origins`, `public_url`, `keys`,
    `trust_identity_header` and `trusted_proxies` are `build_app`'s.

    Once the app has started, what is alive in the process is put out of the garbage
    collector's reach (`gc.freeze`), and the embedded model decodes `DECODE_NICENESS` nicer
    than the event loop: the process is the server's."""
    check_bind(host, token, identities=bool(keys) or trust_identity_header is not None)
    entries = served if isinstance(served, ServedSet) else ServedSet(served)
    check_local_code(entries, allow=allow_remote_code_execution)
    if type(port) is not int or not 0 <= port <= 65535:
        raise ConfigurationError(f"port must be a whole number from 0 to 65535, got {port!r}")
    if store == DEFAULT_STORE_URL:
        os.makedirs(Path(".cantata"), exist_ok=True)
    drain = Drain()
    app = build_app(
        entries,
        store=store,
        token=token,
        limits=limits,
        drain=drain,
        allowed_hosts=allowed_hosts,
        cors_origins=cors_origins,
        public_url=public_url,
        keys=keys,
        trust_identity_header=trust_identity_header,
        trusted_proxies=trusted_proxies,
    )
    config = _config(app, host=host, port=port, log_level=log_level, grace=grace)
    sock = listen_socket(host, port)
    try:
        _DrainingServer(config, drain, grace).run(sockets=[sock])
    finally:
        sock.close()


def serve_workers(
    app_factory: str,
    *,
    workers: int,
    host: str = "127.0.0.1",
    port: int = 8000,
    log_level: str = "info",
    grace: float = DEFAULT_GRACE,
) -> None:
    """Serve the app that `app_factory` (``module:function``) builds in each of `workers`
    processes, all accepting on one listening socket, until interrupted.

    Each process builds its own app and drains it on its own (the factory passes
    `process_drain()` to `build_app`), exactly as `serve` drains its one process: on SIGTERM
    or Ctrl-C this process passes SIGTERM on and waits for them (the grace period, plus a
    margin, then it kills what is left). A worker that dies is replaced. What a client may
    come back to must be in the store the processes share. The caller checks the bind
    (`check_bind`) before, as `serve` does."""
    if type(workers) is not int or workers < 1:
        raise ConfigurationError(f"workers must be a whole number from 1, got {workers!r}")
    config = _config(app_factory, host=host, port=port, log_level=log_level, grace=grace)
    sock = listen_socket(host, port)
    # the workers' metrics go to files that every worker's /metrics reads (one scrape sees
    # the whole server); a directory the user named is theirs to keep, ours goes at the end
    given = multiprocess_dir()
    metrics_dir = given or tempfile.mkdtemp(prefix="cantata-metrics-")
    os.environ[MULTIPROCESS_ENV] = metrics_dir
    try:
        _Workers(config, sock, workers, grace, metrics_dir).run()
    finally:
        sock.close()
        if given is None:
            del os.environ[MULTIPROCESS_ENV]
            shutil.rmtree(metrics_dir, ignore_errors=True)


def _run_worker(config: uvicorn.Config, sockets: list[socket.socket], grace: float) -> None:
    # a spawned interpreter: uvicorn's logging is set up again here, as uvicorn does for its
    # own workers, and the factory sets the rest (`prepare_process`)
    config.configure_logging()
    _DrainingServer(config, None, grace).run(sockets=sockets)


class _Workers:
    """The parent of `serve_workers`: starts the processes, replaces one that dies, and
    passes a stop on to all of them."""

    _LOOK = 0.5  # seconds between looks at the workers

    def __init__(
        self, config: uvicorn.Config, sock: socket.socket, count: int, grace: float, metrics: str
    ) -> None:
        self._config, self._sock, self._count, self._grace = config, sock, count, grace
        self._metrics = metrics
        self._context = multiprocessing.get_context("spawn")
        self._processes: list[multiprocessing.process.BaseProcess] = []
        self._stop = threading.Event()

    def _start(self) -> multiprocessing.process.BaseProcess:
        process = self._context.Process(
            target=_run_worker, args=(self._config, [self._sock], self._grace), daemon=False
        )
        process.start()
        return process

    def run(self) -> None:
        def stop(signum: int, frame: Any) -> None:
            self._stop.set()

        previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            self._processes = [self._start() for _ in range(self._count)]
            while not self._stop.wait(self._LOOK):
                for i, process in enumerate(self._processes):
                    if not process.is_alive():
                        _log.warning(
                            "worker %s ended (exit code %s); starting another",
                            process.pid,
                            process.exitcode,
                        )
                        if process.pid is not None:  # its gauges no longer count
                            mark_process_dead(process.pid, self._metrics)  # type: ignore[no-untyped-call]
                        self._processes[i] = self._start()
        finally:
            self._stop_all()
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _stop_all(self) -> None:
        for process in self._processes:
            if process.is_alive() and process.pid is not None:
                os.kill(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + self._grace + _STOP_MARGIN
        for process in self._processes:
            process.join(max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                _log.warning("worker %s did not stop within the grace period; killed", process.pid)
                process.kill()
                process.join(_STOP_MARGIN)


def _config(app: Any, *, host: str, port: int, log_level: str, grace: float) -> uvicorn.Config:
    if isinstance(grace, bool) or not isinstance(grace, int | float) or not 0 < grace <= 3600:
        raise ConfigurationError(f"grace must be from 0 to 3600 seconds, got {grace!r}")
    config = uvicorn.Config(
        app,
        factory=isinstance(app, str),
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
    prepare_process(log_level)
    return config


def prepare_process(log_level: str) -> None:
    """What a serving process sets before its first request: uvicorn's log without the
    complaints about answers ended on purpose, cantata's lines beside it, and A2A event
    streams left to the drain, and the embedded model's decoding behind the requests
    (`DECODE_NICENESS`). A worker of `serve_workers` is a fresh interpreter, so its app
    factory calls this too."""
    error_log = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _QuietEndings) for f in error_log.filters):
        error_log.addFilter(_QuietEndings())
    _log_beside_uvicorn(log_level)
    _keep_sse_streams_to_the_drain()
    set_decode_niceness(DECODE_NICENESS)


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
    """uvicorn's `Server` that tells the app's drain when shutdown begins: the one given, or
    (in a worker process of `serve_workers`, which builds its app from a factory) the
    process's own `process_drain()`."""

    def __init__(self, config: uvicorn.Config, drain: Drain | None, grace: float) -> None:
        super().__init__(config)
        self._drain = drain
        self._grace = grace

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        # What is alive once the app has started (modules, the app, its agents, the store)
        # lives as long as the server: out of the collector's sight, a full collection scans
        # only what requests made, not 100-odd ms of imports, during which no request moves.
        # (Garbage left from starting is collected first, or it would be kept for good.)
        gc.collect()
        gc.freeze()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        (self._drain or process_drain()).begin(self._grace)
        await super().shutdown(sockets)
