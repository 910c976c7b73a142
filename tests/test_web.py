"""The dashboard over real HTTP: uvicorn on a free loopback port, httpx as the client.

Every security rule of :mod:`agentctx.web.security` is exercised from the outside (bad Host,
cross-site, missing or wrong token, a write that is not JSON, no other cookies, the CSP), then the views
and the JSON API against a real store, the graph layout at 2,000 nodes, and ``agentctx ui`` itself
in a subprocess (its address line, Ctrl-C, a busy port).
"""

from __future__ import annotations

import math
import os
import re
import signal
import socket
import subprocess
import sys
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import httpx
import numpy as np
import pytest

from agentctx import preferences
from agentctx.core import clock
from agentctx.core.project import ProjectIdentity
from agentctx.records import Record
from agentctx.web import forcelayout, graph, server
from agentctx.web.html import Safe, escape, tag
from agentctx.web.security import CSP, TOKEN_HEADER
from tests.helpers import new_record

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from agentctx.records import Record
    from agentctx.store import Store

pytestmark = pytest.mark.anyio

P = "d" * 64
XSS = '<script>alert("x")</script><img src=x onerror=alert(1)>'


@asynccontextmanager
async def serving(store: Store) -> AsyncIterator[tuple[server.Dashboard, httpx.AsyncClient]]:
    """The dashboard on a free port, and a client that speaks to it as a same-origin page would,
    logged in with the one-time link (as the browser that ``agentctx ui`` opens)."""
    sock = server.bind(0)
    async with (
        server.running(store, sock) as dash,
        httpx.AsyncClient(base_url=dash.url.rstrip("/"), timeout=30) as client,
    ):
        login = await client.get(dash.login_url)
        assert login.status_code == 303 and login.headers["location"] == "/"
        yield dash, client


def _token_of(page: str) -> str:
    found = re.search(r'<meta name="agentctx-token" content="([^"]+)">', page)
    assert found, "the page carries no token"
    return found.group(1)


def _write_headers(token: str) -> dict[str, str]:
    return {TOKEN_HEADER: token, "Content-Type": "application/json"}


async def project(store: Store, root: str = "/nowhere", name: str = "shop") -> str:
    await store.touch_project(ProjectIdentity(P, name, root, None))
    return P


async def add(store: Store, title: str, body: str = "body", **fields: Any) -> Record:
    fields.setdefault("project_id", P)
    fields.setdefault("type", "decision")
    return await store.add(new_record(title=title, body=body, **fields))


# -- security ---------------------------------------------------------------------------------------


async def test_host_header_must_be_ours(store: Store) -> None:
    await project(store)
    async with serving(store) as (dash, client):
        ok = await client.get("/")
        assert ok.status_code == 200
        for host in ("localhost", "127.0.0.1"):
            assert (
                await client.get("/", headers={"Host": f"{host}:{dash.port}"})
            ).status_code == 200
        for host in (
            f"evil.example:{dash.port}",  # DNS rebinding: an attacker's name resolving to us
            "evil.example",
            f"127.0.0.1:{dash.port + 1}",
            "127.0.0.1",
            f"localhost.evil.example:{dash.port}",
            f"[::1]:{dash.port}",
        ):
            refused = await client.get("/", headers={"Host": host})
            assert refused.status_code == 400, host
            assert "refused" in refused.text and "agentctx-token" not in refused.text


async def test_cross_site_requests_are_refused(store: Store) -> None:
    await project(store)
    record = await add(store, "Use WAL")
    async with serving(store) as (dash, client):
        token = _token_of((await client.get("/")).text)
        for site in ("cross-site", "same-site"):
            page = await client.get("/records", headers={"Sec-Fetch-Site": site})
            assert page.status_code == 403 and "agentctx-token" not in page.text
            write = await client.post(
                f"/api/records/{record.id}/pin",
                json={"pinned": True},
                headers={**_write_headers(token), "Sec-Fetch-Site": site},
            )
            assert write.status_code == 403
        for site in ("same-origin", "none"):
            assert (await client.get("/", headers={"Sec-Fetch-Site": site})).status_code == 200
        for origin in ("http://evil.example", "null", f"http://127.0.0.1:{dash.port + 1}"):
            write = await client.post(
                f"/api/records/{record.id}/pin",
                json={"pinned": True},
                headers={**_write_headers(token), "Origin": origin},
            )
            assert write.status_code == 403, origin
        assert not (await store.get(record.id)).pinned
        same = await client.post(
            f"/api/records/{record.id}/pin",
            json={"pinned": True},
            headers={
                **_write_headers(token),
                "Origin": f"http://localhost:{dash.port}",
                "Sec-Fetch-Site": "same-origin",
            },
        )
        assert same.status_code == 200
        assert (await store.get(record.id)).pinned


