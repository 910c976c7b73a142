"""Issue 16, finding 5: the dashboard hands nothing to a connection that is not the user's browser.

Any local account can connect to 127.0.0.1. Only the holder of ``agentctx ui``'s one-time link gets
the session cookie (HttpOnly, SameSite=Strict); without it every page and API answers 401 with no
record content and no token, and a scraped write token is worth nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx
import pytest

from agentctx.web import server
from agentctx.web.security import SESSION_COOKIE, TOKEN_HEADER
from tests.helpers import new_record

if TYPE_CHECKING:
    from agentctx.store import Store

pytestmark = pytest.mark.anyio

SECRET_TITLE = "Payroll runs on the 3rd"
SECRET_BODY = "The payroll export goes to the finance share."


async def test_without_the_session_nothing_is_served(store: Store) -> None:
    record = await store.add(new_record(title=SECRET_TITLE, body=SECRET_BODY))
    sock = server.bind(0)
    async with (
        server.running(store, sock) as dash,
        httpx.AsyncClient(base_url=dash.url.rstrip("/"), timeout=30) as stranger,
    ):
        for path in (
            "/",
            "/projects",
            "/records",
            f"/records/{record.id}",
            "/graph",
            "/profile",
            "/sessions",
            "/sync",
            "/api/records",
            f"/api/records/{record.id}",
            "/api/graph",
            "/login",
            "/login?secret=guess",
        ):
            response = await stranger.get(path)
            assert response.status_code == 401, path
            for leaked in (SECRET_TITLE, SECRET_BODY, record.id, dash.token, "agentctx-token"):
                assert leaked not in response.text, (path, leaked)
            assert "agentctx ui" in response.text
            assert "set-cookie" not in response.headers
        # a write token scraped somehow (it is no longer in any page a stranger gets) is refused
        pin = await stranger.post(
            f"/api/records/{record.id}/pin",
            json={"pinned": True},
            headers={TOKEN_HEADER: dash.token, "Content-Type": "application/json"},
        )
        assert pin.status_code == 401
        # a forged session cookie is refused too
        forged = await stranger.get("/records", headers={"Cookie": f"{SESSION_COOKIE}=forged"})
        assert forged.status_code == 401
        # the scripts and the stylesheet hold no content and no secret
        script = await stranger.get("/static/app.js")
        assert script.status_code == 200 and dash.token not in script.text
    assert not (await store.get(record.id)).pinned


async def test_the_one_time_link_gives_one_browser_a_strict_httponly_cookie(store: Store) -> None:
    record = await store.add(new_record(title=SECRET_TITLE, body=SECRET_BODY))
    sock = server.bind(0)
    async with (
        server.running(store, sock) as dash,
        httpx.AsyncClient(base_url=dash.url.rstrip("/"), timeout=30) as browser,
        httpx.AsyncClient(base_url=dash.url.rstrip("/"), timeout=30) as late,
    ):
        assert dash.login_url.startswith(f"{dash.url}login?secret=")
        login = await browser.get(dash.login_url)
        assert login.status_code == 303 and login.headers["location"] == "/"  # a clean address
        cookie = login.headers["set-cookie"]
        assert cookie.startswith(f"{SESSION_COOKIE}=")
        attributes = {part.strip().lower() for part in cookie.split(";")[1:]}
        assert {"httponly", "samesite=strict", "path=/"} <= attributes
        assert dash.login_url.split("=", 1)[1] not in cookie  # the cookie is not the secret
        page = await browser.get(f"/records/{record.id}")
        assert page.status_code == 200 and SECRET_TITLE in page.text
        assert dash.token in page.text  # the write token: only in an authenticated page
        pin = await browser.post(
            f"/api/records/{record.id}/pin",
            json={"pinned": True},
            headers={TOKEN_HEADER: dash.token, "Content-Type": "application/json"},
        )
        assert pin.status_code == 200
        # the link is spent: replaying it (another process that read it later) gets nothing
        replay = await late.get(dash.login_url)
        assert replay.status_code == 401 and "set-cookie" not in replay.headers
        assert (await late.get("/records")).status_code == 401
    assert (await store.get(record.id)).pinned


async def test_a_cross_site_login_attempt_is_refused(store: Store) -> None:
    sock = server.bind(0)
    async with (
        server.running(store, sock) as dash,
        httpx.AsyncClient(base_url=dash.url.rstrip("/"), timeout=30) as client,
    ):
        refused = await client.get(dash.login_url, headers={"Sec-Fetch-Site": "cross-site"})
        assert refused.status_code == 403 and "set-cookie" not in refused.headers
        # the refusal did not spend the link: the user's own browser still logs in
        assert (await client.get(dash.login_url)).status_code == 303
