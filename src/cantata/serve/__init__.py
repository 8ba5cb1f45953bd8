"""cantata.serve: one ASGI app over agents, workflows and teams.

`build_app(served)` makes the app (Starlette; run it on uvicorn, or with `cantata serve`):
the OpenAI-compatible endpoints (``/v1/models``, ``/v1/chat/completions``,
``/v1/responses`` with conversations kept on the server), and whatever other modules
contribute through route providers (see `app`); ``/metrics`` in Prometheus's format. Model
work is admitted within bounds (`Limits`; the rest is answered 429), streams follow their
client's reading, and a server told to stop drains (`Drain`). It listens on loopback by
default; on any other address it needs a token, or keys for its clients (`identity`:
every client's conversations, tasks and runs are its own).

The names here load their module on first use, as the `cantata` package's do, so a command
that only needs a default (``cantata serve --help``) does not pay for the server.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .app import (
        OPTIONAL_PROVIDERS,
        Contribution,
        RouteProvider,
        ServeContext,
        ShutdownCallback,
        build_app,
        default_providers,
    )
    from .auth import TOKEN_COOKIE, TOKEN_ENV, IdentityMiddleware, check_bind, is_loopback
    from .drain import DEFAULT_GRACE, Drain
    from .errors import OverloadedError, RequestError, ServerStoppingError
    from .identity import (
        ANONYMOUS,
        HeaderTrust,
        Identity,
        KeysFileError,
        ServeKeys,
        check_identity_name,
        identity_of,
        parse_keys,
        read_keys_file,
    )
    from .limits import (
        DEFAULT_ABANDON_AFTER,
        DEFAULT_MAX_BODY_BYTES,
        DEFAULT_MAX_QUEUED,
        DEFAULT_MAX_RUNNING,
        DEFAULT_QUEUE_TIMEOUT,
        DEFAULT_REQUEST_TIMEOUT,
        DEFAULT_WRITE_TIMEOUT,
        Limits,
    )
    from .mcp_routes import MCP_PATH
    from .mcp_server import (
        DEFAULT_MCP_CALL_TIMEOUT,
        MCP_TASK_ARGUMENT,
        as_mcp_server,
        run_mcp_stdio,
    )
    from .metrics import METRICS_PATH, ServeMetrics
    from .owned_store import OwnedStore, owned_key
    from .served import Served, ServedKind, ServedSet, load_target
    from .server import DEFAULT_STORE_URL, serve
    from .threads import RESPONSE_SCHEMA_VERSION, ResponseRecord, ResponseThreads

# name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "OPTIONAL_PROVIDERS": "app",
    "Contribution": "app",
    "RouteProvider": "app",
    "ServeContext": "app",
    "ShutdownCallback": "app",
    "build_app": "app",
    "default_providers": "app",
    "TOKEN_COOKIE": "auth",
    "TOKEN_ENV": "auth",
    "IdentityMiddleware": "auth",
    "check_bind": "auth",
    "is_loopback": "auth",
    "Drain": "drain",
    "OverloadedError": "errors",
    "RequestError": "errors",
    "ServerStoppingError": "errors",
    "ANONYMOUS": "identity",
    "HeaderTrust": "identity",
    "Identity": "identity",
    "KeysFileError": "identity",
    "ServeKeys": "identity",
    "check_identity_name": "identity",
    "identity_of": "identity",
    "parse_keys": "identity",
    "read_keys_file": "identity",
    "DEFAULT_ABANDON_AFTER": "limits",
    "DEFAULT_MAX_BODY_BYTES": "limits",
    "DEFAULT_MAX_QUEUED": "limits",
    "DEFAULT_MAX_RUNNING": "limits",
    "DEFAULT_QUEUE_TIMEOUT": "limits",
    "DEFAULT_REQUEST_TIMEOUT": "limits",
    "DEFAULT_WRITE_TIMEOUT": "limits",
    "Limits": "limits",
    "MCP_PATH": "mcp_routes",
    "DEFAULT_MCP_CALL_TIMEOUT": "mcp_server",
    "MCP_TASK_ARGUMENT": "mcp_server",
    "as_mcp_server": "mcp_server",
    "run_mcp_stdio": "mcp_server",
    "METRICS_PATH": "metrics",
    "ServeMetrics": "metrics",
    "OwnedStore": "owned_store",
    "owned_key": "owned_store",
    "Served": "served",
    "ServedKind": "served",
    "ServedSet": "served",
    "load_target": "served",
    "DEFAULT_GRACE": "drain",
    "DEFAULT_STORE_URL": "server",
    "serve": "server",
    "RESPONSE_SCHEMA_VERSION": "threads",
    "ResponseRecord": "threads",
    "ResponseThreads": "threads",
}

__all__ = [
    "ANONYMOUS",
    "DEFAULT_ABANDON_AFTER",
    "DEFAULT_GRACE",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_QUEUED",
    "DEFAULT_MAX_RUNNING",
    "DEFAULT_MCP_CALL_TIMEOUT",
    "DEFAULT_QUEUE_TIMEOUT",
    "DEFAULT_REQUEST_TIMEOUT",
    "DEFAULT_STORE_URL",
    "DEFAULT_WRITE_TIMEOUT",
    "MCP_PATH",
    "MCP_TASK_ARGUMENT",
    "METRICS_PATH",
    "OPTIONAL_PROVIDERS",
    "RESPONSE_SCHEMA_VERSION",
    "TOKEN_COOKIE",
    "TOKEN_ENV",
    "Contribution",
    "Drain",
    "HeaderTrust",
    "Identity",
    "IdentityMiddleware",
    "KeysFileError",
    "Limits",
    "OverloadedError",
    "OwnedStore",
    "RequestError",
    "ResponseRecord",
    "ResponseThreads",
    "RouteProvider",
    "ServeContext",
    "ServeKeys",
    "ServeMetrics",
    "Served",
    "ServedKind",
    "ServedSet",
    "ServerStoppingError",
    "ShutdownCallback",
    "as_mcp_server",
    "build_app",
    "check_bind",
    "check_identity_name",
    "default_providers",
    "identity_of",
    "is_loopback",
    "load_target",
    "owned_key",
    "parse_keys",
    "read_keys_file",
    "run_mcp_stdio",
    "serve",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'cantata.serve' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
