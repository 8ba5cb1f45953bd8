"""cantata.serve: one ASGI app over agents, workflows and teams.

`build_app(served)` makes the app (Starlette; run it on uvicorn, or with `cantata serve`):
the OpenAI-compatible endpoints (``/v1/models``, ``/v1/chat/completions``,
``/v1/responses`` with conversations kept on the server), and whatever other modules
contribute through route providers (see `app`); ``/metrics`` in Prometheus's format. Model
work is admitted within bounds (`Limits`; the rest is answered 429), streams follow their
client's reading, and a server told to stop drains (`Drain`). It listens on loopback by
default; on any other address it needs a token, or keys for its clients (`identity`:
every client's conversations, tasks and runs are its own).
"""

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
from .drain import Drain
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
from .mcp_server import DEFAULT_MCP_CALL_TIMEOUT, MCP_TASK_ARGUMENT, as_mcp_server, run_mcp_stdio
from .metrics import METRICS_PATH, ServeMetrics
from .owned_store import OwnedStore, owned_key
from .served import Served, ServedKind, ServedSet, load_target
from .server import DEFAULT_GRACE, DEFAULT_STORE_URL, serve
from .threads import RESPONSE_SCHEMA_VERSION, ResponseRecord, ResponseThreads

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
