"""The documentation site: built as `make docs` builds it (`mkdocs build --strict`, so a
broken link, a missing page or a docstring whose reference does not resolve fails it),
then read in a real headless Chromium (Debian's package, driven by Playwright, as the dev
UI's tests do) from a local HTTP server: every page renders with no console or page error,
the search finds a page offline, and code blocks have a copy button. Screenshots of the
front page and of a concept page are kept under ``<tmp>/artifacts/docs`` (the path is
printed; ``CANTATA_TEST_ARTIFACTS`` moves it)."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from .conftest import require_module
from .serve.test_devui_browser import ARGS, _need_browser

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = (
    Path(os.environ.get("CANTATA_TEST_ARTIFACTS", Path(tempfile.gettempdir()) / "artifacts"))
    / "docs"
)
WAIT_MS = 20_000
# Both tests on one pytest-xdist worker (`--dist loadgroup`), so the site is built once.
pytestmark = pytest.mark.xdist_group("docs_site")


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """The site built by `make docs`'s command, served on 127.0.0.1 (a free port) until
    the module's tests end."""
    require_module("mkdocs", "pip install -e '.[docs]'")
    require_module("material", "pip install -e '.[docs]'")
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    handler = functools.partial(_Quiet, directory=str(out))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield out, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _pages(out: Path) -> list[str]:
    """Every page of the built site, as a path under its root ("" for the front page)."""
    pages = []
    for index in sorted(out.rglob("index.html")):
        relative = index.parent.relative_to(out).as_posix()
        if relative.startswith(("assets", "search")):
            continue
        pages.append("" if relative == "." else f"{relative}/")
    return pages


def test_the_build_is_offline_and_complete(site: tuple[Path, str]) -> None:
    out, _ = site
    pages = _pages(out)
    for wanted in ("", "getting-started/", "concepts/agents/", "reference/agents/", "benchmarks/"):
        assert wanted in pages, pages
    # the API reference shows the docstrings: a class of the package and its docstring
    agents = (out / "reference" / "agents" / "index.html").read_text(encoding="utf-8")
    assert 'id="cantata.agents.ChatAgent"' in agents
    for page in pages:
        html = (out / page / "index.html").read_text(encoding="utf-8")
        # nothing is fetched from the network: no fonts, no scripts, no styles from elsewhere
        assert "fonts.googleapis.com" not in html, page
        assert 'src="http' not in html and '<link href="http' not in html, page


async def test_every_page_renders_searches_and_copies(site: tuple[Path, str]) -> None:
    async_playwright, exe = _need_browser()
    out, url = site
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    print(f"docs screenshots: {ARTIFACTS}")
    errors: list[str] = []
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=exe, args=ARGS)
        try:
            context = await browser.new_context(viewport={"width": 1280, "height": 900})

            async def refuse(route: Any) -> None:
                errors.append(f"fetched from elsewhere: {route.request.url}")
                await route.abort()

            # offline: any request that leaves the local server fails the test
            await context.route(lambda u: not u.startswith(url), refuse)
            tab = await context.new_page()
            tab.set_default_timeout(WAIT_MS)
            tab.on("pageerror", lambda exc: errors.append(f"{tab.url}: page error: {exc}"))
            tab.on(
                "console",
                lambda m: (
                    errors.append(f"{tab.url}: console: {m.text}") if m.type == "error" else None
                ),
            )
            for page in _pages(out):
                await tab.goto(f"{url}/{page}", wait_until="load")
                assert await tab.locator("article h1").count() >= 1, page
            # code blocks have Material's copy button
            await tab.goto(f"{url}/concepts/agents/")
            await tab.locator("pre code").first.wait_for()
            copy = tab.locator("pre button[data-clipboard-target]")  # added by the site's script
            await copy.first.wait_for()
            assert await copy.count() == await tab.locator("pre code").count() >= 2
            await context.grant_permissions(["clipboard-read", "clipboard-write"], origin=url)
            await copy.first.click()
            copied = await tab.evaluate("navigator.clipboard.readText()")
            assert copied.startswith("import asyncio"), copied[:80]
            await tab.screenshot(path=str(ARTIFACTS / "concept-agents.png"), full_page=True)
            # the search works offline: its index and worker come from the site itself
            await tab.goto(f"{url}/")
            await tab.screenshot(path=str(ARTIFACTS / "front-page.png"), full_page=True)
            await tab.click("input.md-search__input")  # the header's search box (a wide window)
            await tab.keyboard.type("handoff", delay=20)  # keystrokes, as a reader types
            meta = tab.locator(".md-search-result__meta")
            await meta.filter(has_text="matching document").wait_for()
            first = tab.locator(".md-search-result__item a").first
            href = await first.get_attribute("href")
            assert href is not None and href.startswith(url), href
            await first.click()
            await tab.wait_for_url(lambda u: u.split("?")[0].rstrip("/") != url)
            assert await tab.locator("article h1").count() >= 1
            print(f"screenshots: {ARTIFACTS}/front-page.png, {ARTIFACTS}/concept-agents.png")
        finally:
            await browser.close()
    assert not errors, errors
