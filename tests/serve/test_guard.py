"""The guard against web pages (`cantata.serve.guard`) on a real uvicorn, one rule a test:
the ``Host`` check, the JSON content type, CORS only for the origins given, the default
security headers, the token cookie the server sets itself, JSON too deep for any route,
no idle ``GET /mcp`` stream, and the A2A card's URL from configuration."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from cantata.core import ConfigurationError
from cantata.serve import TOKEN_COOKIE, build_app
from cantata.serve.devui import COOKIE_PATH, PAGE_CSP
from cantata.serve.guard import (
    DEFAULT_CSP,
    GuardMiddleware,
    check_allowed_host,
    check_cors_origin,
    check_public_url,
)
from cantata.stores import MemoryStore

from ._servers import echo_agent, running, serving
from .test_devui_api import build_review, run_to_stop

TIMEOUT = httpx.Timeout(30.0)
JSON = {"Content-Type": "application/json"}
CHAT = {"model": "echo", "messages": [{"role": "user", "content": "hi"}]}


def _served() -> dict[str, Any]:
    return {"echo": echo_agent(), "review": build_review()}


@pytest.fixture
async def url() -> AsyncIterator[str]:
    async with MemoryStore() as store, serving(_served(), store=store) as base:
        yield base


@pytest.fixture
async def client(url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=url, timeout=TIMEOUT) as http:
        yield http


# -- Host ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "host", ["127.0.0.1", "127.0.0.1:1", "localhost", "LOCALHOST:80", "localhost.", "[::1]:9"]
)
async def test_loopback_names_are_this_servers(client: httpx.AsyncClient, host: str) -> None:
    assert (await client.get("/v1/models", headers={"Host": host})).status_code == 200


@pytest.mark.parametrize(
    "host",
    ["evil.example", "evil.example:8000", "localhost.evil.example", "127.0.0.1.nip.io", "a b", ""],
)
async def test_another_host_is_refused(client: httpx.AsyncClient, host: str) -> None:
    for method, path, body in [
        ("GET", "/v1/models", None),
        ("GET", "/", None),
        ("GET", "/devui/api/entries", None),
        ("POST", "/v1/chat/completions", CHAT),
        ("POST", "/a2a/echo", {"jsonrpc": "2.0", "id": 1, "method": "GetTask"}),
        ("GET", "/a2a/echo/.well-known/agent-card.json", None),
    ]:
        res = await client.request(method, path, json=body, headers={"Host": host})
        assert res.status_code == 403, (method, path, res.text)
        assert "--allowed-host" in res.text
    assert (await client.get("/devui/api/runs")).json() == {"runs": []}


async def test_allowed_hosts_and_the_public_urls_host_are_served() -> None:
    app = build_app(
        echo_agent(),
        allowed_hosts=["agents.example.com", "Box"],
        public_url="https://public.example.org/prefix",
    )
    async with running(app) as url, httpx.AsyncClient(base_url=url, timeout=TIMEOUT) as http:
        for host in ["agents.example.com", "AGENTS.example.com:443", "box", "public.example.org"]:
            assert (await http.get("/v1/models", headers={"Host": host})).status_code == 200
        res = await http.get("/v1/models", headers={"Host": "sub.agents.example.com"})
        assert res.status_code == 403


async def test_a_star_allows_any_host() -> None:
    async with (
        running(build_app(echo_agent(), allowed_hosts=["*"])) as url,
        httpx.AsyncClient(base_url=url, timeout=TIMEOUT) as http,
    ):
        assert (await http.get("/v1/models", headers={"Host": "any.example"})).status_code == 200


async def _asgi(app: Any, scope: dict[str, Any]) -> tuple[int, dict[bytes, bytes]]:
    """`app`'s status and headers for one request of `scope` (no body)."""
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    base = {"type": "http", "method": "GET", "path": "/", "headers": [], "scheme": "http"}
    await app({**base, **scope}, receive, send)
    return sent[0]["status"], dict(sent[0]["headers"])


