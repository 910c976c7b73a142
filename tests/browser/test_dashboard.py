"""The dashboard in real headless Chromium: every view, search, an edit and its history, the graph,
the profile, and untrusted text staying text. Each view's screenshot is saved (see conftest)."""

from __future__ import annotations

import random
import re
from typing import TYPE_CHECKING

import pytest

from agentctx import preferences
from agentctx.core import clock
from tests.browser.conftest import VIEWPORT
from tests.browser.demo import API, XSS_BODY
from tests.helpers import new_record

if TYPE_CHECKING:
    from playwright.async_api import Browser

    from agentctx.store import Store
    from tests.browser.conftest import Site
    from tests.browser.demo import Demo

pytestmark = pytest.mark.anyio


async def test_each_view_loads_and_is_saved(site: Site, demo: Demo) -> None:
    page = await site.open("/")
    assert await page.locator("article.project").count() == 3  # two projects and Global
    card = page.locator(f'article[data-project="{API}"]')
    assert "payments-api" in await card.inner_text()
    assert await card.locator("svg.strip rect").count() >= 4  # the breakdown by type
    await site.shot("projects")

    page = await site.open("/records")
    assert await page.locator("table.records tbody tr").count() >= 15
    await site.shot("records")

    page = await site.open(f"/records/{demo.ledger}")
    assert await page.locator("ol.timeline li").count() == 3
    assert await page.locator("ul.entities li").count() == 2
    await site.shot("record")

    page = await site.open(f"/graph?project={API}")
    assert await page.locator("svg#graph [data-kind]").count() > 20
    await site.shot("graph", full_page=False)

    page = await site.open("/profile")
    assert await page.locator("article.pref").count() == 3
    await site.shot("profile")

    page = await site.open("/sessions")
    assert await page.locator("svg.chart").count() == 4
    assert await page.locator("table.sessions tbody tr").count() == 12
    await site.shot("sessions")

    page = await site.open("/sync")
    assert await page.locator("pre.diff span.add").count() > 3
    assert "Use MySQL 8 for the ledger" in await page.locator(".sync").inner_text()
    await site.shot("sync")


async def test_search_and_filters(site: Site, demo: Demo) -> None:
    page = await site.open("/records")
    await page.fill('input[name="q"]', "ledger")
    await page.press('input[name="q"]', "Enter")
    await page.wait_for_url(re.compile(r"q=ledger"))
    titles = await page.locator("table.records a.title").all_inner_texts()
    assert "Use PostgreSQL 16 for the ledger" in titles
    assert "Use MySQL 8 for the ledger" not in titles  # superseded: hidden by default

    await page.check('input[name="superseded"]')
    await page.click('button[type="submit"]')
    await page.wait_for_url(re.compile(r"superseded=1"))
    titles = await page.locator("table.records a.title").all_inner_texts()
    assert "Use MySQL 8 for the ledger" in titles
    assert await page.locator("tr.old").count() == 2
    await site.shot("search")

    # a select submits its form on change (app.js)
    async with page.expect_navigation():
        await page.select_option('select[name="type"]', "handover")
    assert re.search(r"type=handover", page.url)
    titles = await page.locator("table.records a.title").all_inner_texts()
    assert titles == ["Next: finish the refund reconciliation job"]
    assert await page.locator("#summary").inner_text() == "1 match"

    async with page.expect_navigation():
        await page.select_option('select[name="confidence"]', "explicit")
    assert await page.locator("p.empty").inner_text() == "No records match."


async def test_edit_writes_a_new_version_with_its_history(
    site: Site, demo: Demo, store: Store
) -> None:
    page = await site.open(f"/records/{demo.cents}")
    await page.click("#edit summary")
    await page.fill(
        '#edit textarea[name="body"]', "Amounts are integer cents (bigint).\n<b>no floats</b>"
    )
    async with page.expect_navigation():
        await page.click('#edit button[type="submit"]')
    new_id = page.url.rsplit("/", 1)[1]
    assert new_id != demo.cents
    assert (
        await page.locator("#body").inner_text()
        == "Amounts are integer cents (bigint).\n<b>no floats</b>"
    )
    timeline = page.locator("ol.timeline li")
    assert await timeline.count() == 2
    assert "superseded" in await timeline.nth(0).inner_text()
    assert "current" in await timeline.nth(1).inner_text()
    await site.shot("record-edited")

    async with page.expect_navigation():
        await timeline.nth(0).locator("a").click()
    assert page.url.endswith(f"/records/{demo.cents}")
    assert "This version is history" in await page.locator("p.note").inner_text()
    assert await page.locator("form[data-api]").count() == 0

    old = await store.get(demo.cents)
    assert old.superseded_by == new_id


