"""Browser tests: the dashboard in real headless Chromium, driven by Playwright.

Chromium is the system's (Debian's ``chromium`` at /usr/bin/chromium, or ``AGENTCTX_CHROMIUM``):
Playwright never downloads a browser here. The tests are marked ``browser`` (here, below) and run in
their own session, ``nox -s browser`` (``pytest -m browser tests/browser``), which CI runs after
``.ci/run`` installs Chromium. Without Chromium they fail and say how to install it.

Each test gets a seeded store (:mod:`tests.browser.demo`), the dashboard on a free loopback port in
the test's own event loop, and a fresh browser page that records console errors (a CSP violation
is one) and uncaught page errors; the fixture fails the test if any occurred.

Screenshots go to ``AGENTCTX_SCREENSHOTS`` (default ``.cache/screenshots/``, git-ignored); the
documentation's pictures are refreshed with
``AGENTCTX_SCREENSHOTS=docs/screenshots pytest -m browser tests/browser``.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from playwright.async_api import async_playwright

from agentctx.web import server
from tests.browser.demo import Demo, seed

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from playwright.async_api import Browser, Page

    from agentctx.store import Store

REPO = Path(__file__).resolve().parents[2]
#: Flags for Chromium in a sandboxed, offline machine (no GPU, no background traffic).
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT = {"width": 1280, "height": 860}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test in this folder ``browser`` (before ``-m`` selects; pyproject registers it)."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.path).parents:
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def chromium() -> str:
    """The system Chromium's path; fails (not skips) with the install command when missing."""
    path = os.environ.get("AGENTCTX_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not os.access(path, os.X_OK):
        pytest.fail(
            f"Chromium not found at {path}: install Debian's package "
            "(apt-get install -y --no-install-recommends chromium) or set AGENTCTX_CHROMIUM",
            pytrace=False,
        )
    return path


@pytest.fixture(scope="session")
def screenshots() -> Path:
    """Where the tests save their screenshots."""
    folder = Path(os.environ.get("AGENTCTX_SCREENSHOTS") or REPO / ".cache" / "screenshots")
    if not folder.is_absolute():
        folder = REPO / folder
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
async def browser(chromium: str) -> AsyncIterator[Browser]:
    """A headless Chromium (Playwright gives each launch a fresh, temporary profile)."""
    async with async_playwright() as pw:
        launched = await pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            await launched.close()


@pytest.fixture
async def demo(store: Store) -> Demo:
    """The demo store (two projects, history, files, sessions, a profile), its projects under
    ``~/src`` of the test's own home folder."""
    return await seed(store, Path.home() / "src")


@dataclass
class Site:
    """A running dashboard and a page of the browser pointed at it."""

    url: str
    port: int
    page: Page
    problems: list[str] = field(default_factory=list)
    shots: Path | None = None

    async def open(self, path: str) -> Page:
        """Go to ``path`` and wait until it has loaded."""
        response = await self.page.goto(self.url.rstrip("/") + path)
        assert response is not None and response.ok, (path, response and response.status)
        return self.page

    async def shot(self, name: str, *, full_page: bool = True) -> Path:
        """Save a screenshot of the page as ``<name>.png``."""
        assert self.shots is not None
        target = self.shots / f"{name}.png"
        await self.page.screenshot(path=str(target), full_page=full_page)
        return target


@pytest.fixture
async def site(
    store: Store, demo: Demo, browser: Browser, screenshots: Path
) -> AsyncIterator[Site]:
    """The dashboard over the demo store, and a browser page; no console or page errors allowed."""
    sock = server.bind(0)
    async with server.running(store, sock) as dash:
        context = await browser.new_context(viewport=VIEWPORT)  # type: ignore[arg-type]
        page = await context.new_page()
        found = Site(dash.url, dash.port, page, shots=screenshots)
        # log in as `agentctx ui`'s browser does: the one-time link, traded for the session cookie
        await page.goto(dash.login_url)
        assert page.url == dash.url, page.url
        page.on(
            "console",
            lambda msg: (
                found.problems.append(f"console {msg.type}: {msg.text}")
                if msg.type in ("error", "warning")
                else None
            ),
        )
        page.on("pageerror", lambda exc: found.problems.append(f"page error: {exc}"))
        try:
            yield found
        finally:
            await context.close()
        assert found.problems == [], found.problems
