"""The direct data path: envelopes over one stream per (router, host), not Ray calls.

Ray still places, names, supervises and reports the death of every actor; only the bytes
of requests and events, their replies and cancellations (and, on the directory's stream,
publications, polls and local subscribers' answers) take this path, because a Ray actor call costs
several process hops (the caller's core worker, the callee's, the object store for the
reply) where a stream costs one. A host (`DirectServer`) listens on its node's IP on a free
port and reports the address with a secret of its own (through Ray, so only the
cluster's members learn it); a router (`DirectClient`) keeps one connection per address,
opened with that secret, and multiplexes its requests on it by a call number. Without
TLS on Linux, a host also listens on an abstract Unix socket named after its address and
secret (`local_name`), and a router on the same machine (in the same network namespace)
connects there, skipping the TCP stack; elsewhere it finds no such socket and uses TCP.

Frames are a 4-byte big-endian length and that many bytes of UTF-8 JSON (no pickle); the
envelope inside is `wire.Envelope`, unchanged. A stream opens with ``{"t": "h", "s"}``
(the secret), answered ``{"t": "h"}``; any other first frame is refused with an ``"x"``.

- to the host: ``{"t": "q", "n", "env"}`` a request, ``{"t": "e", "n", "env"}`` an event,
  ``{"t": "c", "id"}`` cancel the handler of message ``id`` (the directory's stream takes
  ``"q"`` and ``"e"`` with other meanings, and no ``"c"``: an event is a publication, a
  request one to a local subscriber, with ``"w"``,
  the seconds it may wait for the answer; and ``{"t": "p", "n", "origin", "w", "k"}``
  takes what waits for process ``origin``'s local subscribers, acknowledging those before
  number ``"k"`` (answered ``[first number, *items]``, see _inbox.py),
  ``{"t": "a", "id", "reply"}`` answers a request to one);
- to the router: ``{"t": "r", "n", "reply"}`` the reply to call ``n``; ``{"t": "x",
  "err"}`` the last frame was unreadable (a `wire.failed` error), and the stream closes.

When Ray's TLS is on (``RAY_USE_TLS``), every stream is mutual TLS with Ray's own
certificate files, checked as Ray's gRPC checks them (see _tls.py); the secret is still
asked for inside it. A handshake that fails, or a server certificate that does not name
the address dialed, is `Refused` (the router then takes Ray's call, itself under TLS); a
client without a certificate the CA signed never reaches the hello.

A stream that ends while calls wait on it fails them with `Lost` (the router decides what
that means: see router.py); a frame that cannot be read is a `SerializationError`. On the
host's side, the requests of a stream that ends unanswered are orphans (nobody can read
their replies), so they stop: a handler that began is cancelled through the server's
`on_lost` (the host cancels its token, as the caller's ``"c"`` would), one that had not
begun never runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import logging
import secrets
import ssl
import struct
import sys
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from ray.exceptions import ActorDiedError, RayActorError

from ...core import SerializationError, compact_json, parse_json
from . import _tls, wire

__all__: list[str] = []

_log = logging.getLogger("cantata.runtime.ray")

MAX_FRAME = 64 * 1024 * 1024  # bigger envelopes take the Ray call (its object store)
DIRECT_LIMIT = MAX_FRAME // 2  # a message's JSON longer than this goes as a Ray call
_HEADER = struct.Struct(">I")
_HIGH_WATER = 1024 * 1024  # bytes buffered for the peer before a writer waits for it
_CONNECT_WAIT = 10.0  # seconds at most to open a connection (then the Ray call is used)
_LOCAL_SOCKETS = sys.platform == "linux"  # abstract Unix sockets: Linux only

Address = tuple[str, int, str]  # host, port, the server's secret
RequestHandler = Callable[[dict[str, Any]], Awaitable[Any]]  # a frame -> its reply
NoteHandler = Callable[[dict[str, Any]], None]  # a frame answered by nothing
# A stream's TLS: "ray" follows Ray's own settings (the runtime's streams), None is plain
# TCP, a context is used as given (tests).
TLS = ssl.SSLContext | None | Literal["ray"]


class Lost(Exception):
    """The stream ended (closed, reset, or unreadable) with this call in flight."""


class Refused(Exception):
    """No stream could be opened to the address (the caller takes the Ray call instead)."""


def encode(frame: dict[str, Any]) -> bytes:
    """A frame's bytes: its length, then its JSON."""
    body = compact_json(frame).encode("utf-8")
    if len(body) > MAX_FRAME:
        raise SerializationError(
            f"a frame of {len(body)} bytes is over the direct path's {MAX_FRAME} bytes"
        )
    return _HEADER.pack(len(body)) + body


