"""Fixtures of the serve tests: a served echo agent on a real uvicorn."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from cantata.stores import MemoryStore

from ._servers import echo_agent, serving


@pytest.fixture
async def echo_url() -> AsyncIterator[str]:
    """Base URL of a server serving the echo agent (in memory), stopped after the test."""
    async with MemoryStore() as store, serving(echo_agent(), store=store) as url:
        yield url