async def test_pin_supersede_and_errors_in_the_page(site: Site, demo: Demo, store: Store) -> None:
    page = await site.open(f"/records/{demo.ledger}")
    async with page.expect_navigation():
        await page.click("#pin")
    assert await page.locator("#pin").inner_text() == "Unpin"
    assert await page.locator(".heading .badge.pinned").count() == 1
    assert (await store.get(demo.ledger)).pinned

    await page.click("#supersede summary")
    await page.fill('#supersede textarea[name="body"]', "The ledger runs on CockroachDB.")
    await page.fill('#supersede input[name="rationale"]', "multi-region")
    async with page.expect_navigation():
        await page.click('#supersede button[type="submit"]')
    assert "CockroachDB" in await page.locator("#body").inner_text()
    assert await page.locator("ol.timeline li").count() == 4

    # a write the store refuses shows its message in the form, and the page stays
    await page.click("#edit summary")
    before = page.url
    await page.click('#edit button[type="submit"]')  # unchanged title and body
    error = page.locator("#edit .error")
    await error.wait_for()
    await page.wait_for_function("document.querySelector('#edit .error').textContent !== ''")
    assert "nothing to change" in await error.inner_text()
    assert page.url == before
    assert site.problems == [
        "console error: Failed to load resource: the server responded with a status of 400 "
        "(Bad Request)"
    ]
    site.problems.clear()


async def test_a_write_without_the_token_is_refused(site: Site, demo: Demo, store: Store) -> None:
    page = await site.open(f"/records/{demo.ledger}")
    status = await page.evaluate(
        """async (url) => (await fetch(url, {method: "POST", body: '{"pinned": true}',
            headers: {"Content-Type": "application/json"}})).status""",
        f"/api/records/{demo.ledger}/pin",
    )
    assert status == 403
    assert not (await store.get(demo.ledger)).pinned
    # an inline script cannot run: the CSP refuses it (and reports a console error)
    await page.evaluate(
        """() => { const s = document.createElement("script");
            s.textContent = "window.__inline = 1"; document.body.appendChild(s); }"""
    )
    assert await page.evaluate("window.__inline") is None
    assert any("Content Security Policy" in p for p in site.problems)
    site.problems.clear()


async def test_record_text_is_shown_as_text(site: Site, demo: Demo) -> None:
    page = await site.open(f"/records/{demo.xss}")
    assert await page.locator("#body").inner_text() == XSS_BODY
    assert await page.evaluate("window.__agentctx_xss") is None
    assert await page.locator("#body script").count() == 0
    page = await site.open("/records?q=ticket")
    assert (
        "<script>window.__agentctx_xss = 1</script>"
        in await page.locator(".snippet").first.inner_text()
    )
    assert await page.evaluate("window.__agentctx_xss") is None


async def test_graph_pans_zooms_and_opens_a_record(site: Site, demo: Demo) -> None:
    page = await site.open(f"/graph?project={API}")
    svg = page.locator("svg#graph")
    home = await svg.get_attribute("viewBox")
    box = await svg.bounding_box()
    assert box is not None and home is not None
    await page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    await page.mouse.wheel(0, -600)
    zoomed = await svg.get_attribute("viewBox")
    assert zoomed is not None and zoomed != home
    assert float(zoomed.split()[2]) < float(home.split()[2])  # narrower: zoomed in

    # drag to pan: the view moves, and the drag does not open a record
    x, y = box["x"] + 200, box["y"] + 200
    await page.mouse.move(x, y)
    await page.mouse.down()
    await page.mouse.move(x + 120, y + 60, steps=6)
    await page.mouse.up()
    panned = await svg.get_attribute("viewBox")
    assert panned != zoomed and "/graph" in page.url

    await page.click('button[data-zoom="fit"]')
    assert await svg.get_attribute("viewBox") == home

    node = page.locator(f'a.node[data-id="{demo.ledger}"]')
    async with page.expect_navigation():
        await node.locator("circle").click()
    assert page.url.endswith(f"/records/{demo.ledger}")


