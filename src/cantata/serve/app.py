"""The app factory: one Starlette app over a served set, with routes contributed by modules.

`build_app(served)` returns an ASGI app. Its routes come from route providers: a provider
is a function of the `ServeContext` (what is served, the store, the limits) returning a
`Contribution` (routes, and optionally a lifespan to run while the app runs). The OpenAI
routes are one provider; A2A, MCP and the dev UI are others, found by module name in
`OPTIONAL_PROVIDERS` (each module defines ``contribute(ctx) -> Contribution``), so a part
of the server is added by writing its module, not by editing this one.

Middleware, outermost first: the token check (when a token is set), then the limits (body
size, request timeout, cancel on disconnect), then the routes.
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeAlias

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute
from starlette.types import ASGIApp

from ..core import ConfigurationError
from ..stores import MemoryStore, StateStore, open_store
from ..workflows import StateStoreCheckpointStore
from .auth import TokenAuthMiddleware
from .errors import RequestError, error_body, status_for
from .limits import Limits, LimitsMiddleware
from .served import ServedSet
from .threads import ResponseThreads

__all__ = [
    "OPTIONAL_PROVIDERS",
    "Contribution",
    "RouteProvider",
    "ServeContext",
    "build_app",
    "default_providers",
]


@dataclass(frozen=True, slots=True)
class ServeContext:
    """What every route provider gets: the served set, the store for server-side threads
    (namespace your keys and logs, e.g. ``a2a:``), the limits, and the rolling-id threads
    of the Responses API."""

    served: ServedSet
    store: StateStore
    limits: Limits
    responses: ResponseThreads


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
) -> ASGIApp:
    """One ASGI app serving `served` (an agent, workflow or team, a dict or list of them, or
    a `ServedSet`).

    `store` keeps server-side threads: a `StateStore` (yours to close) or a URL for
    `open_store` (closed with the app); by default an in-memory store (`cantata serve` uses
    SQLite). With `token`, every request must carry it. `providers` default to
    `default_providers()`.
    """
    owned = store is None or isinstance(store, str)
    state = open_store(store) if isinstance(store, str) else (store or MemoryStore())
    if not isinstance(state, StateStore):
        raise ConfigurationError(
            f"store must be a StateStore or a store URL, got {type(store).__name__}"
        )
    entries = ServedSet(served, checkpoint_store=StateStoreCheckpointStore(state))
    ctx = ServeContext(entries, state, limits or Limits(), ResponseThreads(state))
    contributions = [p(ctx) for p in (default_providers() if providers is None else providers)]

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            if owned:
                stack.push_async_callback(state.close)
            for c in contributions:
                if c.lifespan is not None:
                    await stack.enter_async_context(c.lifespan())
            yield

    app = Starlette(
        routes=[r for c in contributions for r in c.routes],
        lifespan=lifespan,
        exception_handlers={HTTPException: _http_error, Exception: _server_error},
    )
    app.state.cantata = ctx
    wrapped: ASGIApp = LimitsMiddleware(app, ctx.limits)
    if token is not None:
        wrapped = TokenAuthMiddleware(wrapped, token)
    return wrapped


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
    return JSONResponse(error_body(exc), status_code=status_for(exc))