async def test_every_write_needs_the_token_of_this_start(store: Store) -> None:
    await project(store)
    record = await add(store, "Use WAL")
    async with serving(store) as (_, first):
        old_token = _token_of((await first.get("/")).text)
    async with serving(store) as (dash, client):
        token = _token_of((await client.get(f"/records/{record.id}")).text)
        assert token == dash.token and token != old_token and len(token) >= 40
        writes = [
            (f"/api/records/{record.id}/pin", {"pinned": True}),
            (f"/api/records/{record.id}/edit", {"body": "changed"}),
            (f"/api/records/{record.id}/supersede", {"body": "new", "rationale": "why"}),
            (f"/api/profile/{record.id}/clear", {}),
        ]
        for path, data in writes:
            missing = await client.post(path, json=data)
            wrong = await client.post(path, json=data, headers=_write_headers(old_token))
            assert missing.status_code == 403 and wrong.status_code == 403, path
            assert "token" in missing.text
        # a form post (what a cross-site <form> can send) is refused even with the token
        form = await client.post(
            f"/api/records/{record.id}/pin",
            content="pinned=true",
            headers={TOKEN_HEADER: token, "Content-Type": "application/x-www-form-urlencoded"},
        )
        assert form.status_code == 415
        assert (await store.history(record.id)) == [await store.get(record.id)]
        assert not (await store.get(record.id)).pinned
        # reads need no token; methods other than GET and POST do not exist
        assert (await client.get(f"/api/records/{record.id}")).status_code == 200
        delete = await client.delete(f"/api/records/{record.id}", headers=_write_headers(token))
        assert delete.status_code == 405


async def test_no_cookies_and_a_strict_content_security_policy(store: Store) -> None:
    await project(store)
    record = await add(store, "Use WAL")
    async with serving(store) as (_, client):
        token = _token_of((await client.get("/")).text)
        responses = [
            await client.get(path)
            for path in ("/", "/records", f"/records/{record.id}", "/graph", "/profile",
                         "/sessions", "/sync", "/static/app.js", "/api/graph", "/nope")
        ]  # fmt: skip
        responses.append(
            await client.post(
                f"/api/records/{record.id}/pin",
                json={"pinned": True},
                headers=_write_headers(token),
            )
        )
        responses.append(await client.get("/", headers={"Host": "evil.example"}))
        for response in responses:
            assert "set-cookie" not in response.headers, response.url
            assert response.headers["content-security-policy"] == CSP
            assert response.headers["x-content-type-options"] == "nosniff"
            assert response.headers["x-frame-options"] == "DENY"
        assert "script-src 'self'" in CSP and "unsafe-inline" not in CSP
        assert "frame-ancestors 'none'" in CSP
        page = (await client.get("/")).text
        # no inline script or style anywhere: every <script> has a src, no style attributes
        assert re.findall(r"<script(?![^>]*\bsrc=)", page) == []
        assert " style=" not in page and "<style" not in page


async def test_record_text_is_escaped_everywhere(store: Store, tmp_path: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "CLAUDE.md").write_text(f"# Notes\n\n{XSS}\n")
    await project(store, str(root), name=XSS)
    old = await add(store, f"Title {XSS}", f"Body {XSS}", keywords="xss", cues=[f"cue {XSS}"])
    _, record = await store.supersede(old.id, f"New body {XSS}", f"because {XSS}")
    await add(store, f"Pref {XSS}", XSS, type="preference", scope="global", project_id="global")
    async with store.transaction() as tx:
        await tx.execute(
            "INSERT INTO nodes(id, project_id, kind, name, created_at) VALUES (?, ?, ?, ?, ?)",
            ("N1", P, "file", f"src/{XSS}.py", clock.now()),
        )
        await tx.execute(
            "INSERT INTO record_entities(record_id, entity_id) VALUES (?, ?)", (record.id, "N1")
        )
    async with serving(store) as (_, client):
        pages = {
            path: (await client.get(path)).text
            for path in (
                "/",
                "/records",
                "/records?q=xss&superseded=1",
                f"/records/{record.id}",
                f"/records/{old.id}",
                "/graph",
                "/profile",
                "/sync",
            )
        }
    for path, text in pages.items():
        assert "<script>alert" not in text and "<img src=x" not in text, path
        assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in text, path
    assert f"src/{escape(XSS)}.py" in pages[f"/records/{record.id}"]
    assert f"cue {escape(XSS)}" in pages[f"/records/{old.id}"]


