"""The dashboard's Team page: the hub, the role, the last sync, what waits, the conflicts."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.hub.members import make_team
from tests.test_web import serving

if TYPE_CHECKING:
    from pathlib import Path

    from tests.hub.conftest import Server

pytestmark = pytest.mark.anyio


async def test_the_team_page_shows_the_link_what_waits_and_the_conflicts(
    pg_server: Server, hub_db: str, tmp_path: Path
) -> None:
    alice, bob, carol = await make_team(pg_server, hub_db, tmp_path)
    base = await carol.record("Logging", "Logs are JSON lines.")
    for member in (carol, alice, bob):
        await member.sync()
    await alice.supersede(base.id, "Logs are JSON lines with a trace id.")
    by_bob = await bob.supersede(base.id, "Logs are logfmt.")
    await alice.sync()
    await bob.sync()  # rebased onto alice's
    await alice.sync()  # alice learns of it
    await alice.record("Waiting", "Not pushed yet.")
    async with alice.store() as store, serving(store) as (_dash, client):
        page = (await client.get("/team")).text
    assert 'href="/team"' in page and "Team hub" in page
    assert f"dbname={hub_db} user=alice" in page and "password" not in page
    assert "as alice (writer)" in page
    assert "waiting 1 version(s), 0 event(s)" in page
    assert f"{base.id}</a> was superseded twice" in page and by_bob.id in page


async def test_the_team_page_without_a_hub_says_how_to_link(tmp_path: Path) -> None:
    from agentctx.store import Store

    async with await Store.open() as store, serving(store) as (_dash, client):
        page = (await client.get("/team")).text
    assert "No project is linked to a team hub" in page