async def test_graph_of_2000_nodes_stays_usable(site: Site, store: Store) -> None:
    big = "c" * 64
    now = clock.now()
    rng = random.Random(8)
    async with store.transaction() as tx:
        await tx.execute(
            "INSERT INTO projects(project_id, name, root, remote, created_at, last_seen_at) "
            "VALUES (?, 'monorepo', '/nowhere', NULL, ?, ?)",
            (big, now, now),
        )
        for i in range(1400):
            record = await tx.add(
                new_record(
                    type=("decision", "convention", "discovery", "bugfix")[i % 4],
                    title=f"Fact number {i} about module {i % 97}",
                    body="generated",
                    project_id=big,
                )
            )
            # files by a skewed draw: a few hub files gather many records, as in real projects
            files = {i % 600, int(600 * rng.random() ** 3)} if i % 3 else {i % 600}
            for f in files:
                await tx.execute(
                    "INSERT OR IGNORE INTO nodes(id, project_id, kind, name, created_at) "
                    "VALUES (?, ?, 'file', ?, ?)",
                    (f"big-{f}", big, f"pkg/module_{f}.py", now),
                )
                await tx.execute(
                    "INSERT INTO record_entities(record_id, entity_id) VALUES (?, ?)",
                    (record.id, f"big-{f}"),
                )
    page = await site.open(f"/graph?project={big}")  # its speed: benchmarks/web.py
    assert await page.locator("svg#graph [data-kind]").count() == 2000
    await site.shot("graph-2000", full_page=False)
    # a wheel step zooms the drawing in place, around the pointer
    svg = page.locator("svg#graph")
    box = await svg.bounding_box()
    assert box is not None
    await page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    before = await svg.get_attribute("viewBox")
    await page.evaluate(
        """async () => {
            const svg = document.getElementById("graph");
            svg.dispatchEvent(new WheelEvent("wheel", {deltaY: -800, clientX: 600, clientY: 500,
                                                       bubbles: true, cancelable: true}));
            await new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)));
        }"""
    )
    after = await svg.get_attribute("viewBox")
    assert before and after and before != after
    assert float(after.split()[2]) < float(before.split()[2])  # a narrower view: zoomed in
    assert "labels" in (await svg.get_attribute("class") or "")  # zoomed in: labels shown


async def test_profile_edit_and_clear_in_the_page(site: Site, demo: Demo, store: Store) -> None:
    page = await site.open("/profile")
    card = page.locator(f'article.pref[data-id="{demo.pref}"]')
    await card.locator("details:has(form[data-api$='/edit']) summary").click()
    await card.locator('input[name="title"]').fill("Prefer ruff, always")
    async with page.expect_navigation():
        await card.locator('form[data-api$="/edit"] button[type="submit"]').click()
    assert "Prefer ruff, always" in await page.locator("article.pref h2").all_inner_texts()
    entries = await preferences.show(store)
    edited = next(e for e in entries if e.title == "Prefer ruff, always")
    card = page.locator(f'article.pref[data-id="{edited.id}"]')
    await card.locator("details:has(form[data-api$='/clear']) summary").click()
    async with page.expect_navigation():
        await card.locator("button.danger").click()
    assert await page.locator("article.pref").count() == 2
    assert edited.id not in {e.id for e in await preferences.show(store)}