def test_html_builder_escapes_text_and_attributes() -> None:
    built = tag("a", XSS, href='x" onclick="alert(1)', title=Safe("<b>kept</b>"), hidden=True)
    assert built == (
        '<a href="x&quot; onclick=&quot;alert(1)" title="<b>kept</b>" hidden>'
        "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;</a>"
    )
    assert tag("input", name="q", value="'", disabled=False) == '<input name="q" value="&#x27;">'
    assert escape(escape("<")) == "&lt;"  # escaping twice does not double-escape


# -- records: views and writes ----------------------------------------------------------------------


async def test_search_with_filters(store: Store) -> None:
    await project(store)
    wal = await add(store, "Use SQLite WAL mode", "busy timeout five seconds", keywords="sqlite")
    await add(
        store, "SQLite tests use tmp dirs", "real files", type="convention", keywords="sqlite"
    )
    guess = await add(
        store, "SQLite may need VACUUM", "seen once", confidence="inferred", keywords="sqlite"
    )
    glob = await add(
        store, "Prefer SQLite", "everywhere", type="preference", scope="global", project_id="global"
    )
    _, newer = await store.supersede(wal.id, "busy timeout ten seconds", "measured")
    async with serving(store) as (_, client):

        async def ids(**params: str) -> set[str]:
            response = await client.get("/api/records", params=params)
            assert response.status_code == 200, response.text
            return {r["id"] for r in response.json()["records"]}

        assert await ids(q="sqlite") == {newer.id, guess.id, glob.id} | {
            r.id for r in await store.list_records(P, types=["convention"])
        }
        assert await ids(q="sqlite", type="decision") == {newer.id, guess.id}
        assert await ids(q="sqlite", confidence="inferred") == {guess.id}
        assert await ids(q="sqlite", scope="global") == {glob.id}
        assert await ids(q="sqlite", project=P, scope="project", type="decision") == {
            newer.id,
            guess.id,
        }
        assert wal.id in await ids(q="busy timeout", superseded="1")
        assert wal.id not in await ids(q="busy timeout")
        assert await ids(type="decision", project=P) == {newer.id, guess.id}
        assert await ids(type="decision", project=P, superseded="1") == {newer.id, guess.id, wal.id}
        bad = await client.get("/api/records", params={"type": "opinion"})
        assert bad.status_code == 400 and "opinion" in bad.json()["error"]
        page = await client.get("/records", params={"q": "sqlite", "type": "decision"})
        assert page.status_code == 200
        assert "Use SQLite WAL mode" in page.text and "SQLite tests use tmp dirs" not in page.text
        assert '<option value="decision" selected>' in page.text


async def test_edit_writes_a_new_version_and_keeps_the_history(store: Store) -> None:
    await project(store)
    record = await add(store, "Use port 8000", "The dev server listens on 8000.")
    async with serving(store) as (_, client):
        token = _token_of((await client.get(f"/records/{record.id}")).text)
        edited = await client.post(
            f"/api/records/{record.id}/edit",
            json={"title": "Use port 8080", "body": "The dev server listens on 8080."},
            headers=_write_headers(token),
        )
        assert edited.status_code == 200, edited.text
        new_id = edited.json()["new"]["id"]
        assert edited.json()["url"] == f"/records/{new_id}"
        detail = (await client.get(f"/api/records/{new_id}")).json()
        assert [v["id"] for v in detail["history"]] == [record.id, new_id]
        assert detail["record"]["title"] == "Use port 8080"
        assert detail["history"][0]["superseded_by"] == new_id
        page = (await client.get(f"/records/{new_id}")).text
        assert "History (2 versions)" in page and f'href="/records/{record.id}"' in page
        old_page = (await client.get(f"/records/{record.id}")).text
        assert "This version is history" in old_page and 'data-api="' not in old_page
        again = await client.post(
            f"/api/records/{record.id}/edit", json={"body": "x"}, headers=_write_headers(token)
        )
        assert again.status_code == 409 and new_id in again.json()["error"]
        same = await client.post(
            f"/api/records/{new_id}/edit",
            json={"title": "Use port 8080"},
            headers=_write_headers(token),
        )
        assert same.status_code == 400 and "nothing to change" in same.json()["error"]
    old, new = await store.get(record.id), await store.get(new_id)
    assert old.superseded_by == new.id and new.source == "cli" and new.rationale == "edited"


