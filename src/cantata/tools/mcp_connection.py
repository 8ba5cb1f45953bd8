"""One live connection to an MCP server, held open by a task of its own.

The `mcp` SDK's client lives in anyio task groups, which must be left by the task that
entered them; an `MCPTools` is often opened in one task and closed in another (a test
fixture, an app's lifespan, an `AsyncExitStack` unwound elsewhere). So a holder task
enters the client, lists the tools, and waits to be told to stop; calls from any task use
the client while it is held. Opening and closing are bounded; a holder that will not stop
is cancelled.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mcp import Client
    from mcp_types import Tool

__all__ = ["CLOSE_TIMEOUT", "MCPConnection", "list_all_tools"]

CLOSE_TIMEOUT = 15.0
"""Seconds the holder gets to close the session (the SDK stops a stdio server within
about 7 s: stdin closed, terminate, kill); past that it is cancelled."""

_log = logging.getLogger("cantata.tools")


class MCPConnection:
    """A client held open by its own task: `open` returns the listed tools, `client` is
    the live client (None once closed or gone), `close` stops the holder."""

    def __init__(self, make_client: Callable[[], AbstractAsyncContextManager[Client]]) -> None:
        self._make_client = make_client
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.client: Client | None = None
        self.failure: BaseException | None = None
        """What ended the connection early, if anything did."""

    async def open(self, within: float) -> list[Tool]:
        """Connect and list the tools within `within` seconds; raises `TimeoutError` or
        what the connection raised (the holder is stopped either way)."""
        ready: asyncio.Future[list[Tool]] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._hold(ready), name="cantata-mcp-connection")
        try:
            done, _ = await asyncio.wait({ready}, timeout=within)
        except BaseException:  # cancelled while connecting: stop the holder at once
            await self.close(cancel=True)
            raise
        if not done:
            await self.close(cancel=True)
            raise TimeoutError(f"no tool list within {within:g} s")
        if ready.exception() is not None:
            await self.close()
        return ready.result()

    async def close(self, *, cancel: bool = False) -> None:
        """Stop the holder: it leaves the client (closing the session, stopping a server
        process); a holder still busy after `CLOSE_TIMEOUT` is cancelled (at once with
        `cancel`, for one still connecting)."""
        self._stop.set()
        task, self._task = self._task, None
        if task is None:
            return
        if cancel:
            task.cancel()
        done, _ = await asyncio.wait({task}, timeout=CLOSE_TIMEOUT)
        if not done:
            _log.warning("the MCP client did not close within %g s; cancelling it", CLOSE_TIMEOUT)
            task.cancel()
            await asyncio.wait({task}, timeout=CLOSE_TIMEOUT)

    async def _hold(self, ready: asyncio.Future[list[Tool]]) -> None:
        try:
            async with self._make_client() as client:
                listed = await list_all_tools(client)
                self.client = client
                if not ready.done():
                    ready.set_result(listed)
                await self._stop.wait()
        except Exception as exc:
            self.failure = exc
            if not ready.done():
                ready.set_exception(exc)
            else:
                _log.debug("the MCP connection ended with an error", exc_info=exc)
        except asyncio.CancelledError:
            if not ready.done():
                ready.cancel()
            raise
        finally:
            self.client = None


async def list_all_tools(client: Client) -> list[Tool]:
    """Every tool, across pages (at most 100 pages: a server that pages forever ends)."""
    tools: list[Tool] = []
    cursor: str | None = None
    for _ in range(100):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return tools
    raise RuntimeError("the MCP server listed more than 100 pages of tools")
