"""A decision recorded by one member reaches the others' prompt hook, confined and labelled."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from agentctx.core.handles import handle
from agentctx.embeddings import vecstore
from tests.hub.members import make_team

if TYPE_CHECKING:
    from pathlib import Path

    from agentctx.embeddings.models import Embedder
    from tests.hub.conftest import Server

pytestmark = pytest.mark.anyio


async def test_a_decision_reaches_a_teammates_prompt_confined_and_labelled(
    pg_server: Server, hub_db: str, tmp_path: Path
) -> None:
    alice, bob, carol = await make_team(pg_server, hub_db, tmp_path)
    mine = await alice.record(
        "Payments retry with exponential backoff",
        "The payments client retries idempotent calls with exponential backoff and jitter.",
        keywords="payments retry backoff jitter",
    )
    pushed = await alice.sync()
    assert (pushed.pushed, pushed.error, pushed.refused) == (1, None, [])

    got = await bob.sync()
    assert got.applied == 1 and got.error is None
    theirs = (await bob.records())[mine.id]
    # the import confinement: project scope, unconfirmed, never pinned, source import
    assert (theirs.scope, theirs.confidence, theirs.pinned, theirs.source) == (
        "project",
        "inferred",
        False,
        "import",
    )
    assert theirs.session_id is not None and theirs.session_id.endswith(" alice")
    assert theirs.pending_embedding  # embedded locally by the next consolidation
    assert theirs.body == mine.body

    injected = bob.prompt("how do payments retry, with backoff and jitter?")
    assert injected is not None and f"id {handle(mine.id)}" in injected
    assert "decision | team hub: alice | unconfirmed" in injected

    # carol (a writer too) gets it; alice's own sync brings nothing back (no echo)
    assert (await carol.sync()).applied == 1
    again = await alice.sync()
    assert (again.pushed, again.applied) == (0, 0)
    assert len(await alice.records()) == 1


async def test_the_authors_cues_travel_and_only_the_authors(
    pg_server: Server, hub_db: str, tmp_path: Path
) -> None:
    alice, bob, _carol = await make_team(pg_server, hub_db, tmp_path)
    mine = await alice.record(
        "Cache TTLs", "Cache entries live for ten minutes.", cues=["how long is the cache kept"]
    )
    await alice.sync()
    await bob.sync()
    assert (await bob.records())[mine.id].cues == ("how long is the cache kept",)
    # consolidation (or the author) adds a cue later: it travels as an event
    async with alice.store() as store, store.transaction() as tx:
        await tx.update_cues(mine.id, ["how long is the cache kept", "cache expiry"])
    report = await alice.sync()
    assert report.events == 1
    await bob.sync()
    assert (await bob.records())[mine.id].cues == ("how long is the cache kept", "cache expiry")
    # bob's cues on alice's record stay his: nothing is pushed for them
    async with bob.store() as store, store.transaction() as tx:
        await tx.update_cues(mine.id, ["bob's own phrasing"])
    assert (await bob.sync()).events == 0


async def test_pulled_records_are_embedded_here_current_versions_first(
    pg_server: Server, hub_db: str, tmp_path: Path, embedder: Embedder
) -> None:
    alice, bob, _carol = await make_team(pg_server, hub_db, tmp_path)
    first = [
        await alice.record(f"Queue rule {n}", f"Queue {n} keeps messages for {n + 1} days.")
        for n in range(3)
    ]
    later = [await alice.supersede(old.id, f"{old.body} Changed.") for old in first[:2]]
    await alice.sync()
    got = await bob.sync()
    assert got.error is None
    pulled = await bob.records()
    assert set(pulled) == {r.id for r in first + later}
    assert all(r.pending_embedding for r in pulled.values())  # no vector travels
    current = {first[2].id, *(r.id for r in later)}
    assert {i for i, r in pulled.items() if r.is_current} == current
    async with bob.store() as store:  # consolidation's embed step, one chunk of 3
        assert await vecstore.embed_pending(store, embedder, limit=3) == 3
    embedded = {i for i, r in (await bob.records()).items() if not r.pending_embedding}
    assert embedded == current  # the superseded versions were pulled first, embedded last