async def _ok(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


@pytest.mark.parametrize(
    ("server", "host", "status"),
    [
        (("192.168.1.5", 8000), b"192.168.1.5:8000", 200),
        (("192.168.1.5", 8000), b"localhost:8000", 403),  # not on loopback: not its name
        (("192.168.1.5", 8000), b"127.0.0.1:8000", 403),
        (("::ffff:192.168.1.5", 8000), b"192.168.1.5", 200),
        (("::1", 8000), b"[::1]:8000", 200),
        (("::1", 8000), b"localhost", 200),
        (("127.0.0.1", 8000), None, 403),  # no Host at all
        (("127.0.0.1", 8000), b"\xff", 403),
        (("127.0.0.1", 8000), b"[::1", 403),
        (("127.0.0.1", 8000), b"localhost:http", 403),
        (("/run/cantata.sock", None), b"anything", 200),  # a Unix socket
    ],
)
async def test_the_host_is_checked_against_the_address_the_request_came_in_on(
    server: tuple[str, int | None], host: bytes | None, status: int
) -> None:
    headers = [] if host is None else [(b"host", host)]
    got, _ = await _asgi(GuardMiddleware(_ok), {"server": server, "headers": headers})
    assert got == status


def test_allowed_hosts_are_checked_when_configured() -> None:
    assert check_allowed_host(" Agents.Example.COM ") == "agents.example.com"
    assert check_allowed_host("[::1]") == "::1"
    assert check_allowed_host("10.0.0.7") == "10.0.0.7"
    assert check_allowed_host("*") == "*"
    for bad in ["", "http://agents.example.com", "agents.example.com:8000", "a/b", "a b", "-x"]:
        with pytest.raises(ConfigurationError, match="allowed-host"):
            check_allowed_host(bad)
    with pytest.raises(ConfigurationError, match="allowed-host"):
        build_app(echo_agent(), allowed_hosts=["https://x.example"])


# -- content type ----------------------------------------------------------------------


_WRITES = [
    "/v1/chat/completions",
    "/v1/responses",
    "/a2a/echo",
    "/mcp",
    "/devui/api/chat/echo",
    "/devui/api/runs/review",
    "/devui/api/login",
]


@pytest.mark.parametrize(
    "content_type",
    [None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; b=x", "+json"],
)
async def test_a_post_that_is_not_json_is_a_415(
    client: httpx.AsyncClient, content_type: str | None
) -> None:
    headers = {} if content_type is None else {"Content-Type": content_type}
    body = json.dumps({**CHAT, "input": "x", "message": "x"}).encode()
    for path in _WRITES:
        res = await client.post(path, content=body, headers=headers)
        assert res.status_code == 415, (path, res.text)
        assert "application/json" in res.text
        if path in ("/a2a/echo", "/mcp"):  # the protocol's own error shape
            assert res.json()["error"]["data"]["httpStatus"] == 415
        else:
            assert res.json()["error"]["code"] == "unsupported_media_type"
    assert (await client.get("/devui/api/runs")).json() == {"runs": []}


async def test_json_content_types_pass(client: httpx.AsyncClient) -> None:
    body = json.dumps(CHAT).encode()
    for content_type in ["application/json", "Application/JSON; charset=utf-8"]:
        res = await client.post(
            "/v1/chat/completions", content=body, headers={"Content-Type": content_type}
        )
        assert res.status_code == 200, res.text
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "nope"}}
    res = await client.post(
        "/a2a/echo", content=json.dumps(rpc), headers={"Content-Type": "application/a2a+json"}
    )
    assert res.status_code != 415, res.text


async def test_a_body_on_another_method_must_be_json_too(client: httpx.AsyncClient) -> None:
    res = await client.request(
        "DELETE", "/v1/responses/resp_x", content=b"x", headers={"Content-Type": "text/plain"}
    )
    assert res.status_code == 415
    assert (await client.delete("/v1/responses/resp_x")).status_code == 404  # no body: checked on


# -- CORS ------------------------------------------------------------------------------


def _preflight(origin: str) -> dict[str, str]:
    return {
        "Origin": origin,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type,authorization",
    }


async def test_no_cors_by_default(client: httpx.AsyncClient) -> None:
    pre = await client.options("/v1/chat/completions", headers=_preflight("http://127.0.0.2:9"))
    assert "access-control-allow-origin" not in pre.headers
    res = await client.get("/v1/models", headers={"Origin": "http://127.0.0.2:9"})
    assert res.status_code == 200 and "access-control-allow-origin" not in res.headers


async def test_cors_for_the_origins_given_without_credentials() -> None:
    app = build_app(echo_agent(), token="t0k", cors_origins=["https://app.example"])
    async with running(app) as url, httpx.AsyncClient(base_url=url, timeout=TIMEOUT) as http:
        pre = await http.options("/v1/chat/completions", headers=_preflight("https://app.example"))
        assert pre.status_code == 200
        assert pre.headers["access-control-allow-origin"] == "https://app.example"
        assert "access-control-allow-credentials" not in pre.headers
        auth = {"Origin": "https://app.example", "Authorization": "Bearer t0k"}
        res = await http.post("/v1/chat/completions", json=CHAT, headers=auth)
        assert res.status_code == 200
        assert res.headers["access-control-allow-origin"] == "https://app.example"
        other = await http.options("/v1/chat/completions", headers=_preflight("https://x.example"))
        assert "access-control-allow-origin" not in other.headers


