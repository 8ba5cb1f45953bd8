"""The app factory: one Starlette app over a served set, with routes contributed by modules.

`build_app(served)` returns an ASGI app. Its routes come from route providers: a provider
is a function of the `ServeContext` (what is served, the store, the limits) returning a
`Contribution` (routes, and optionally a lifespan to run while the app runs). The OpenAI
routes are one provider; A2A, MCP and the dev UI are others, found by module name in
`OPTIONAL_PROVIDERS` (each module defines ``contribute(ctx) -> Contribution``), so a part
of the server is added by writing its module, not by editing this one.

Middleware, outermost first: CORS (only for the origins given), the guard against web pages
(`guard`: the ``Host`` and content-type checks, default security headers), the identity
check (`auth`: the token or keys, or a trusted proxy's header), then the limits (body
size, admission, request timeout, write timeout, cancel on disconnect), then the routes.
What a route asks of admission it declares itself (an `admission.AdmittedRoute`); the
limits read it from the app's routes.
``GET /metrics`` answers with the app's metrics (Prometheus text format).

When the app stops (the ASGI lifespan's shutdown, after the server's drain), the callbacks
in `ServeContext.on_shutdown` run, in order, before the store closes.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp

from ..core import ConfigurationError
from ..stores import MemoryStore, StateStore, open_store
from ..workflows import StateStoreCheckpointStore
from .admission import RouteTable
from .auth import IdentityMiddleware
from .drain import Drain
from .errors import RequestError, error_body, error_headers, status_for
from .guard import check_allowed_host, check_cors_origin, check_public_url, guarded
from .identity import HeaderTrust, ServeKeys
from .limits import Limits, LimitsMiddleware
from .metrics import METRICS_PATH, ServeMetrics
from .owned_store import OwnedStore
from .served import ServedSet
from .threads import ResponseThreads

__all__ = [
    "OPTIONAL_PROVIDERS",
    "Contribution",
    "RouteProvider",
    "ServeContext",
    "ShutdownCallback",
    "build_app",
    "default_providers",
]

ShutdownCallback: TypeAlias = Callable[[], Awaitable[object]]
_SHUTDOWN_CALLBACK_TIMEOUT = 10.0
_CLAIM_SLACK = 60.0
"""Seconds past the request timeout after which a waiting session's claim by a process that
did not finish its run is taken over."""
_log = logging.getLogger("cantata.serve")


@dataclass(frozen=True, slots=True)
class ServeContext:
    """What every route provider gets: the served set, the store for server-side threads
    (namespace your keys and logs, e.g. ``a2a:``; it is an `OwnedStore`, so what a request
    keeps there is its identity's alone, see `identity`), the limits, the rolling-id threads
    of the Responses API, the app's drain (wrap a run in ``drain.stoppable()`` so that
    shutdown ends it cleanly) and metrics, and `on_shutdown`: async callbacks run when the
    app stops, before the store closes (each bounded to 10 s; a failure is logged).
    `public_url` is where clients reach the server, when configured (a route that names its
    own URL, like an A2A card, uses it rather than anything a request says)."""

    served: ServedSet
    store: StateStore
    limits: Limits
    responses: ResponseThreads
    drain: Drain = field(default_factory=Drain)
    metrics: ServeMetrics = field(default_factory=ServeMetrics)
    on_shutdown: list[ShutdownCallback] = field(default_factory=list)
    public_url: str | None = None


@dataclass(frozen=True, slots=True)
class Contribution:
    """What a provider adds: Starlette routes (`Route`, `Mount`, `WebSocketRoute`), and a
    `lifespan` entered when the app starts and left when it stops (e.g. an MCP session
    manager's ``run()``)."""

    routes: Sequence[BaseRoute] = ()
    lifespan: Callable[[], AbstractAsyncContextManager[Any]] | None = None


RouteProvider: TypeAlias = Callable[[ServeContext], Contribution]

OPTIONAL_PROVIDERS: tuple[str, ...] = (
    "cantata.serve.a2a_routes",
    "cantata.serve.mcp_routes",
    "cantata.serve.devui",
)
"""Modules whose ``contribute(ctx)`` joins the default providers when the module exists."""


def default_providers() -> list[RouteProvider]:
    """The OpenAI routes, then each of `OPTIONAL_PROVIDERS` that is installed."""
    from .openai_routes import contribute

    providers: list[RouteProvider] = [contribute]
    for name in OPTIONAL_PROVIDERS:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:  # that part is not written yet; a missing dependency is raised
                continue
            raise
        providers.append(module.contribute)
    return providers


def build_app(
    served: Any,
    *,
    store: StateStore | str | None = None,
    token: str | None = None,
    limits: Limits | None = None,
    providers: Sequence[RouteProvider] | None = None,
    drain: Drain | None = None,
    allowed_hosts: Sequence[str] = (),
    cors_origins: Sequence[str] = (),
    public_url: str | None = None,
    keys: Mapping[str, str] | None = None,
    trust_identity_header: str | None = None,
    trusted_proxies: Sequence[str] = (),
) -> ASGIApp:
    """One ASGI app serving `served` (an agent, workflow or team, a dict or list of them, or
    a `ServedSet`).

    `store` keeps server-side threads: a `StateStore` (yours to close) or a URL for
    `open_store` (closed with the app); by default an in-memory store (`cantata serve` uses
    SQLite). With `token`, every request must carry it. `providers` default to
    `default_providers()`. `drain` is what the server calls to stop the app gracefully
    (`serve` passes its own; by default one the app keeps).

    A request must name the server in its ``Host`` header: its own address, ``localhost``
    on loopback, `public_url`'s host, or one of `allowed_hosts` (``"*"`` for any); and a
    POST must be JSON (see `guard`). `cors_origins` are the web origins whose pages may call
    the server (none by default). `public_url` (``https://agents.example.com``) is the URL
    clients reach the server at, for what names it (the A2A cards).

    Identities (see `identity`): `keys` maps each client's key to its identity's name
    (`read_keys_file` reads them from a file); `token` is one more key, of the anonymous
    identity. `trust_identity_header` names a header that `trusted_proxies` (addresses or
    networks) set to the identity of each request. Everything a request stores belongs to
    its identity: no other identity finds it.
    """
    public = check_public_url(public_url) if public_url is not None else None
    hosts = [check_allowed_host(h) for h in allowed_hosts]
    if public is not None:
        hosts.append(check_allowed_host(_host_of_url(public)))
    server_keys = ServeKeys.of(token=token, keys=keys)
    trust = (
        HeaderTrust(trust_identity_header, list(trusted_proxies))
        if trust_identity_header is not None
        else None
    )
    if trust is None and trusted_proxies:
        raise ConfigurationError(
            "--trusted-proxy is for --trust-identity-header: name the header those proxies "
            "set the identity in"
        )
    guarded_by = token if token is not None else ("keys" if server_keys or trust else None)
    origins = [check_cors_origin(o, token=guarded_by) for o in cors_origins]
    owned = store is None or isinstance(store, str)
    state = open_store(store) if isinstance(store, str) else (store or MemoryStore())
    if not isinstance(state, StateStore):
        raise ConfigurationError(
            f"store must be a StateStore or a store URL, got {type(store).__name__}"
        )
    limits = limits or Limits()
    # a run is bounded by the request timeout: a session claimed by a process that died
    # is answerable again a minute after that
    lease = limits.request_timeout + _CLAIM_SLACK
    # every route reads and writes its identity's namespace (`owned_store`)
    owned_state = OwnedStore(state)
    checkpoints = StateStoreCheckpointStore(owned_state, claim_lease=lease)
    entries = ServedSet(served, checkpoint_store=checkpoints)
    ctx = ServeContext(
        entries,
        owned_state,
        limits,
        ResponseThreads(owned_state),
        drain=drain or Drain(),
        public_url=public,
    )
    contributions = [p(ctx) for p in (default_providers() if providers is None else providers)]

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            if owned:
                stack.push_async_callback(state.close)
            stack.push_async_callback(_run_shutdown_callbacks, ctx.on_shutdown)
            for c in contributions:
                if c.lifespan is not None:
                    await stack.enter_async_context(c.lifespan())
            yield

    metrics_route = Route(METRICS_PATH, ctx.metrics.endpoint, methods=["GET"])
    app = Starlette(
        routes=[metrics_route, *(r for c in contributions for r in c.routes)],
        lifespan=lifespan,
        exception_handlers={HTTPException: _http_error, Exception: _server_error},
    )
    app.state.cantata = ctx
    table = RouteTable(app.routes)
    wrapped: ASGIApp = LimitsMiddleware(
        app, ctx.limits, routes=table, metrics=ctx.metrics, drain=ctx.drain
    )
    wrapped = IdentityMiddleware(wrapped, server_keys, trust=trust)
    return guarded(wrapped, allowed_hosts=hosts, cors_origins=origins, routes=table)


def _host_of_url(url: str) -> str:
    from urllib.parse import urlsplit

    return urlsplit(url).hostname or ""


async def _run_shutdown_callbacks(callbacks: list[ShutdownCallback]) -> None:
    for callback in list(callbacks):
        try:
            async with asyncio.timeout(_SHUTDOWN_CALLBACK_TIMEOUT):
                await callback()
        except Exception as exc:
            _log.error("a shutdown callback (%r) failed: %r", callback, exc)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        message = f"no route {request.method} {request.url.path} on this server"
    elif exc.status_code == 405:
        message = f"{request.method} is not allowed on {request.url.path}"
    else:
        message = str(exc.detail)
    err = RequestError(message, status=exc.status_code)
    return JSONResponse(error_body(err), status_code=exc.status_code, headers=exc.headers)


async def _server_error(request: Request, exc: Exception) -> Response:
    return JSONResponse(error_body(exc), status_code=status_for(exc), headers=error_headers(exc))
