"""The dev UI in a real headless Chromium (Debian's package, driven by Playwright) against
a real uvicorn: the served list, a streamed chat, a workflow run with its graph, timeline,
a request for input answered from the page, a resume from a checkpoint, and a team run with
its routing decisions. Each view is kept as a screenshot under ``<tmp>/artifacts/devui``
(the path is printed); a view that is empty or a page that shows an error fails the test."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from cantata.serve import TOKEN_COOKIE, Limits
from cantata.stores import MemoryStore, SQLiteStore
from cantata.workflows import WorkflowBuilder, WorkflowContext, executor

from ..conftest import IN_CI
from ._servers import serving
from .test_devui_api import TIMEOUT, run_to_stop, served

CHROMIUM = os.environ.get("CANTATA_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = (
    Path(os.environ.get("CANTATA_TEST_ARTIFACTS", Path(tempfile.gettempdir()) / "artifacts"))
    / "devui"
)
WAIT_MS = 20_000
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _chromium() -> str | None:
    return CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")


def _need_browser() -> tuple[Any, str]:
    problem = None
    try:
        from playwright.async_api import async_playwright
    except ImportError:
        problem = "playwright is not installed (pip install playwright)"
    exe = _chromium()
    if problem is None and exe is None:
        problem = f"chromium is not installed at {CHROMIUM} (apt-get install chromium)"
    if problem is not None or exe is None:
        if IN_CI:
            pytest.fail(f"{problem}, and CI is set (see .ci/run)")
        pytest.skip(str(problem))
    return async_playwright, exe


@asynccontextmanager
async def open_page(
    *,
    token: str | None = None,
    entries: Any = None,
    limits: Limits | None = None,
    store_path: Path | None = None,
) -> AsyncIterator[Any]:
    """A page of a fresh headless Chromium on the dev UI (with the token's cookie when the
    server wants one); fails on any page error or console error."""
    async_playwright, exe = _need_browser()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    print(f"dev UI screenshots: {ARTIFACTS}")
    errors: list[str] = []
    async with (
        SQLiteStore(store_path) if store_path else MemoryStore() as store,
        serving(entries or served(), store=store, token=token, limits=limits) as url,
        async_playwright() as pw,
    ):
        browser = await pw.chromium.launch(executable_path=exe, args=ARGS)
        try:
            context = await browser.new_context(viewport={"width": 1280, "height": 900})
            if token is not None:
                await context.add_cookies([{"name": TOKEN_COOKIE, "value": token, "url": url}])
            tab = await context.new_page()
            tab.set_default_timeout(WAIT_MS)
            tab.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))
            tab.on(
                "console",
                lambda m: errors.append(f"console: {m.text}") if m.type == "error" else None,
            )
            await tab.goto(url + "/")
            await tab.wait_for_selector("#entries button")
            yield tab
            assert await tab.locator("#error").is_hidden(), await tab.inner_text("#error")
        finally:
            await browser.close()
    assert not errors, errors


@pytest.fixture
async def page() -> AsyncIterator[Any]:
    async with open_page() as tab:
        yield tab


async def shot(page: Any, name: str) -> None:
    """Keep a screenshot of the view, after checking the page shows no error."""
    path = ARTIFACTS / f"{name}.png"
    await page.screenshot(path=str(path), full_page=True)
    print(f"screenshot: {path}")
    assert await page.locator("#error").is_hidden(), await page.inner_text("#error")


async def test_served_list_and_streamed_chat(page: Any) -> None:
    buttons = page.locator("#entries button")
    names = await buttons.evaluate_all("bs => bs.map(b => b.dataset.name)")
    assert names == ["echo", "review", "pair"]
    assert "Counts the user's turns." in await buttons.first.inner_text()
    await page.click("#entries button[data-name=echo]")
    assert await page.locator("#chat-view").is_visible()
    await page.fill("#chat-input", "hello there")
    await page.click("#chat-form button[type=submit]")
    answer = page.locator("#chat-log .assistant").last
    await answer.filter(has_text="turn 1: hello there").wait_for()
    await page.fill("#chat-input", "and again")
    await page.click("#chat-form button[type=submit]")
    await page.locator("#chat-log .assistant", has_text="turn 2: and again").wait_for()
    assert await page.locator("#chat-log .msg").count() == 4
    await shot(page, "chat")


async def test_workflow_run_graph_timeline_answer_and_resume(page: Any) -> None:
    await page.click("#entries button[data-name=review]")
    assert await page.locator("#run-view").is_visible()
    nodes = page.locator("#graph svg g.node")
    assert sorted(await nodes.evaluate_all("ns => ns.map(n => n.dataset.id)")) == [
        "draft",
        "facts",
        "publish",
        "review",
        "tone",
    ]
    assert await page.locator("#graph svg path.edge").count() == 5
    labels = await page.locator("#graph svg text.elabel").all_text_contents()
    assert labels == ["fan-in", "fan-in"]
    assert "flowchart TD" in await page.locator("#graph pre").text_content()
    await page.fill("#run-input", "note")
    await page.click("#run-form button[type=submit]")
    await page.locator("#run-status", has_text="idle_with_pending_requests").wait_for()
    request = page.locator("#pending .req")
    await request.filter(has_text="publish facts(NOTE) + tone(NOTE)?").wait_for()
    assert await page.locator("#timeline li").count() >= 10
    assert await page.locator("#graph g.node.done").count() >= 4
    await page.locator("#checkpoints button").first.wait_for()
    await shot(page, "workflow-run")

    await request.locator("input").fill("yes")
    await request.locator("button").click()
    await page.locator("#run-status", has_text="idle").filter(has_not_text="pending").wait_for()
    output = page.locator("#timeline li", has=page.locator(".t", has_text="Output"))
    await output.filter(has_text="published facts(NOTE) + tone(NOTE) (yes)").wait_for()
    assert await page.locator("#pending .req").count() == 0
    await page.locator("#checkpoints li", has_text="1 pending").first.wait_for()
    await shot(page, "workflow-answered")

    waiting = page.locator("#checkpoints li", has_text="1 pending").first
    await waiting.locator("button").click()
    await page.locator("#timeline li .t", has_text=re.compile("^Resume$")).wait_for()
    await page.locator("#timeline li", has_text="resumed_from=").wait_for()
    await page.locator("#run-status", has_text="idle_with_pending_requests").wait_for()
    await page.locator("#pending .req").wait_for()
    await shot(page, "workflow-resumed")


async def test_a_past_run_opens_after_a_restart_and_resumes(tmp_path: Path) -> None:
    import httpx

    path = tmp_path / "serve.db"
    async with (
        SQLiteStore(path) as store,
        serving(served(), store=store) as url,
        httpx.AsyncClient(base_url=url, timeout=TIMEOUT) as client,
    ):
        run = (await client.post("/devui/api/runs/review", json={"input": "note"})).json()
        await run_to_stop(client, run["id"])
    async with open_page(store_path=path) as page:
        await page.click("#entries button[data-name=review]")
        await page.click("#past summary")
        await page.click(f"#past-runs button[data-run='{run['id']}']")
        await page.locator("#run-status", has_text="idle_with_pending_requests").wait_for()
        await page.locator("#run-meta", has_text="earlier server process").wait_for()
        await page.locator("#timeline li", has_text="RequestInfo").wait_for()
        assert await page.locator("#timeline li").count() >= 10
        assert await page.locator("#pending .req input").count() == 0  # resume to answer
        await shot(page, "past-run")
        waiting = page.locator("#checkpoints li", has_text="1 pending").first
        await waiting.locator("button").click()
        await page.locator("#timeline li", has_text="resumed_from=").wait_for()
        await page.locator("#run-status", has_text="idle_with_pending_requests").wait_for()
        request = page.locator("#pending .req")
        await request.locator("input").fill("yes")
        await request.locator("button").click()
        output = page.locator("#timeline li", has=page.locator(".t", has_text="Output"))
        await output.filter(has_text="published facts(NOTE) + tone(NOTE) (yes)").wait_for()
        assert await page.locator("#past-runs button").count() == 2
        await shot(page, "past-run-resumed")


async def test_team_run_shows_routing_decisions(page: Any) -> None:
    await page.click("#entries button[data-name=pair]")
    assert await page.locator("#graph svg g.node").count() == 3
    await page.fill("#run-input", "write a line")
    await page.click("#run-form button[type=submit]")
    await page.locator("#run-status", has_text="idle").wait_for()
    rows = page.locator("#routing tbody tr")
    assert await rows.count() == 3
    choices = await rows.evaluate_all("rs => rs.map(r => r.cells[1].textContent)")
    assert choices == ["alice", "bob", "alice"]
    assert await page.locator("#timeline li", has_text="TeamMessage").count() >= 3
    await shot(page, "team-run")


async def test_token_cookie_reaches_the_api_and_the_event_stream() -> None:
    async with open_page(token="s3cret-token") as page:
        await page.click("#entries button[data-name=review]")
        await page.fill("#run-input", "note")
        await page.click("#run-form button[type=submit]")
        await page.locator("#run-status", has_text="idle_with_pending_requests").wait_for()
        assert await page.locator("#timeline li").count() >= 10
        await shot(page, "token-run")


async def test_a_run_longer_than_the_request_time_limit_is_followed_to_its_end() -> None:
    """The server cuts an event stream at its request time limit; the page reconnects from
    the last event it saw and shows the rest of the run."""
    gate = asyncio.Event()

    @executor
    async def wait(text: str, ctx: WorkflowContext[None, str]) -> None:
        async with asyncio.timeout(60):
            await gate.wait()
        await ctx.yield_output(f"done {text}")

    slow = WorkflowBuilder(wait, name="slow").build()
    async with open_page(entries={"slow": slow}, limits=Limits(request_timeout=1.0)) as page:
        await page.fill("#run-input", "late")
        await page.click("#run-form button[type=submit]")
        await page.locator("#timeline li", has_text="ExecutorInvoked").wait_for()
        await asyncio.sleep(2.5)  # past the limit: the first stream was cut
        gate.set()
        output = page.locator("#timeline li", has=page.locator(".t", has_text="Output"))
        await output.filter(has_text="done late").wait_for()
        await page.locator("#run-status", has_text="idle").wait_for()
        assert await page.locator("#timeline li", has_text="WorkflowStarted").count() == 1
        await shot(page, "long-run")
