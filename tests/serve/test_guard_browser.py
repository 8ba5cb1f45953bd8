"""Web pages against a local `cantata serve`, in a real headless Chromium (Debian's package,
driven by Playwright): a page on another origin (another loopback address and port, or
another port of the same host) cannot start a run, read an answer or read the token cookie,
and a page reached by another name (DNS rebinding, simulated by Chromium's resolver rules)
is refused. Each refusal has a control beside it that the same browser gets through when
the server allows it, so the test cannot pass because the page never reached the server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.responses import HTMLResponse
from starlette.routing import Route

from cantata.agents import ChatAgent
from cantata.core import Message
from cantata.models import ChatOptions, ScriptedChatClient
from cantata.serve import TOKEN_COOKIE, build_app
from cantata.stores import MemoryStore

from ._servers import running
from .test_devui_api import build_review
from .test_devui_browser import ARGS, WAIT_MS, _need_browser

TIMEOUT = httpx.Timeout(30.0)
REBIND = "rebind.test"

ATTACK = """
async (target) => {
  const out = {};
  const chat = JSON.stringify({model: "echo", messages: [{role: "user", content: "pwn"}]});
  const run = JSON.stringify({input: "pwn"});
  async function attempt(name, url, init) {
    try {
      const res = await fetch(target + url, init);
      out[name] = res.type === "opaque" ? "opaque" : res.status + " " + (await res.text());
    } catch (err) { out[name] = "blocked: " + err.name; }
  }
  // simple requests: the browser sends them without asking (and hides the answer)
  await attempt("plain_chat", "/v1/chat/completions",
    {method: "POST", mode: "no-cors", body: chat, credentials: "include"});
  await attempt("plain_run", "/devui/api/runs/review",
    {method: "POST", mode: "no-cors", body: run, credentials: "include",
     headers: {"Content-Type": "text/plain"}});
  await attempt("form_chat", "/devui/api/chat/echo",
    {method: "POST", mode: "no-cors", body: new URLSearchParams({message: "pwn"}),
     credentials: "include"});
  out.beacon = navigator.sendBeacon(target + "/devui/api/runs/review", run);
  // what needs a preflight, which the server does not answer
  await attempt("json_chat", "/v1/chat/completions",
    {method: "POST", headers: {"Content-Type": "application/json"}, body: chat});
  await attempt("json_run", "/devui/api/runs/review",
    {method: "POST", headers: {"Content-Type": "application/json"}, body: run,
     credentials: "include"});
  // reading an answer
  await attempt("read_models", "/v1/models", {});
  await attempt("read_runs", "/devui/api/runs", {credentials: "include"});
  // and a classic form, posted into a frame
  const frame = document.createElement("iframe");
  frame.name = "sink";
  document.body.append(frame);
  const form = document.createElement("form");
  form.method = "POST"; form.enctype = "text/plain"; form.target = "sink";
  form.action = target + "/devui/api/runs/review";
  const field = document.createElement("input");
  field.name = '{"input": "pwn", "x": "'; field.value = '"}';
  form.append(field); document.body.append(form);
  const loaded = new Promise((ok) => frame.addEventListener("load", ok, {once: true}));
  form.submit();
  await Promise.race([loaded, new Promise((ok) => setTimeout(ok, 5000))]);
  out.cookie = document.cookie;
  return out;
}
"""


class _Counting:
    """A scripted model that counts its calls: a run anyone started shows here."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, messages: list[Message], options: ChatOptions) -> str:
        self.calls += 1
        return "answer"


def _page_app() -> Starlette:
    """The other origin's server: one blank page (the attack runs in it)."""

    async def page(request: Any) -> HTMLResponse:
        return HTMLResponse("<!doctype html><title>elsewhere</title><body></body>")

    return Starlette(routes=[Route("/", page)])


@asynccontextmanager
async def _browser(*extra: str) -> AsyncIterator[Any]:
    async_playwright, exe = _need_browser()
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=exe, args=[*ARGS, *extra])
        try:
            context = await browser.new_context()
            context.set_default_timeout(WAIT_MS)
            yield context
        finally:
            await browser.close()


