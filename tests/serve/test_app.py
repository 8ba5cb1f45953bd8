"""The app's guards on a real server: token, body size, time bound, cancel on disconnect;
the served set and `load_target`; the `cantata serve` command."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any

import httpx
import openai
import pytest
from openai import AsyncOpenAI

from cantata.agents import (
    Agent,
    AgentInput,
    AgentResponse,
    AgentResponseStream,
    AgentResponseUpdate,
    AgentThread,
)
from cantata.core import ConfigurationError, Message, TextContent
from cantata.serve import Limits, ServedSet, build_app, check_bind, is_loopback, load_target
from cantata.stores import MemoryStore

from ._servers import ROOT, cli_server, echo_agent, serving

WAIT = 10.0  # bound of every wait on the server side
_CLI = (sys.executable, "-m", "cantata.cli")


class Waiter(Agent):
    """An agent whose run waits until it is cancelled, and says so."""

    def __init__(self) -> None:
        super().__init__(name="waiter")
        self.started = asyncio.Event()
        self.cancelled = asyncio.Event()

    async def run(
        self, messages: AgentInput = None, *, thread: AgentThread | None = None, **_: Any
    ) -> AgentResponse:
        self.started.set()
        try:
            await asyncio.sleep(120)
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        return AgentResponse([Message("assistant", "too late")])


def _post(path: str, body: bytes, headers: Mapping[str, str] | None = None) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", f"Content-Length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join([*lines, "Content-Type: application/json", "", ""])).encode() + body


@pytest.mark.parametrize("stream", [False, True])
async def test_a_client_that_disconnects_cancels_its_run(stream: bool) -> None:
    waiter = Waiter()
    async with MemoryStore() as store, serving(waiter, store=store) as url:
        port = int(url.rsplit(":", 1)[1])
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        body = (
            b'{"model": "waiter", "messages": [{"role": "user", "content": "hi"}], "stream": '
            + (b"true}" if stream else b"false}")
        )
        writer.write(_post("/v1/chat/completions", body))
        await writer.drain()
        async with asyncio.timeout(WAIT):
            await waiter.started.wait()
        writer.close()  # the client goes away mid-run
        await writer.wait_closed()
        async with asyncio.timeout(WAIT):
            await waiter.cancelled.wait()
        del reader


async def test_a_request_past_the_time_limit_is_cancelled_with_a_504() -> None:
    waiter = Waiter()
    limits = Limits(request_timeout=0.2)
    async with (
        MemoryStore() as store,
        serving(waiter, store=store, limits=limits) as url,
        httpx.AsyncClient(timeout=WAIT) as http,
    ):
        reply = await http.post(
            f"{url}/v1/chat/completions",
            json={"model": "waiter", "messages": [{"role": "user", "content": "hi"}]},
        )
    assert reply.status_code == 504
    assert "longer than the server's limit of 0.2 s" in reply.json()["error"]["message"]
    assert waiter.cancelled.is_set()


async def test_a_body_past_the_size_limit_is_a_413() -> None:
    limits = Limits(max_body_bytes=1000)
    body = {"model": "echo", "messages": [{"role": "user", "content": "x" * 2000}]}
    async with (
        MemoryStore() as store,
        serving(echo_agent(), store=store, limits=limits) as url,
        httpx.AsyncClient(timeout=WAIT) as http,
    ):
        declared = await http.post(f"{url}/v1/chat/completions", json=body)
        assert declared.status_code == 413
        assert "limit of 1000 bytes" in declared.json()["error"]["message"]

        async def chunks() -> Any:  # no Content-Length: the limit counts what arrives
            for _ in range(5):
                yield b" " * 400

        streamed = await http.post(
            f"{url}/v1/chat/completions",
            content=chunks(),
            headers={"Content-Type": "application/json"},
        )
        assert streamed.status_code == 413
        small = await http.post(
            f"{url}/v1/chat/completions",
            json={"model": "echo", "messages": [{"role": "user", "content": "x"}]},
        )
        assert small.status_code == 200


async def test_with_a_token_every_request_needs_it() -> None:
    async with MemoryStore() as store, serving(echo_agent(), store=store, token="s3cret") as url:
        base = f"{url}/v1"
        async with AsyncOpenAI(base_url=base, api_key="wrong", max_retries=0) as client:
            with pytest.raises(openai.AuthenticationError, match="needs a token"):
                await client.models.list()
        async with AsyncOpenAI(base_url=base, api_key="s3cret", max_retries=0) as client:
            assert [m.id for m in (await client.models.list()).data] == ["echo"]
        async with httpx.AsyncClient(timeout=WAIT) as http:
            bare = await http.get(f"{base}/models")
            assert bare.status_code == 401
            assert bare.headers["www-authenticate"] == "Bearer"
            assert bare.json()["error"]["type"] == "authentication_error"
            header = await http.get(f"{base}/models", headers={"X-API-Key": "s3cret"})
            assert header.status_code == 200
            cookie = await http.get(f"{base}/models", headers={"Cookie": "cantata_token=s3cret"})
            assert cookie.status_code == 200
            bad_cookie = await http.get(f"{base}/models", headers={"Cookie": "cantata_token=no"})
            assert bad_cookie.status_code == 401


async def test_with_a_token_the_page_loads_but_its_api_needs_the_token() -> None:
    async with (
        MemoryStore() as store,
        serving(echo_agent(), store=store, token="s3cret") as url,
        httpx.AsyncClient(timeout=WAIT) as http,
    ):
        page = await http.get(f"{url}/")
        assert page.status_code == 200
        assert "<html" in page.text.lower()
        asset = await http.get(f"{url}/devui/static/app.js")
        assert asset.status_code == 200
        assert (await http.get(f"{url}/devui/api/entries")).status_code == 401
        json_type = {"Content-Type": "application/json"}
        assert (await http.post(f"{url}/", content=b"x", headers=json_type)).status_code == 401
        assert (await http.get(f"{url}/devui/static/../api/served")).status_code != 200
        assert (await http.get(f"{url}/v1/models")).status_code == 401
        with_cookie = await http.get(
            f"{url}/devui/api/entries", headers={"Cookie": "cantata_token=s3cret"}
        )
        assert with_cookie.status_code == 200


async def test_unknown_routes_and_methods_answer_in_openai_shape(echo_url: str) -> None:
    async with httpx.AsyncClient(timeout=WAIT) as http:
        missing = await http.get(f"{echo_url}/v2/nothing")
        assert missing.status_code == 404
        assert "no route GET /v2/nothing" in missing.json()["error"]["message"]
        wrong = await http.get(f"{echo_url}/v1/chat/completions")
        assert wrong.status_code == 405


def test_loopback_serves_without_a_token_other_addresses_refuse() -> None:
    for host in ("127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"):
        assert is_loopback(host)
        check_bind(host, None)
    for host in ("0.0.0.0", "192.168.1.4", "::", "example.org"):
        assert not is_loopback(host)
        with pytest.raises(ConfigurationError, match="CANTATA_SERVE_TOKEN"):
            check_bind(host, None)
        check_bind(host, "tok")
    with pytest.raises(ConfigurationError, match="empty"):
        check_bind("127.0.0.1", "")


def test_limits_refuse_nonsense() -> None:
    for bad in ({"max_body_bytes": 0}, {"max_body_bytes": 1.5}, {"request_timeout": 0}):
        with pytest.raises(ConfigurationError):
            Limits(**bad)
    with pytest.raises(ConfigurationError, match="finite"):
        Limits(request_timeout=float("inf"))


def test_the_served_set_names_entries_and_refuses_what_it_cannot_serve() -> None:
    a, b = echo_agent("a"), echo_agent("b")
    assert list(ServedSet([a, b])) == ["a", "b"]
    assert list(ServedSet({"x": a})) == ["x"]
    assert ServedSet(a)["a"].kind == "agent"
    with pytest.raises(ConfigurationError, match="two served objects are named 'a'"):
        ServedSet([a, echo_agent("a")])
    with pytest.raises(ConfigurationError, match="cannot serve 42"):
        ServedSet([42])
    with pytest.raises(ConfigurationError, match="nothing to serve"):
        ServedSet([])
    with pytest.raises(ConfigurationError, match="not valid"):
        ServedSet({"bad name": a})
    with pytest.raises(ConfigurationError, match="cannot serve"):
        build_app("echo")


def test_load_target_reads_modules_and_files() -> None:
    agent = load_target(str(ROOT / "tests/serve/_servers.py") + ":echo")
    assert isinstance(agent, Agent) and agent.name == "echo"
    assert load_target("cantata.serve:Limits") is Limits
    cases: Iterable[tuple[str, str]] = [
        ("nocolon", "module:object"),
        ("no_such_module_xyz:thing", "cannot import module"),
        ("cantata.serve:Nope", "has no attribute"),
        ("missing/file.py:agent", "no file"),
    ]
    for spec, words in cases:
        with pytest.raises(ConfigurationError, match=words):
            load_target(spec)


def test_the_command_refuses_a_public_address_without_a_token() -> None:
    done = subprocess.run(
        [*_CLI, "serve", "tests/serve/_servers.py:echo", "--host", "0.0.0.0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "", "HOME": str(ROOT)},
    )
    assert done.returncode == 1
    assert "refusing to serve on '0.0.0.0' without a token" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_command_serves_a_file_and_asks_for_its_token() -> None:
    env = {"CANTATA_SERVE_TOKEN": "tok"}
    with cli_server("examples/serve_agent.py:agent", "--store", "memory://", env=env) as (
        url,
        _proc,
    ):
        assert httpx.get(f"{url}/v1/models", timeout=WAIT).status_code == 401
        models = httpx.get(
            f"{url}/v1/models", headers={"Authorization": "Bearer tok"}, timeout=WAIT
        )
        assert [m["id"] for m in models.json()["data"]] == ["assistant"]


def test_the_public_names_resolve_and_are_documented() -> None:
    import inspect

    import cantata.serve as serve

    assert len(serve.__all__) == len(set(serve.__all__))
    for name in serve.__all__:
        value = getattr(serve, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert inspect.getdoc(value), name
    kept = {"build_app", "serve", "ServedSet", "Contribution", "ServeContext", "Limits"}
    assert kept <= set(serve.__all__)


class SlowStreamer(Agent):
    """Streams one piece, then waits until it is cancelled."""

    def __init__(self) -> None:
        super().__init__(name="slow")
        self.cancelled = asyncio.Event()

    async def run(self, messages: AgentInput = None, **_: Any) -> AgentResponse:
        raise NotImplementedError

    def run_stream(self, messages: AgentInput = None, **_: Any) -> AgentResponseStream:
        async def updates() -> AsyncIterator[AgentResponseUpdate]:
            yield AgentResponseUpdate([TextContent("first words")], message_id="m1")
            try:
                await asyncio.sleep(120)
            except asyncio.CancelledError:
                self.cancelled.set()
                raise
            yield AgentResponseUpdate([TextContent("never")], message_id="m1")

        return AgentResponseStream(updates(), lambda: AgentResponse([]))


async def test_a_stream_past_the_time_limit_ends_with_an_error_event() -> None:
    slow = SlowStreamer()
    limits = Limits(request_timeout=0.5)
    async with (
        MemoryStore() as store,
        serving(slow, store=store, limits=limits) as url,
        AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0) as client,
    ):
        stream = await client.chat.completions.create(
            model="slow", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        seen: list[str] = []
        with pytest.raises(openai.APIError, match=r"longer than the server's limit of 0\.5 s"):
            async for chunk in stream:
                seen.append(chunk.choices[0].delta.content or "")
        assert "".join(seen) == "first words"
        assert slow.cancelled.is_set()


async def test_providers_add_routes_and_lifespans_and_keep_the_guards() -> None:
    from contextlib import asynccontextmanager

    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    from cantata.serve import Contribution, ServeContext, default_providers

    events: list[str] = []

    @asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        events.append("start")
        yield
        events.append("stop")

    def contribute(ctx: ServeContext) -> Contribution:
        async def names(request: Request) -> Response:
            assert request.app.state.cantata is ctx
            return JSONResponse({"served": list(ctx.served), "kinds": ctx.served["echo"].kind})

        return Contribution(routes=[Route("/extra/names", names)], lifespan=lifespan)

    providers = [*default_providers(), contribute]
    async with (
        MemoryStore() as store,
        serving(echo_agent(), store=store, token="t", providers=providers) as url,
        httpx.AsyncClient(timeout=WAIT, headers={"Authorization": "Bearer t"}) as http,
    ):
        assert events == ["start"]
        reply = await http.get(f"{url}/extra/names")
        assert reply.json() == {"served": ["echo"], "kinds": "agent"}
        assert (await http.get(f"{url}/v1/models")).status_code == 200
        assert (
            await http.get(f"{url}/extra/names", headers={"Authorization": ""})
        ).status_code == 401
    assert events == ["start", "stop"]
    async with serving(echo_agent(), providers=[contribute]) as url, httpx.AsyncClient() as http:
        assert (await http.get(f"{url}/v1/models")).status_code == 404  # only what was given
