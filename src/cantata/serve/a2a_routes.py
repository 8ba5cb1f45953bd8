"""The A2A endpoints of `cantata serve`: each served agent, workflow or team is an A2A agent.

For a served entry named ``echo``:

- ``GET /a2a/echo/.well-known/agent-card.json``: its agent card (the URL inside is the
  server's public URL, ``--public-url``, when given; otherwise the address the request
  came in on; never what the request's ``Host`` header says);
- ``POST /a2a/echo``: JSON-RPC, protocol 1.0 (``SendMessage``, ``SendStreamingMessage``,
  ``GetTask``, ``ListTasks``, ``CancelTask``) and 0.3 (``message/send``,
  ``message/stream``, ``tasks/get``, ``tasks/cancel``), on the a2a-sdk's request handler.

``GET /.well-known/agent-card.json`` is the card of the one served entry when there is
only one. Tasks live in the server's store (``a2a:task:``), and each context's thread too
(``a2a:ctx:``), so both survive a restart on a durable store. A run that waits for a
person (a tool's approval, a workflow's request) leaves its task ``input-required``; the
next message on the task answers it (`human_input`).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from importlib.metadata import PackageNotFoundError, version

from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.types.a2a_pb2 import AgentCapabilities, AgentCard, AgentInterface, AgentSkill
from a2a.utils.constants import (
    PROTOCOL_VERSION_0_3,
    PROTOCOL_VERSION_1_0,
    VERSION_HEADER,
    TransportProtocol,
)
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from ..core import SerializationError, loads_json
from .a2a_executor import ServedAgentExecutor
from .a2a_handler import ServedRequestHandler
from .a2a_tasks import StoreTaskStore
from .admission import AdmittedRoute, RouteWork, Work, rpc_method
from .app import Contribution, ServeContext
from .errors import RequestError, error_body
from .human_input import WaitingThreads
from .served import Served

__all__ = ["A2A_PATH", "A2A_WORK", "CARD_PATH", "agent_card", "contribute"]

A2A_PATH = "/a2a"
"""Each served entry's A2A endpoint is ``/a2a/<name>``."""
CARD_PATH = "/.well-known/agent-card.json"
_Endpoint = Callable[[Request], Awaitable[Response]]
_PARSE_ERROR = -32700
_VERSION_ERROR = -32009
_V03 = ("message/", "tasks/", "agent/")
_SDK_LOG = "a2a.server.routes.jsonrpc_dispatcher"
_BAD_REQUEST_LINES = ("Failed to validate base JSON-RPC request", "Failed to parse request params")
_RUN_METHODS = frozenset({"SendMessage", "SendStreamingMessage", "message/send", "message/stream"})
_FOLLOW_METHODS = frozenset({"SubscribeToTask", "tasks/resubscribe"})


def _a2a_work(body: bytes) -> Work:
    method = rpc_method(body)
    if method in _RUN_METHODS:
        return "model"
    return "follow" if method in _FOLLOW_METHODS else "none"


A2A_WORK = RouteWork(_a2a_work, protocol="jsonrpc")
"""A message runs the entry; a subscription follows a task; reading a task is neither."""


class _OneLineForBadRequests(logging.Filter):
    """The SDK logs a client's malformed request twice: with the parser's traceback, then
    as one ``Request Error`` line naming what was wrong. Only that line is kept."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.msg in _BAD_REQUEST_LINES and record.exc_info)


def _quiet_sdk_tracebacks() -> None:
    log = logging.getLogger(_SDK_LOG)
    if not any(isinstance(f, _OneLineForBadRequests) for f in log.filters):
        log.addFilter(_OneLineForBadRequests())


def agent_card(entry: Served, url: str) -> AgentCard:
    """The A2A card of a served entry whose JSON-RPC endpoint is `url`."""
    description = entry.description or f"cantata {entry.kind} {entry.name}"
    return AgentCard(
        name=entry.name,
        description=description,
        version=_version(),
        supported_interfaces=[
            AgentInterface(
                url=url,
                protocol_binding=TransportProtocol.JSONRPC.value,
                protocol_version=v,
            )
            for v in (PROTOCOL_VERSION_1_0, PROTOCOL_VERSION_0_3)
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(
                id=entry.name,
                name=entry.name,
                description=description,
                tags=[entry.kind],
                examples=[],
            )
        ],
    )


def contribute(ctx: ServeContext) -> Contribution:
    """The card and JSON-RPC routes of every served entry, and the handlers' shutdown."""
    _quiet_sdk_tracebacks()
    tasks = StoreTaskStore(ctx.store)
    handlers = []
    routes: list[BaseRoute] = []
    for name, entry in ctx.served.items():
        path = f"{A2A_PATH}/{name}"
        handler = ServedRequestHandler(
            ServedAgentExecutor(
                entry,
                ctx.store,
                timeout=ctx.limits.request_timeout,
                drain=ctx.drain,
                waiting=WaitingThreads(
                    abandon_after=ctx.limits.abandon_after, abandoned=ctx.metrics.abandoned
                ),
            ),
            tasks,
            agent_card(entry, path),
        )
        handlers.append(handler)
        dispatcher = JsonRpcDispatcher(handler, enable_v0_3_compat=True)
        endpoint = _json_checked(dispatcher.handle_requests)
        routes.append(AdmittedRoute(path, endpoint, methods=["POST"], work=A2A_WORK))
        routes.append(
            Route(path + CARD_PATH, _card_endpoint(entry, path, ctx.public_url), methods=["GET"])
        )
    routes.append(Route(CARD_PATH, _root_card(ctx), methods=["GET"]))

    @asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        try:
            yield
        finally:
            for handler in handlers:
                await handler.aclose()

    return Contribution(routes=routes, lifespan=lifespan)