async def test_supersede_needs_a_rationale_and_pin_toggles(store: Store) -> None:
    await project(store)
    record = await add(store, "Deploy on Fridays")
    async with serving(store) as (_, client):
        token = _token_of((await client.get("/")).text)
        headers = _write_headers(token)
        no_why = await client.post(
            f"/api/records/{record.id}/supersede", json={"body": "Never"}, headers=headers
        )
        assert no_why.status_code == 400 and "rationale" in no_why.json()["error"]
        done = await client.post(
            f"/api/records/{record.id}/supersede",
            json={
                "title": "No deploys on Fridays",
                "body": "Never on Fridays.",
                "rationale": "outage",
            },
            headers=headers,
        )
        assert done.status_code == 200
        new_id = done.json()["new"]["id"]
        for value, expected in ((True, True), ("false", False)):
            pinned = await client.post(
                f"/api/records/{new_id}/pin", json={"pinned": value}, headers=headers
            )
            assert pinned.status_code == 200 and pinned.json()["record"]["pinned"] is expected
        junk = await client.post(f"/api/records/{new_id}/pin", json={"pinned": 1}, headers=headers)
        assert junk.status_code == 400
        not_json = await client.post(f"/api/records/{new_id}/pin", content=b"{", headers=headers)
        assert not_json.status_code == 400
        missing = await client.post("/api/records/NOPE/pin", json={"pinned": True}, headers=headers)
        assert missing.status_code == 404
        assert (await client.get("/records/NOPE")).status_code == 404
        assert "Not found" in (await client.get("/records/NOPE")).text
    new = await store.get(new_id)
    assert new.title == "No deploys on Fridays" and new.rationale == "outage" and not new.pinned


async def test_profile_edit_and_clear(store: Store) -> None:
    pref = await add(
        store, "Prefer tabs", "Indent with tabs.", type="preference", scope="global",
        project_id="global", confidence="reinforced",
    )  # fmt: skip
    other = await add(
        store, "Short commits", "One change each.", type="preference", scope="global",
        project_id="global", confidence="inferred",
    )  # fmt: skip
    async with serving(store) as (_, client):
        page = (await client.get("/profile")).text
        assert "Prefer tabs" in page and "every digest" in page and "on match only" in page
        headers = _write_headers(_token_of(page))
        edited = await client.post(
            f"/api/profile/{pref.id}/edit", json={"body": "Indent with spaces."}, headers=headers
        )
        assert edited.status_code == 200 and edited.json()["url"] == "/profile"
        cleared = await client.post(f"/api/profile/{other.id}/clear", json={}, headers=headers)
        assert cleared.status_code == 200
        project_rec = await add(store, "Not a preference")
        wrong = await client.post(f"/api/profile/{project_rec.id}/clear", json={}, headers=headers)
        assert wrong.status_code == 400 and "not a global preference" in wrong.json()["error"]
        # editing a global preference from its record page goes through the profile too
        new_id = edited.json()["new"]["id"]
        again = await client.post(
            f"/api/records/{new_id}/edit", json={"title": "Prefer spaces"}, headers=headers
        )
        assert again.status_code == 200
    entries = await preferences.show(store)
    assert [(e.title, e.body, e.confidence) for e in entries] == [
        ("Prefer spaces", "Indent with spaces.", "explicit")
    ]
    assert "Prefer spaces" in Path(preferences.mirror_path()).read_text()  # noqa: ASYNC240


# -- the other views ---------------------------------------------------------------------------------


async def test_projects_page_counts_records_by_type(store: Store) -> None:
    await project(store, "/work/shop", name="shop")
    await store.touch_project(ProjectIdentity("e" * 64, "blog", "/work/blog", None))
    for i in range(3):
        await add(store, f"decision {i}")
    await add(store, "a convention", type="convention")
    old = await add(store, "old one", type="bugfix")
    await store.supersede(old.id, "new one", "fixed again")
    async with serving(store) as (_, client):
        page = (await client.get("/")).text
    shop = page[page.index(f'data-project="{P}"') :]
    shop = shop[: shop.index("</article>")]
    assert "shop" in shop and "/work/shop" in shop
    assert re.search(r"<strong>5</strong>\s*current records", shop)
    assert re.search(r"decision</span><span class=\"n\">3<", shop)
    assert re.search(r"bugfix</span><span class=\"n\">1<", shop)
    assert "2 projects" in page and 'data-project="global"' in page


async def _sessions(store: Store) -> None:
    rows = [
        ("s-1", "2026-11-20T10:00:00.000000Z", "2026-11-20T10:09:30.000000Z", 1500, 0.0123, 4),
        ("s-2", "2026-11-20T15:00:00.000000Z", None, 700, 0.0, 0),
        ("s-3", "2026-11-22T09:00:00.000000Z", "2026-11-22T11:05:00.000000Z", 2500, 0.5, 7),
    ]
    async with store.transaction() as tx:
        for sid, started, ended, tokens, cost, extracted in rows:
            await tx.execute(
                "INSERT INTO sessions(session_id, project_id, cwd, started_at, ended_at, "
                "tokens_injected, injections, extraction_cost_usd, records_extracted) "
                "VALUES (?, ?, '/w', ?, ?, ?, 2, ?, ?)",
                (sid, P, started, ended, tokens, cost, extracted),
            )


