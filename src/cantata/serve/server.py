"""Running the app on uvicorn: the one blocking call behind `cantata serve`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..core import ConfigurationError
from .app import build_app
from .auth import check_bind
from .limits import Limits

__all__ = ["DEFAULT_STORE_URL", "serve"]

DEFAULT_STORE_URL = "sqlite:///.cantata/serve.db"
"""Where `serve` keeps server-side threads unless told otherwise (relative to the
working directory)."""

_GRACE = 5.0  # seconds open requests get to finish when the server stops


def serve(
    served: Any,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    token: str | None = None,
    store: str = DEFAULT_STORE_URL,
    limits: Limits | None = None,
    log_level: str = "info",
) -> None:
    """Serve `served` until interrupted (Ctrl-C). Refuses a non-loopback `host` without a
    `token`; the store keeps the Responses API's conversations across restarts."""
    import uvicorn

    check_bind(host, token)
    if type(port) is not int or not 0 <= port <= 65535:
        raise ConfigurationError(f"port must be a whole number from 0 to 65535, got {port!r}")
    if store == DEFAULT_STORE_URL:
        os.makedirs(Path(".cantata"), exist_ok=True)
    app = build_app(served, store=store, token=token, limits=limits)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        lifespan="on",
        timeout_graceful_shutdown=int(_GRACE),
        server_header=False,
    )
    uvicorn.Server(config).run()