def test_cors_origins_are_checked() -> None:
    assert check_cors_origin("https://app.example/", token=None) == "https://app.example"
    assert check_cors_origin("*", token="t") == "*"
    with pytest.raises(ConfigurationError, match="token"):
        check_cors_origin("*", token=None)
    for bad in ["app.example", "https://app.example/path", "ftp://x", "https://u@x", ""]:
        with pytest.raises(ConfigurationError):
            check_cors_origin(bad, token="t")
    with pytest.raises(ConfigurationError, match="token"):
        build_app(echo_agent(), cors_origins=["*"])


# -- headers ---------------------------------------------------------------------------


async def test_the_page_has_its_policy_and_nothing_may_frame_anything(
    client: httpx.AsyncClient,
) -> None:
    page = await client.get("/")
    assert page.headers["content-security-policy"] == PAGE_CSP
    assert "frame-ancestors 'none'" in PAGE_CSP and "script-src 'self'" in PAGE_CSP
    for path in ["/v1/models", "/devui/api/entries", "/devui/static/app.js", "/metrics", "/nope"]:
        res = await client.get(path)
        assert res.headers["content-security-policy"] == DEFAULT_CSP.decode(), path
        assert res.headers["x-content-type-options"] == "nosniff"


# -- the token cookie ------------------------------------------------------------------


@pytest.mark.parametrize("token", ["plain-token", "a+b/c==", "with space", 'ünï;cødé,"q"'])
async def test_login_sets_an_http_only_cookie_that_works_for_any_token(token: str) -> None:
    async with (
        running(build_app(_served(), token=token)) as url,
        httpx.AsyncClient(base_url=url, timeout=TIMEOUT) as http,
    ):
        assert (await http.get("/devui/api/entries")).status_code == 401
        bearer = b"Bearer " + token.encode()
        wrong = await http.post("/devui/api/login", json={}, headers={"Authorization": "Bearer no"})
        assert wrong.status_code == 401 and "set-cookie" not in wrong.headers
        res = await http.post("/devui/api/login", json={}, headers={"Authorization": bearer})
        assert res.status_code == 204, res.text
        cookie = res.headers["set-cookie"]
        parts = [p.strip().lower() for p in cookie.split(";")]
        assert "httponly" in parts and "samesite=strict" in parts
        assert f"path={COOKIE_PATH}" in parts and "secure" not in parts
        name, _, value = cookie.split(";")[0].partition("=")
        assert name == TOKEN_COOKIE
        # the client holds it now (httpx keeps cookies as a browser does, by path)
        assert (await http.get("/devui/api/entries")).status_code == 200
        assert (await http.get("/v1/models")).status_code == 401  # the path it is scoped to
        # malformed cookies before it and beside it are skipped, not fatal
        messy = f'bad"cookie; =; junk; x=1=2; {TOKEN_COOKIE}={value}; {TOKEN_COOKIE}'
        http.cookies.clear()
        res = await http.get("/devui/api/entries", headers={"Cookie": messy})
        assert res.status_code == 200
        res = await http.get("/devui/api/entries", headers={"Cookie": f'{TOKEN_COOKIE}="{value}"'})
        assert res.status_code == 200
        out = await http.post(
            "/devui/api/logout", json={}, headers={"Cookie": f"{TOKEN_COOKIE}={value}"}
        )
        assert out.status_code == 204 and "max-age=0" in out.headers["set-cookie"].lower()


async def test_the_cookie_is_secure_over_https() -> None:
    async with (
        running(build_app(echo_agent(), token="t0k")) as url,
        httpx.AsyncClient(base_url=url, timeout=TIMEOUT) as http,
    ):
        # uvicorn takes the scheme from a proxy on 127.0.0.1 (its default forwarded_allow_ips)
        headers = {"Authorization": "Bearer t0k", "X-Forwarded-Proto": "https"}
        res = await http.post("/devui/api/login", json={}, headers=headers)
        assert res.status_code == 204
        assert "secure" in [p.strip().lower() for p in res.headers["set-cookie"].split(";")]


async def test_login_without_a_bearer_token_is_a_400(client: httpx.AsyncClient) -> None:
    res = await client.post("/devui/api/login", json={})
    assert res.status_code == 400 and "Bearer" in res.text
    assert "set-cookie" not in res.headers


# -- deep JSON, idle streams, the card -------------------------------------------------


