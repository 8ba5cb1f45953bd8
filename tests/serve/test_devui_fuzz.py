"""Hypothesis fuzz of the dev UI API's bodies on a real server: whatever arrives, the answer
is a success or a typed 4xx error in the server's JSON shape, never a 500."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cantata.stores import MemoryStore

from ._servers import serving
from .test_devui_api import TIMEOUT, run_to_stop, served

JSON = {"Content-Type": "application/json"}

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda kids: (
        st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=12), kids, max_size=4)
    ),
    max_leaves=12,
)
_keys = st.sampled_from(["message", "input", "chat_id", "answers", "checkpoint_id", "x"])
_bodies = (
    st.dictionaries(_keys, _json, max_size=3).map(lambda d: json.dumps(d).encode())
    | _json.map(lambda v: json.dumps(v).encode())
    | st.binary(max_size=64)
)


@pytest.fixture
async def waiting_run() -> AsyncIterator[tuple[str, str]]:
    """A server and a run of `review` waiting for an answer: (base URL, run id)."""
    async with MemoryStore() as store, serving(served(), store=store) as url:
        async with httpx.AsyncClient(base_url=url, timeout=TIMEOUT) as client:
            run = (await client.post("/devui/api/runs/review", json={"input": "x"})).json()
            await run_to_stop(client, run["id"])
        yield url, run["id"]


def _check(res: httpx.Response) -> None:
    assert res.status_code in {200, 201, 400, 404, 409}, (res.status_code, res.text)
    if res.status_code >= 400:
        body: Any = res.json()
        assert isinstance(body["error"]["message"], str) and body["error"]["message"]


@given(body=_bodies, path=st.sampled_from(["chat/echo", "runs/review", "runs/pair", "runs/zz"]))
async def test_start_bodies(waiting_run: tuple[str, str], body: bytes, path: str) -> None:
    url, _ = waiting_run
    async with httpx.AsyncClient(base_url=url, timeout=TIMEOUT) as client:
        _check(await client.post(f"/devui/api/{path}", content=body, headers=JSON))


@given(body=_bodies, action=st.sampled_from(["answers", "resume"]))
async def test_run_bodies(waiting_run: tuple[str, str], body: bytes, action: str) -> None:
    url, run_id = waiting_run
    async with httpx.AsyncClient(base_url=url, timeout=TIMEOUT) as client:
        _check(await client.post(f"/devui/api/run/{run_id}/{action}", content=body, headers=JSON))