def decode(body: bytes) -> dict[str, Any]:
    """A frame's JSON object, or `SerializationError`."""
    try:
        frame = parse_json(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise SerializationError(f"a direct-path frame is not JSON: {exc}") from None
    if not isinstance(frame, dict) or not isinstance(frame.get("t"), str):
        raise SerializationError(
            f"a direct-path frame is not an object with a kind 't': {str(frame)[:80]!r}"
        )
    return frame


async def read_frame(reader: asyncio.StreamReader) -> dict[str, Any] | None:
    """The next frame, None at a clean end of the stream; `SerializationError` for a frame
    that cannot be one, `Lost` when the stream breaks inside a frame."""
    try:
        head = await reader.readexactly(_HEADER.size)
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            return None
        raise Lost("the stream ended inside a frame header") from None
    (size,) = _HEADER.unpack(head)
    if size > MAX_FRAME:
        raise SerializationError(
            f"a direct-path frame announces {size} bytes, over the {MAX_FRAME} allowed"
        )
    try:
        body = await reader.readexactly(size)
    except asyncio.IncompleteReadError:
        raise Lost("the stream ended inside a frame") from None
    return decode(body)


async def _write(writer: asyncio.StreamWriter, data: bytes) -> None:
    writer.write(data)
    if writer.transport.get_write_buffer_size() > _HIGH_WATER:
        await writer.drain()


class _Out:
    """A stream's outgoing frames, gathered over one turn of the event loop and written
    together: a host answering many events, or a router sending many requests, at once
    makes one system call for them, not one per frame. Order is kept."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self._parts: list[bytes] = []
        self._size = 0

    def put(self, data: bytes) -> None:
        """Queue `data` for this turn's write."""
        if not self._parts:
            asyncio.get_running_loop().call_soon(self.flush)
        self._parts.append(data)
        self._size += len(data)

    @property
    def backlogged(self) -> bool:
        """Whether more than the high-water mark waits for the peer (queued or buffered)."""
        return self._size + self._writer.transport.get_write_buffer_size() > _HIGH_WATER

    async def drain(self) -> None:
        """Write what is queued now and wait until the peer has taken enough of it."""
        self.flush()
        await self._writer.drain()

    def flush(self) -> None:
        if not self._parts:
            return
        data = b"".join(self._parts) if len(self._parts) > 1 else self._parts[0]
        self._parts.clear()
        self._size = 0
        if not self._writer.is_closing():
            self._writer.write(data)


# -- the host's side ---------------------------------------------------------------------


class _Request:
    """One request read from a stream and not answered yet: its frame, the task answering
    it, and whether that task has begun (called the request handler)."""

    __slots__ = ("begun", "frame", "task")

    def __init__(self, frame: dict[str, Any]) -> None:
        self.frame = frame
        self.task: asyncio.Task[None] | None = None
        self.begun = False


class _Unanswered:
    """One stream's requests not answered yet."""

    __slots__ = ("requests", "room")

    def __init__(self) -> None:
        self.requests: set[_Request] = set()
        self.room = asyncio.Event()  # set when fewer than the server's limit are unanswered


class DirectServer:
    """Serves one actor's requests, events and cancellations over streams.

    `on_lost` is called with each request frame whose handler began and had not answered
    when its stream ended (closed by either side, broken, or unreadable): nobody can read
    its reply, so the owner cancels it. `limit` bounds the requests in flight on one
    stream: past it the server stops reading that stream until one is answered, so a
    flooding router waits on its own socket (TCP backpressure) and the others go on.
    `tls` (see `TLS`) is read when the server is made,
    so Ray's TLS on with its files missing is a `ConfigurationError` here, not at a
    stream."""

    def __init__(
        self,
        on_request: RequestHandler,
        on_note: NoteHandler,
        *,
        answers: frozenset[str] = frozenset("qe"),
        notes: frozenset[str] = frozenset("c"),
        on_lost: NoteHandler | None = None,
        tls: TLS = "ray",
        limit: int = 1 << 30,
    ) -> None:
        self._limit = max(1, limit)
        self._ssl = _tls.ray_server_context() if isinstance(tls, str) else tls
        self._on_request = on_request
        self._on_note = on_note
        self._on_lost = on_lost
        self._answers = answers
        self._notes = notes
        self._server: asyncio.Server | None = None
        self._local: asyncio.Server | None = None
        self._streams: dict[asyncio.StreamWriter, _Unanswered] = {}
        self._secret = secrets.token_hex(16)
        self.address: Address | None = None

    async def start(self, host: str) -> Address:
        """Listen on `host` on a free port (and, without TLS on Linux, on the address's
        local socket: see `local_name`); the address to report (with the secret)."""
        self._server = await asyncio.start_server(
            self._serve,
            host,
            0,
            ssl=self._ssl,
            ssl_handshake_timeout=None if self._ssl is None else _CONNECT_WAIT,
        )
        sock = self._server.sockets[0].getsockname()
        self.address = (str(sock[0]), int(sock[1]), self._secret)
        if self._ssl is None and _LOCAL_SOCKETS:
            try:
                self._local = await asyncio.start_unix_server(self._serve, local_name(self.address))
            except OSError:  # taken, or refused here: routers on this machine use TCP
                _log.debug("no local socket for %s:%s", sock[0], sock[1], exc_info=True)
        return self.address

    async def _greet(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Whether the stream opened with this server's secret (answered), else refused."""
        try:
            frame = await asyncio.wait_for(read_frame(reader), _CONNECT_WAIT)
            if frame is None:
                return False
            secret = frame.get("s")
            if frame["t"] != "h" or not isinstance(secret, str):
                raise SerializationError("a direct stream must open with its hello frame")
            if not hmac.compare_digest(secret.encode(), self._secret.encode()):
                raise SerializationError("the hello frame does not carry this stream's secret")
        except SerializationError as exc:
            await _write(writer, encode({"t": "x", "err": wire.failed(exc)["err"]}))
            await writer.drain()
            return False
        except TimeoutError:
            return False
        await _write(writer, encode({"t": "h"}))
        return True

    async def close(self) -> None:
        """Stop listening and end every stream (a router waiting on one sees it lost; the
        requests still running from one are cancelled)."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        local, self._local = self._local, None
        if local is not None:
            local.close()
        streams, self._streams = self._streams, {}
        for writer, unanswered in streams.items():
            writer.close()
            self._orphan(unanswered)
            unanswered.room.set()

    def _orphan(self, unanswered: _Unanswered) -> None:
        """Stop a stream's unanswered requests: `on_lost` for each whose handler began, and
        a cancelled task (the handler never runs) for each that had not begun."""
        requests, unanswered.requests = unanswered.requests, set()
        for request in requests:
            if not request.begun:
                if request.task is not None:
                    request.task.cancel()
            elif self._on_lost is not None:
                try:
                    self._on_lost(request.frame)
                except Exception:
                    _log.exception("cancelling a request of a lost direct stream failed")

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        unanswered = self._streams[writer] = _Unanswered()
        out = _Out(writer)
        loop = asyncio.get_running_loop()
        try:
            if not await self._greet(reader, writer):
                return
            while True:
                try:
                    frame = await read_frame(reader)
                except SerializationError as exc:
                    out.put(encode({"t": "x", "err": wire.failed(exc)["err"]}))
                    await out.drain()
                    return
                if frame is None:
                    return
                kind = frame["t"]
                if kind in self._answers:
                    while len(unanswered.requests) >= self._limit:  # backpressure
                        unanswered.room.clear()
                        await unanswered.room.wait()
                    # The request holds its task (asyncio holds tasks weakly) until it is
                    # answered; a task still writing its answer after that waits on the
                    # stream, which holds it.
                    request = _Request(frame)
                    request.task = loop.create_task(self._answer(writer, out, request, unanswered))
                    unanswered.requests.add(request)
                elif kind in self._notes:
                    self._on_note(frame)
                else:
                    bad = SerializationError(f"a direct-path frame of unknown kind {kind!r}")
                    out.put(encode({"t": "x", "err": wire.failed(bad)["err"]}))
                    await out.drain()
                    return
        except (Lost, ConnectionError):
            return
        finally:
            self._streams.pop(writer, None)
            writer.close()
            self._orphan(unanswered)

    async def _answer(
        self,
        writer: asyncio.StreamWriter,
        out: _Out,
        request: _Request,
        unanswered: _Unanswered,
    ) -> None:
        frame = request.frame
        request.begun = True
        try:
            reply = await self._on_request(frame)
        except Exception as exc:  # a frame of the right kind holding the wrong things
            reply = wire.failed(exc)
        finally:  # answered (or ended): nothing of it is left to cancel
            unanswered.requests.discard(request)
            unanswered.room.set()
        n = frame.get("n")
        try:
            data = encode({"t": "r", "n": n, "reply": reply})
        except SerializationError as exc:  # a result too big for a frame
            data = encode({"t": "r", "n": n, "reply": wire.failed(exc)})
        if writer.is_closing():
            return  # the router is gone; nobody waits for this answer
        out.put(data)
        if out.backlogged:  # no coroutine for the usual case, a stream with room
            with contextlib.suppress(ConnectionError):
                await out.drain()


# -- the router's side -------------------------------------------------------------------


class _Connection:
    """One stream to one host, its calls in flight by number, and the task reading it."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self._out = _Out(writer)
        self._calls: dict[int, asyncio.Future[wire.Envelope]] = {}
        self._next = 0
        self.closed = False
        self._reading = asyncio.get_running_loop().create_task(self._read(reader))

    async def call(self, kind: str, env: wire.Envelope | None, **extra: Any) -> asyncio.Future[Any]:
        """Send `env` (in a frame with `extra`); the future of its reply (the caller bounds
        the wait). Waits while too much is buffered for the host."""
        future = self.send(kind, env, **extra)
        if self.backlogged:
            await self.drain()
        return future

    def send(self, kind: str, env: wire.Envelope | None, **extra: Any) -> asyncio.Future[Any]:
        """`call` without the wait for the host: the caller awaits `drain` when
        `backlogged` (a request's hot path makes no coroutine for it otherwise)."""
        if self.closed:
            raise Refused("the stream is closed")  # nothing sent: the Ray call may go
        n = self._next
        self._next += 1
        data = encode({"t": kind, "n": n, "env": env, **extra})
        future = asyncio.get_running_loop().create_future()
        self._calls[n] = future  # until its reply comes (or the stream ends): see _read
        self._out.put(data)
        return future

    @property
    def backlogged(self) -> bool:
        """Whether more is buffered for the host than a writer should add to unwaited."""
        return self._out.backlogged

    async def drain(self) -> None:
        """Wait until the host has taken enough of what is buffered for it."""
        try:
            await self._out.drain()
        except ConnectionError as exc:
            self._fail(Lost(f"the stream broke while sending: {exc}"))

    def cancel(self, message_id: str) -> None:
        """Ask the host to cancel the handler of `message_id` (best effort)."""
        self.note({"t": "c", "id": message_id})

    def note(self, frame: dict[str, Any]) -> bool:
        """Send a frame nobody answers; whether it went (best effort)."""
        if self.closed:
            return False
        self._out.put(encode(frame))
        return True

    async def _read(self, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                frame = await read_frame(reader)
                if frame is None:
                    self._fail(Lost("the host closed the stream"))
                    return
                if frame["t"] == "x":  # the host could not read what we sent
                    err = frame.get("err")
                    self._fail(wire.rebuild(err if isinstance(err, dict) else {}))
                    return
                # A call's entry goes when its reply comes, also when its caller stopped
                # waiting (timed out or cancelled: the host answers it, cancelled, soon).
                future = self._calls.pop(frame.get("n"), None)  # type: ignore[arg-type]
                if future is not None and not future.done():
                    future.set_result(frame.get("reply"))  # type: ignore[arg-type]
        except asyncio.CancelledError:
            self._fail(Lost("the router closed the stream"))
            raise
        except (Lost, SerializationError) as exc:
            self._fail(exc)
        except OSError as exc:
            self._fail(Lost(f"the stream broke: {exc.__class__.__name__}: {exc}"))
        except Exception as exc:  # a reply frame holding the wrong things
            self._fail(SerializationError(f"a direct-path reply could not be read: {exc!r}"))

    def _fail(self, exc: BaseException) -> None:
        self.closed = True
        self._out.flush()  # what was sent before (a cancellation note) still goes
        for future in list(self._calls.values()):
            if not future.done():
                future.set_exception(exc)
        self._calls.clear()
        self._writer.close()

    def close(self) -> None:
        if not self._reading.done():
            self._reading.cancel()
        self._fail(Lost("the router closed the stream"))


class DirectClient:
    """A router's connections, one per host address, opened on first use. `tls` (see
    `TLS`) is read when the client is made: Ray's TLS on with its files missing is a
    `ConfigurationError` as the runtime starts."""

    def __init__(self, *, tls: TLS = "ray") -> None:
        self._ssl = _tls.ray_client_context() if isinstance(tls, str) else tls
        self._conns: dict[Address, _Connection] = {}
        self._opening: dict[Address, asyncio.Future[_Connection]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._unreachable: set[str] = set()  # hosts a connection timed out to

    async def connection(self, address: Address, wait: float | None) -> _Connection:
        """The open connection to `address`; `Refused` when none can be opened in time."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # streams belong to one loop; start afresh in this one
            self._conns, self._opening, self._loop = {}, {}, loop
        conn = self._conns.get(address)
        if conn is not None and not conn.closed:
            return conn
        opening = self._opening.get(address)
        if opening is None:
            opening = self._opening[address] = asyncio.ensure_future(self._open(address))
            opening.add_done_callback(lambda _: self._opening.pop(address, None))
        bound = _CONNECT_WAIT if wait is None else min(wait, _CONNECT_WAIT)
        try:
            return await asyncio.wait_for(asyncio.shield(opening), bound)
        except TimeoutError:
            if bound >= _CONNECT_WAIT:  # a whole connect wait: Ray calls to that host
                self._unreachable.add(address[0])
            raise Refused(f"no stream to {address[0]}:{address[1]} within {bound}s") from None

    async def _open(self, address: Address) -> _Connection:
        host, port, secret = address
        if host in self._unreachable:
            raise Refused(f"{host} could not be reached before: Ray calls to it")
        try:
            if self._ssl is None:
                reader, writer = await _connect(address)
            else:
                reader, writer = await asyncio.open_connection(
                    host, port, ssl=self._ssl, ssl_handshake_timeout=_CONNECT_WAIT
                )
        except ssl.SSLError as exc:
            _log.warning("direct stream to %s:%s: TLS refused (%s); Ray calls", host, port, exc)
            raise Refused(f"{host}:{port} refused the stream: TLS handshake: {exc}") from None
        except OSError as exc:
            raise Refused(f"{host}:{port} refused the stream: {exc}") from None
        if self._ssl is not None and not _tls.peer_matches(writer.get_extra_info("peercert"), host):
            writer.close()
            _log.warning("direct stream to %s:%s: its certificate does not name it", host, port)
            raise Refused(f"{host}:{port} refused the stream: its TLS certificate names another")
        try:
            writer.write(encode({"t": "h", "s": secret}))
            answer = await read_frame(reader)
        except (OSError, Lost, SerializationError) as exc:
            writer.close()
            if isinstance(exc, ssl.SSLError):  # the host's TLS refused our certificate
                _log.warning("direct stream to %s:%s: TLS refused (%s); Ray calls", host, port, exc)
            raise Refused(f"{host}:{port} did not open the stream: {exc}") from None
        if answer is None or answer["t"] != "h":
            writer.close()
            why = "it ended the stream" if answer is None else answer  # a TLS refusal, say
            raise Refused(f"{host}:{port} refused the stream: {why}")
        conn = self._conns[address] = _Connection(reader, writer)
        return conn

    def open_connection(self, address: Address) -> _Connection | None:
        """The connection to `address` if one is open in this loop, else None."""
        conn = self._conns.get(address)
        if conn is None or conn.closed or self._loop is not asyncio.get_running_loop():
            return None
        return conn

    def drop(self, address: Address) -> None:
        conn = self._conns.pop(address, None)
        if conn is not None:
            conn.close()

    def close(self) -> None:
        """End every connection (the calls still waiting see them lost)."""
        for address in list(self._conns):
            self.drop(address)
        for opening in self._opening.values():
            opening.cancel()


def local_name(address: Address) -> str:
    """The Linux abstract socket a server at `address` also listens on: its port and a
    hash of its secret (so only that server can have made it). Abstract names belong to
    a network namespace, as the address does, and leave no file behind."""
    host, port, secret = address
    digest = hashlib.sha256(secret.encode()).hexdigest()[:24]
    return f"\0cantata-direct-{host}-{port}-{digest}"


async def _connect(address: Address) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A plain stream to `address`: its local socket when the server is on this machine
    (in this network namespace), which skips the TCP stack (about a quarter of a round
    trip on loopback), else TCP."""
    if _LOCAL_SOCKETS:
        try:
            return await asyncio.open_unix_connection(local_name(address))
        except OSError:  # on another machine, or listening on TCP only
            pass
    return await asyncio.open_connection(address[0], address[1])


# -- asking Ray about a peer ----------------------------------------------------------------


def node_ip() -> str:
    """This Ray node's IP address (the one the cluster knows it by), to listen on."""
    import ray

    return str(ray.util.get_node_ip_address())  # type: ignore[no-untyped-call]


async def address_of(handle: Any, wait: float) -> Address | None:
    """The direct address an actor (`AgentHost` or `Directory`) reports; None when it has
    none, or does not say within `wait` seconds (dead already: its Ray call says so)."""
    try:
        found = await asyncio.wait_for(
            asyncio.wrap_future(handle.direct_address.remote().future()), wait
        )
    except (RayActorError, TimeoutError):
        return None
    return None if found is None else (str(found[0]), int(found[1]), str(found[2]))


async def died(handle: Any, wait: float = 60.0) -> bool:
    """Whether Ray says the actor behind a broken stream is dead; False when it answers a
    bounded call (or cannot tell within `wait` seconds, a bound for a busy cluster)."""
    try:
        probe = handle.__ray_ready__.remote()  # every Ray actor has it
        await asyncio.wait_for(asyncio.wrap_future(probe.future()), wait)
    except ActorDiedError:
        return True
    except (RayActorError, TimeoutError):
        return False
    return False