async def test_deep_json_is_a_400_on_every_route(client: httpx.AsyncClient) -> None:
    run = (await client.post("/devui/api/runs/review", json={"input": "n"})).json()
    await run_to_stop(client, run["id"])
    deep = b"[" * 100_000 + b"]" * 100_000
    deep_object = b'{"a":' * 100_000 + b"1" + b"}" * 100_000
    for path in [
        "/v1/chat/completions",
        "/v1/responses",
        "/a2a/echo",
        "/mcp",
        "/devui/api/chat/echo",
        "/devui/api/runs/review",
        f"/devui/api/run/{run['id']}/answers",
        f"/devui/api/run/{run['id']}/resume",
    ]:
        for body in (deep, deep_object):
            res = await client.post(path, content=body, headers=JSON)
            if path in ("/a2a/echo", "/mcp"):  # JSON-RPC's parse error
                assert res.status_code in (200, 400), (path, res.text)
                assert res.json()["error"]["code"] == -32700, (path, res.text)
            else:
                assert res.status_code == 400, (path, res.text)
            assert "Traceback" not in res.text


async def test_get_mcp_is_a_405_so_no_stream_idles(client: httpx.AsyncClient) -> None:
    res = await client.get("/mcp", headers={"Accept": "text/event-stream"})
    assert res.status_code == 405


async def test_the_card_url_is_configured_not_taken_from_host() -> None:
    app = build_app(echo_agent(), public_url="https://agents.example.com/base/")
    async with running(app) as url, httpx.AsyncClient(base_url=url, timeout=TIMEOUT) as http:
        for path in ["/a2a/echo/.well-known/agent-card.json", "/.well-known/agent-card.json"]:
            card = (await http.get(path, headers={"Host": "agents.example.com"})).json()
            urls = {i["url"] for i in card["supportedInterfaces"]}
            assert urls == {"https://agents.example.com/base/a2a/echo"}
    async with (
        running(build_app(echo_agent())) as url,
        httpx.AsyncClient(base_url=url, timeout=TIMEOUT) as http,
    ):
        card = (
            await http.get("/a2a/echo/.well-known/agent-card.json", headers={"Host": "localhost"})
        ).json()
        assert {i["url"] for i in card["supportedInterfaces"]} == {f"{url}/a2a/echo"}


def test_public_urls_are_checked() -> None:
    assert check_public_url("https://a.example/x/") == "https://a.example/x"
    for bad in ["a.example", "ftp://a.example", "https://a.example/?q=1", "https://u:p@a.example"]:
        with pytest.raises(ConfigurationError, match="public-url"):
            check_public_url(bad)


# -- streams that follow a run ---------------------------------------------------------


def test_following_streams_are_told_apart() -> None:
    from ._servers import route_table

    table = route_table(echo_agent())

    def follows(method: str, path: str, body: bytes = b"") -> bool:
        return table.work({"type": "http", "method": method, "path": path}).of(body) == "follow"

    assert follows("GET", "/devui/api/run/abc/events")
    assert not follows("GET", "/devui/api/run/abc")
    subscribe = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask"}).encode()
    assert follows("POST", "/a2a/echo", subscribe)
    assert follows("POST", "/a2a/echo", subscribe.replace(b"SubscribeToTask", b"tasks/resubscribe"))
    assert not follows("POST", "/a2a/echo", b"[" * 10_000)
    assert not follows("POST", "/v1/chat/completions", subscribe)


async def test_streams_that_follow_a_run_are_counted_and_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import asyncio

    from cantata.serve import admission
    from cantata.workflows import WorkflowBuilder, WorkflowContext, executor

    monkeypatch.setattr(admission, "MAX_FOLLOWERS", 2)
    gate = asyncio.Event()

    @executor
    async def wait(text: str, ctx: WorkflowContext[None, str]) -> None:
        async with asyncio.timeout(30):
            await gate.wait()
        await ctx.yield_output(text)

    flow = WorkflowBuilder(wait, name="slow").build()
    async with (
        MemoryStore() as store,
        serving({"slow": flow}, store=store) as base,
        httpx.AsyncClient(base_url=base, timeout=TIMEOUT) as http,
    ):
        run = (await http.post("/devui/api/runs/slow", json={"input": "x"})).json()
        events = f"/devui/api/run/{run['id']}/events"
        async with http.stream("GET", events) as first, http.stream("GET", events) as second:
            assert first.status_code == second.status_code == 200
            third = await http.get(events)
            assert third.status_code == 429 and "Retry-After" in third.headers
            assert "streams following runs" in third.json()["error"]["message"]
            assert (await http.get("/devui/api/runs")).status_code == 200  # others go on
            gate.set()
            for stream in (first, second):  # both follow the run to its end
                assert "event: end" in (await stream.aread()).decode()
        for _ in range(200):  # a slot is free again once one has closed (10 s at most)
            again = await http.get(events)
            if again.status_code != 429:
                break
            await asyncio.sleep(0.05)
        assert again.status_code == 200 and "event: end" in again.text