async def test_sessions_rows_and_daily_totals(store: Store) -> None:
    from datetime import UTC, datetime

    from agentctx.web import queries

    await project(store)
    await _sessions(store)
    rows = await queries.session_rows(store, P, limit=None)
    by_id = {r["session_id"]: r for r in rows}
    assert by_id["s-1"]["duration_s"] == 9 * 60 + 30 and by_id["s-2"]["duration_s"] is None
    assert by_id["s-3"]["records_extracted"] == 7
    days = queries.day_totals(rows, datetime(2026, 11, 23, tzinfo=UTC), days=5)
    assert [(d.day, d.sessions, d.tokens, d.records) for d in days] == [
        ("2026-11-19", 0, 0, 0),
        ("2026-11-20", 2, 2200, 4),
        ("2026-11-21", 0, 0, 0),
        ("2026-11-22", 1, 2500, 7),
        ("2026-11-23", 0, 0, 0),
    ]
    assert math.isclose(days[1].cost, 0.0123)
    async with serving(store) as (_, client):
        page = (await client.get("/sessions", params={"project": P})).text
    assert "9m 30s" in page and "2h 05m" in page and "$0.5000" in page
    assert page.count('class="chart"') == 4 and page.count("<rect") >= 4 * 30


async def test_sync_page_shows_the_drift_and_the_diff(store: Store, tmp_path: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "CLAUDE.md").write_text("# Project\n\nTests use pytest.\n")
    await project(store, str(root))
    await add(store, "Deploy with blue green switching", "Two stacks, one switch.")
    async with serving(store) as (_, client):
        page = (await client.get("/sync")).text
        gone = await client.get("/sync", params={"project": "f" * 64})
    assert "Deploy with blue green switching" in page
    assert '<span class="add">+## Decisions and conventions recorded in agentctx' in page
    assert str(root / "CLAUDE.md") in page
    assert (root / "CLAUDE.md").read_text() == "# Project\n\nTests use pytest.\n"  # read-only
    assert gone.status_code == 200 and "not on this machine" in gone.text


# -- the graph ---------------------------------------------------------------------------------------


async def _graph_store(store: Store) -> dict[str, str]:
    await project(store)
    old = await add(store, "Cache in Redis")
    _, new = await store.supersede(old.id, "Cache in memory", "one process")
    lone = await add(store, "Lonely convention", type="convention")
    now = clock.now()
    async with store.transaction() as tx:
        for node_id, kind, name in (
            ("F1", "file", "src/cache.py"),
            ("B1", "branch", "cache-rewrite"),
        ):
            await tx.execute(
                "INSERT INTO nodes(id, project_id, kind, name, created_at) VALUES (?, ?, ?, ?, ?)",
                (node_id, P, kind, name, now),
            )
        await tx.execute(
            "INSERT INTO record_entities(record_id, entity_id) VALUES (?, ?)", (new.id, "F1")
        )
        for src, dst, rel in (("F1", "S1", "observed_in"), ("B1", "S1", "observed_in")):
            await tx.execute(
                "INSERT INTO edges(id, from_id, to_id, rel_type, created_at) VALUES (?, ?, ?, ?, ?)",
                (clock.ulid(), src, dst, rel, now),
            )
    return {"old": old.id, "new": new.id, "lone": lone.id}


async def test_graph_nodes_edges_and_page(store: Store) -> None:
    ids = await _graph_store(store)
    async with serving(store) as (_, client):
        data = (await client.get("/api/graph", params={"project": P})).json()
        page = (await client.get("/graph", params={"project": P, "focus": ids["new"]})).text
    kinds = {n["id"]: n["kind"] for n in data["nodes"]}
    assert kinds == {
        ids["old"]: "record", ids["new"]: "record", ids["lone"]: "record",
        "F1": "file", "B1": "branch", "S1": "session",
    }  # fmt: skip
    edges = {(e["source"], e["target"], e["rel"]) for e in data["edges"]}
    assert edges == {
        (ids["new"], ids["old"], "supersedes"),
        (ids["new"], "F1", "applies_to"),
        ("F1", "S1", "observed_in"),
        ("B1", "S1", "observed_in"),
    }
    assert all(n["x"] > 0 and n["y"] > 0 for n in data["nodes"])
    assert f'<a href="/records/{ids["new"]}" class="node record t-decision focus"' in page
    assert 'class="node record t-decision old"' in page
    assert page.count('class="edge rel-') == 4 and '<script src="/static/graph.js"' in page


