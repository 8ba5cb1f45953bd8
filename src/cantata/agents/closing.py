"""Closing a chat client an agent owns, within a bound.

Clients close differently (``aclose()``, ``close()``, sync or async) and some wrap
another (`FunctionInvokingChatClient.client`); a close that hangs must not hang the
agent's owner forever.
"""

from __future__ import annotations

import asyncio
import builtins
import inspect
import logging
from typing import Any

from ..core import TimeoutError

__all__ = ["CLOSE_TIMEOUT", "close_client"]

CLOSE_TIMEOUT = 30.0
"""Seconds `close_client` waits for a client to close."""

_log = logging.getLogger("cantata.agents")


async def close_client(client: Any, *, owner: str, limit: float = CLOSE_TIMEOUT) -> None:
    """Close `client` (and the client it wraps, if it only wraps one); raises the typed
    `TimeoutError` when closing takes longer than `limit` seconds."""
    seen: set[int] = set()
    while client is not None and id(client) not in seen:
        seen.add(id(client))
        close = getattr(client, "aclose", None) or getattr(client, "close", None)
        if callable(close):
            _log.debug("agent %s closes its client %r", owner, client)
            try:
                async with asyncio.timeout(limit):
                    result = close()
                    if inspect.isawaitable(result):
                        await result
            except builtins.TimeoutError as exc:
                raise TimeoutError(
                    f"agent `{owner}`: its client {type(client).__name__} did not close "
                    f"within {limit:g} s; check the client's server or connections"
                ) from exc
            return
        client = getattr(client, "client", None)  # a wrapper such as the function loop