def _json_checked(endpoint: _Endpoint) -> _Endpoint:
    """`endpoint` for bodies that are JSON within cantata's bounds (UTF-8, depth) and whose
    method is of the protocol version the request names; otherwise JSON-RPC's parse error
    or A2A's version error (the SDK answers both with an internal error)."""

    async def checked(request: Request) -> Response:
        try:
            body = loads_json(await request.body())
        except SerializationError as exc:
            return _rpc_error(None, _PARSE_ERROR, f"the body is not JSON this server reads: {exc}")
        # protocol 0.3 methods are paths (message/send); 1.0 ones are names (SendMessage)
        method = body.get("method") if type(body) is dict else None
        version = request.headers.get(VERSION_HEADER, "")
        if type(method) is str and method.startswith(_V03) and version[:2] not in ("", "0."):
            request_id = body.get("id")
            return _rpc_error(
                request_id if type(request_id) in (str, int) else None,
                _VERSION_ERROR,
                f"method {method!r} is of A2A protocol 0.3, but the request says "
                f"{VERSION_HEADER}: {version[:20]}; send {VERSION_HEADER}: 0.3, or use the 1.0 "
                "method names (SendMessage, SendStreamingMessage, GetTask, CancelTask)",
            )
        return await endpoint(request)

    return checked


def _rpc_error(request_id: str | int | None, code: int, message: str) -> Response:
    error = {"code": code, "message": message}
    return JSONResponse({"jsonrpc": "2.0", "id": request_id, "error": error})


def _base_url(request: Request, public_url: str | None) -> str:
    """Where clients reach this server: the configured public URL, else the address and
    port the connection came in on (not the ``Host`` header, which the client writes)."""
    if public_url is not None:
        return public_url
    scheme = request.url.scheme
    server = request.scope.get("server") or ("127.0.0.1", None)
    host, port = str(server[0]), server[1]
    if ":" in host:
        host = f"[{host}]"
    default = {"http": 80, "https": 443}.get(scheme)
    return f"{scheme}://{host}" if port in (None, default) else f"{scheme}://{host}:{port}"


def _card_endpoint(entry: Served, path: str, public_url: str | None) -> _Endpoint:
    async def card(request: Request) -> Response:
        base = _base_url(request, public_url)
        return JSONResponse(agent_card_to_dict(agent_card(entry, base + path)))

    return card


def _root_card(ctx: ServeContext) -> _Endpoint:
    async def card(request: Request) -> Response:
        if len(ctx.served) == 1:
            (entry,) = ctx.served.values()
            base = _base_url(request, ctx.public_url)
            return JSONResponse(
                agent_card_to_dict(agent_card(entry, f"{base}{A2A_PATH}/{entry.name}"))
            )
        names = ", ".join(f"{A2A_PATH}/{n}" for n in list(ctx.served)[:20])
        err = RequestError(
            f"this server serves {len(ctx.served)} agents; read the card of one at "
            f"<its URL>{CARD_PATH}, one of: {names}",
            status=404,
        )
        return JSONResponse(error_body(err), status_code=404)

    return card


def _version() -> str:
    try:
        return version("cantata")
    except PackageNotFoundError:  # a source tree without an install
        return "0"