async def _runs(url: str, token: str | None = None) -> list[Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        res = await http.get(f"{url}/devui/api/runs", headers=headers)
        assert res.status_code == 200, res.text
        runs: list[Any] = res.json()["runs"]
        return runs


def _served(model: _Counting) -> dict[str, Any]:
    return {"echo": ChatAgent(ScriptedChatClient(model), name="echo"), "review": build_review()}


async def test_a_page_on_another_origin_cannot_start_a_run_or_read_an_answer() -> None:
    model = _Counting()
    async with (
        MemoryStore() as store,
        running(build_app(_served(model), store=store)) as target,
        running(_page_app(), host="127.0.0.2") as elsewhere,
        _browser() as context,
    ):
        page = await context.new_page()
        await page.goto(elsewhere + "/")
        out = await page.evaluate(ATTACK, target)
        assert out["plain_chat"] == out["plain_run"] == out["form_chat"] == "opaque", out
        for name in ("json_chat", "json_run", "read_models", "read_runs"):
            assert out[name].startswith("blocked"), (name, out)
        assert out["cookie"] == ""
        assert model.calls == 0
        assert await _runs(target) == []

    # control: from an origin the server names, the same page reaches it and reads it, but
    # never with the browser's credentials (the cookie): that request is still blocked
    model = _Counting()
    async with (
        running(_page_app(), host="127.0.0.2") as elsewhere,
        MemoryStore() as store,
        running(build_app(_served(model), store=store, cors_origins=[elsewhere])) as target,
        _browser() as context,
    ):
        page = await context.new_page()
        await page.goto(elsewhere + "/")
        out = await page.evaluate(ATTACK, target)
        assert out["json_chat"].startswith("200 ") and "answer" in out["json_chat"], out
        assert out["read_models"].startswith("200 "), out
        assert out["json_run"].startswith("blocked"), out  # credentials: "include"
        assert model.calls == 1 and await _runs(target) == []


async def test_the_cookie_is_set_by_the_server_and_no_script_reads_it() -> None:
    token = "s3cret +/= token"
    model = _Counting()
    async with (
        MemoryStore() as store,
        running(build_app(_served(model), store=store, token=token)) as target,
        running(_page_app()) as same_host,  # 127.0.0.1, another port: cookies are shared
        _browser() as context,
    ):
        ui = await context.new_page()
        await ui.goto(target + "/")
        await ui.locator("#token-form").wait_for()
        await ui.fill("#token", token)
        await ui.click("#token-form button[type=submit]")
        await ui.wait_for_selector("#entries button[data-name=review]")
        (cookie,) = [c for c in await context.cookies() if c["name"] == TOKEN_COOKIE]
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
        assert cookie["path"] == "/devui/api" and not cookie["secure"]
        assert await ui.evaluate("document.cookie") == ""  # not even the page itself
        # the logged-in page works: a run, followed over the event stream
        await ui.click("#entries button[data-name=review]")
        await ui.fill("#run-input", "note")
        await ui.click("#run-form button[type=submit]")
        await ui.locator("#run-status", has_text="idle_with_pending_requests").wait_for()
        assert len(await _runs(target, token)) == 1

        page = await context.new_page()
        await page.goto(same_host + "/")
        out = await page.evaluate(ATTACK, target)
        assert TOKEN_COOKIE not in out["cookie"] and out["cookie"] == ""
        for name in ("json_chat", "json_run", "read_models", "read_runs"):
            assert out[name].startswith("blocked"), (name, out)
        assert model.calls == 0
        assert len(await _runs(target, token)) == 1  # only the page's own run


async def test_a_page_reached_by_another_name_is_refused() -> None:
    """DNS rebinding: a name the attacker controls, resolving to 127.0.0.1, makes their page
    same-origin with the server; the server does not answer to that name."""
    model = _Counting()
    async with MemoryStore() as store, running(build_app(_served(model), store=store)) as target:
        port = target.rsplit(":", 1)[1]
        async with _browser(f"--host-resolver-rules=MAP {REBIND} 127.0.0.1") as context:
            page = await context.new_page()
            res = await page.goto(f"http://{REBIND}:{port}/")
            assert res is not None and res.status == 403
            assert "--allowed-host" in await page.content()
            out = await page.evaluate(ATTACK, f"http://{REBIND}:{port}")
            assert out["read_models"].startswith("403 "), out
            assert out["json_run"].startswith("403 "), out
        assert model.calls == 0 and await _runs(target) == []
    # control: the same name, once allowed, reaches the page (so the resolver rule works)
    async with (
        MemoryStore() as store,
        running(build_app(_served(model), store=store, allowed_hosts=[REBIND])) as target,
    ):
        port = target.rsplit(":", 1)[1]
        async with _browser(f"--host-resolver-rules=MAP {REBIND} 127.0.0.1") as context:
            page = await context.new_page()
            res = await page.goto(f"http://{REBIND}:{port}/")
            assert res is not None and res.status == 200
            await page.wait_for_selector("#entries button[data-name=echo]")