async def test_graph_is_cut_at_its_limit_newest_records_first(store: Store) -> None:
    ids = await _graph_store(store)
    g = await graph.load(store, P, limit=2)
    assert g.total == 6 and g.truncated
    assert {n.id for n in g.nodes} == {ids["lone"], ids["new"]}
    assert g.edges == []


def test_layout_of_2000_nodes_is_untangled() -> None:
    rng = np.random.default_rng(7)
    n = 2000
    # one big component: a random tree plus extra links, as a busy project's graph
    edges = [(i, int(rng.integers(0, i))) for i in range(1, 1600)]
    edges += [(int(a), int(b)) for a, b in rng.integers(0, 1600, size=(400, 2)) if a != b]
    edges += [(i, i + 1) for i in range(1600, 1700, 2)]  # small pairs; the rest isolated
    pos = forcelayout.layout(n, edges)  # its speed is measured in benchmarks/web.py
    assert pos.shape == (n, 2) and np.isfinite(pos).all() and (pos > 0).all()
    rounded = {(round(x), round(y)) for x, y in pos}
    assert len(rounded) > 0.99 * n  # nodes do not pile up on one spot
    linked = np.mean([np.hypot(*(pos[a] - pos[b])) for a, b in edges[:1600]])
    pairs = rng.integers(0, 1600, size=(2000, 2))
    unrelated = np.mean([np.hypot(*(pos[a] - pos[b])) for a, b in pairs])
    assert linked < unrelated / 4, (linked, unrelated)  # linked nodes end up near each other
    assert np.array_equal(pos, forcelayout.layout(n, edges))  # the same graph, the same picture


def _positions(text: str) -> list[str]:
    return re.findall(r'<(?:circle cx|rect x)="[^"]*" (?:cy|y)="[^"]*"', text)


async def test_graph_page_of_2000_nodes(store: Store) -> None:
    await project(store)
    now = clock.now()
    async with store.transaction() as tx:
        for i in range(1500):
            record = await tx.add(
                new_record(type="discovery", title=f"fact {i}", body="b", project_id=P)
            )
            if i % 3 == 0:
                await tx.execute(
                    "INSERT OR IGNORE INTO nodes(id, project_id, kind, name, created_at) "
                    "VALUES (?, ?, 'file', ?, ?)",
                    (f"F{i}", P, f"src/m{i}.py", now),
                )
                await tx.execute(
                    "INSERT INTO record_entities(record_id, entity_id) VALUES (?, ?)",
                    (record.id, f"F{i}"),
                )
    async with serving(store) as (_, client):
        page = await client.get("/graph", params={"project": P})
        again = await client.get("/graph", params={"project": P})
    assert page.status_code == 200 and again.status_code == 200
    assert page.text.count(' data-kind="') == 1500 + 500
    # laid out once, then kept for the unchanged graph (a kept layout reports exactly 0 ms)
    assert "Laid out in 0 ms" not in page.text and "Laid out in 0 ms" in again.text
    assert len(_positions(page.text)) >= 2000 and _positions(page.text) == _positions(again.text)


# -- agentctx ui ---------------------------------------------------------------------------------------