async def test_sessions_page_fits_1280_px_and_its_figures_agree(
    site: Site, demo: Demo, store: Store
) -> None:
    """Issue 27, item 14: no horizontal overflow at 1280 px (the viewport of every test here), no
    64-hex project id, and the charts' figures are the table's total row."""
    unnamed = "c" * 64  # a project only the hooks saw: a session row, no project row
    async with store.transaction() as tx:
        for i in range(3):
            await tx.execute(
                "INSERT INTO sessions(session_id, project_id, cwd, started_at, ended_at, "
                "tokens_injected, injections, extraction_cost_usd, records_extracted, "
                "extraction_error, extraction_backend) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    f"0f1c2a9e-1b7d-4c55-9a0e-3d2b5e8f000{i}",
                    unnamed,
                    "/home/someone/src/a-rather-long-folder-name-for-a-checkout-of-the-service",
                    clock.now(),
                    None,
                    1200 + i,
                    2,
                    0.25,
                    3,
                    "the model answered 529 overloaded after three retries" if i == 0 else None,
                    "claude-code",
                ),
            )
    page = await site.open("/sessions")
    assert await page.evaluate("document.documentElement.clientWidth") == 1280
    widths = await page.evaluate(
        """() => [document.documentElement.scrollWidth, document.documentElement.clientWidth,
                  document.querySelector("table.sessions").scrollWidth,
                  document.querySelector(".table-box").clientWidth]"""
    )
    assert widths[0] <= widths[1], f"the page overflows: {widths}"
    assert widths[2] <= widths[3], f"the table is wider than its box: {widths}"
    text = await page.locator("main").inner_text()
    assert not re.search(r"[0-9a-f]{64}", text), "a raw project id is shown"
    assert "a-rather-long-folder-name-for-a-checkout-of-the-service" in text  # named by its folder
    # the charts' headline figures are the table's total row, and the rows add up to it
    captions = dict(
        zip(
            await page.locator("figure.chart-box figcaption span").all_inner_texts(),
            await page.locator("figure.chart-box figcaption strong").all_inner_texts(),
            strict=True,
        )
    )
    total = page.locator("table.sessions tfoot tr.total")
    rows = page.locator("table.sessions tbody tr")
    assert await rows.count() == 15

    async def column(key: str) -> list[str]:
        return await rows.locator(f'td[data-key="{key}"]').all_inner_texts()

    def number(text: str) -> float:
        return float(text.replace(",", "").replace("$", ""))

    for caption, key in (("Tokens injected", "tokens"), ("Extraction cost", "cost"),
                         ("Records extracted", "records")):  # fmt: skip
        shown = await total.locator(f'td[data-key="{key}"]').inner_text()
        assert captions[caption] == shown, (caption, captions[caption], shown)
        assert abs(sum(number(v) for v in await column(key)) - number(shown)) < 0.01, key
    assert captions["Sessions"] == "15" and "All 15 sessions" in await total.inner_text()
    await site.shot("sessions-1280")


async def test_an_empty_store_opens_on_what_to_do_and_a_second_browser_gets_a_link(
    store: Store, browser: Browser
) -> None:
    """Issue 27, item 13: the first run says what to do; a second browser logs in with a new link
    from the running server (as `agentctx ui --link` asks for it), the first stays logged in."""
    import httpx

    from agentctx.web import server
    from agentctx.web.link import login_url as link_of
    from agentctx.web.security import CONTROL_HEADER, LINK_PATH

    sock = server.bind(0)
    async with server.running(store, sock) as dash:
        first = await browser.new_context(viewport=VIEWPORT)  # type: ignore[arg-type]
        second = await browser.new_context(viewport=VIEWPORT)  # type: ignore[arg-type]
        try:
            page = await first.new_page()
            await page.goto(dash.login_url)
            panel = page.locator("section.getting-started")
            assert await panel.is_visible()
            text = await panel.inner_text()
            for step in ("agentctx init", "agentctx demo", "agentctx record"):
                assert step in text, step
            other = await second.new_page()
            spent = await other.goto(dash.login_url)  # the first link is spent
            assert spent is not None and spent.status == 401
            async with httpx.AsyncClient(timeout=30) as client:
                answer = await client.post(
                    dash.url.rstrip("/") + LINK_PATH, headers={CONTROL_HEADER: dash.control}
                )
            link = link_of(dash.port, answer.json()["secret"])
            opened = await other.goto(link)
            assert opened is not None and opened.ok and other.url == dash.url
            assert await other.locator("section.getting-started").is_visible()
            again = await page.goto(dash.url + "records")  # the first browser is still in
            assert again is not None and again.ok
        finally:
            await first.close()
            await second.close()