def _fake_browser(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """An environment whose ``$BROWSER`` (which webbrowser runs) writes the URL to a file."""
    opened = tmp_path / "opened.txt"
    browser = tmp_path / "browser.sh"
    browser.write_text(f'#!/bin/sh\nprintf "%s" "$1" > {opened}\n')
    browser.chmod(0o755)
    return {**os.environ, "BROWSER": f"{browser} %s"}, opened


def _start_ui(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "agentctx", "ui", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env or os.environ.copy(),
    )


def test_cli_serves_on_loopback_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    env, opened = _fake_browser(tmp_path)
    proc = _start_ui("--no-open", "--port", "0", env=env)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        found = re.match(r"agentctx dashboard: (http://127\.0\.0\.1:(\d+)/)", line)
        assert found, line
        url, port = found.group(1), int(found.group(2))
        assert httpx.get(url, timeout=30).status_code == 401  # the bare address: no content
        login = line.split()[2]
        with httpx.Client(timeout=30, follow_redirects=True) as browser:
            response = browser.get(login)
        assert response.status_code == 200 and "Projects" in response.text
        assert str(response.url) == url  # redirected to the clean address
        assert _listening_address(port) == "127.0.0.1"  # loopback only
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "stopped" in out and "Traceback" not in err
    assert not opened.exists()  # --no-open: the browser was not started


def _listening_address(port: int) -> str:
    """The IPv4 address a socket listening on ``port`` is bound to (from /proc/net/tcp)."""
    with open("/proc/net/tcp") as fh:
        for row in fh.readlines()[1:]:
            local, state = row.split()[1], row.split()[3]
            address, hex_port = local.split(":")
            if int(hex_port, 16) == port and state == "0A":  # LISTEN
                return socket.inet_ntoa(bytes.fromhex(address)[::-1])
    raise AssertionError(f"nothing listens on port {port}")


def test_cli_opens_the_browser(tmp_path: Path) -> None:
    env, opened = _fake_browser(tmp_path)
    proc = _start_ui("--port", "0", env=env)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().split()[2]
        deadline = time.monotonic() + 30
        while not (opened.exists() and opened.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert opened.read_text() == url
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0


def test_cli_refuses_a_busy_port() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        proc = _start_ui("--no-open", "--port", str(port))
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert f"port {port} on 127.0.0.1 is in use" in err and "--port" in err
    assert out == ""


def test_other_commands_do_not_load_the_dashboard() -> None:
    probe = "import sys, agentctx.cli; print(' '.join(m for m in sys.argv[1:] if m in sys.modules))"
    suspects = ("starlette", "uvicorn", "agentctx.web", "webbrowser", "numpy")
    loaded = subprocess.run(
        [sys.executable, "-c", probe, *suspects], capture_output=True, text=True, check=True
    )
    assert loaded.stdout.strip() == ""


# -- another browser: a new one-time link from the running server ------------------------------------


async def test_a_new_link_comes_only_with_the_control_secret(store: Store) -> None:
    from agentctx.web.security import CONTROL_HEADER, LINK_PATH

    sock = server.bind(0)
    async with (
        server.running(store, sock) as dash,
        httpx.AsyncClient(base_url=dash.url.rstrip("/"), timeout=30) as first,
        httpx.AsyncClient(base_url=dash.url.rstrip("/"), timeout=30) as second,
    ):
        assert (await first.get(dash.login_url)).status_code == 303
        # without the control secret (or with a wrong one, or by GET): no link
        for headers in ({}, {CONTROL_HEADER: "guess"}, {TOKEN_HEADER: dash.token}):
            refused = await second.post(LINK_PATH, headers=headers)
            assert refused.status_code in (403, 401), headers
            assert "secret" not in refused.json()
        assert (
            await second.get(LINK_PATH, headers={CONTROL_HEADER: dash.control})
        ).status_code == 403
        # a cross-site page cannot ask either, even holding the secret
        cross = await second.post(
            LINK_PATH, headers={CONTROL_HEADER: dash.control, "Sec-Fetch-Site": "cross-site"}
        )
        assert cross.status_code == 403
        issued = await second.post(LINK_PATH, headers={CONTROL_HEADER: dash.control})
        assert issued.status_code == 200
        secret = issued.json()["secret"]
        login = await second.get(f"/login?secret={secret}")
        assert login.status_code == 303
        assert (await second.get("/records")).status_code == 200  # the second browser is in
        assert (await first.get("/records")).status_code == 200  # and the first stays in
        assert (await second.get(f"/login?secret={secret}")).status_code == 401  # spent


def _ui_link(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentctx", "ui", "--link", *args],
        capture_output=True,
        text=True,
        env=env or os.environ.copy(),
        timeout=60,
    )


def test_cli_link_asks_the_running_dashboard(tmp_path: Path) -> None:
    from agentctx.web import link

    env, opened = _fake_browser(tmp_path)
    proc = _start_ui("--no-open", "--port", "0", env=env)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline().split()[2]
        state = Path(link.state_path())
        assert state.stat().st_mode & 0o777 == 0o600  # only the user's account reads the secret
        got = _ui_link("--no-open", env=env)
        assert got.returncode == 0, got.stderr
        found = re.match(
            r"agentctx dashboard: (http://127\.0\.0\.1:\d+/login\?secret=\S+)", got.stdout
        )
        assert found, got.stdout
        second = found.group(1)
        assert second != first and second.split("?")[0] == first.split("?")[0]
        assert not opened.exists()  # --no-open
        with (
            httpx.Client(timeout=30, follow_redirects=True) as a,
            httpx.Client(timeout=30, follow_redirects=True) as b,
        ):
            assert a.get(first).status_code == 200
            answer = b.get(second)  # the second browser logs in with the new link
            assert answer.status_code == 200 and "Projects" in answer.text
            assert a.get(first).status_code == 401  # the first link stays spent
        opened_link = _ui_link(env=env)  # without --no-open, the browser gets it
        assert opened_link.returncode == 0
        assert opened.read_text() == opened_link.stdout.split()[2]
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0
    assert not state.exists()  # the stopped server took its note away
    gone = _ui_link("--no-open", env=env)
    assert gone.returncode == 1 and gone.stdout == ""
    assert gone.stderr.strip().count("\n") == 0 and "no dashboard is running" in gone.stderr
    assert "agentctx ui" in gone.stderr and "Traceback" not in gone.stderr


# -- the first run ----------------------------------------------------------------------------------


async def test_an_empty_store_says_what_to_do(store: Store) -> None:
    async with serving(store) as (_, client):
        page = (await client.get("/")).text
        assert "Nothing learned yet" in page
        for step in ("agentctx init", "agentctx demo", "agentctx record --type decision"):
            assert step in page, step
        # a project with only the profile facts `init` detects has learned nothing yet either
        await project(store)
        await add(
            store, "Languages", "Python (from pyproject.toml)", type="profile", key="languages"
        )
        page = (await client.get("/")).text
        assert "Nothing learned yet" in page and 'data-project="' + P in page
        # once something is learned, the note goes
        await add(store, "Use PostgreSQL", "The ledger lives in PostgreSQL.")
        assert "Nothing learned yet" not in (await client.get("/")).text


async def test_a_detected_profile_fact_reads_the_same_everywhere(store: Store) -> None:
    """Issue 27, item 14: the digest's label words (``detected``, ``stated``) come from one place,
    ``core.inject``, and the dashboard and ``agentctx show`` use them too."""
    from agentctx.core import inject

    await project(store)
    fact = await add(
        store,
        "Languages",
        "Python (from pyproject.toml)",
        type="profile",
        key="languages",
        source="cli",
        confidence="explicit",
    )
    assert inject.label(fact.to_dict()) == "profile | detected | stated"  # the digest's label
    assert inject.described(fact) == ("detected (cli)", "stated (explicit)")
    async with serving(store) as (_, client):
        page = (await client.get(f"/records/{fact.id}")).text
        listing = (await client.get("/records", params={"project": P})).text
    assert "<dd>detected (cli)</dd>" in page and "<dd>stated (explicit)</dd>" in page
    assert ">stated</span>" in listing and ">explicit<" not in listing
    shown = await anyio.run_process(
        [sys.executable, "-m", "agentctx", "show", fact.id], check=False
    )
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout.decode()
    assert "type        profile (project)" in out
    assert "confidence  stated (explicit)" in out
    assert "source      detected (cli)" in out


async def test_sessions_figures_and_table_come_from_one_list(store: Store) -> None:
    """Issue 27, item 14: the charts' figures are the table's total row, over the same sessions:
    a session older than the window is in neither, an open one (no start yet) is today's in both,
    and a project without a row is named after its folder."""
    from datetime import UTC, datetime

    from agentctx.web import queries

    await project(store)
    await _sessions(store)  # 2026-11-20 (two) and 2026-11-22
    async with store.transaction() as tx:
        await tx.execute(
            "INSERT INTO sessions(session_id, project_id, cwd, started_at, tokens_injected, "
            "injections) VALUES ('s-old', ?, '/w', '2026-09-01T10:00:00.000000Z', 999, 9)",
            (P,),
        )
    rows = await queries.session_rows(store, None, limit=None)
    rows.append({**rows[0], "session_id": "s-open", "started_at": None, "tokens_injected": 40,
                 "injections": 1, "records_extracted": 0, "extraction_cost_usd": 0.0})  # fmt: skip
    view = queries.sessions_view(rows, datetime(2026, 11, 23, tzinfo=UTC), days=5)
    assert {r["session_id"] for r in view.rows} == {"s-1", "s-2", "s-3", "s-open"}
    assert view.total.sessions == sum(d.sessions for d in view.days) == 4
    assert view.total.tokens == sum(d.tokens for d in view.days) == 2200 + 2500 + 40
    assert view.total.tokens == sum(int(r["tokens_injected"]) for r in view.rows)
    assert view.total.injections == sum(int(r["injections"]) for r in view.rows)
    assert math.isclose(view.total.cost, sum(d.cost for d in view.days))
    assert view.total.records == sum(d.records for d in view.days) == 11
    assert view.days[-1].sessions == 1  # the open session: today
    html = str(queries_render(view))
    assert 'class="total"' in html and "All 4 sessions" in html
    assert f"{view.total.tokens:,}" in html
    assert queries.project_label("e" * 64, "/home/me/src/shop-api/", {}) == "shop-api"
    assert queries.project_label("e" * 64, None, {}) == "eeeeeeee…"
    assert queries.project_label(P, "/elsewhere", {P: "shop"}) == "shop"


def queries_render(view: Any) -> Safe:
    from agentctx.web.views import sessions

    return sessions.render(view, "", [(P, "shop")], token="t")
