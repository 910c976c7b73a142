"""Two members supersede the same version: one linear chain, rebased, listed; hub order decides."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from agentctx.team.hub import local
from tests.hub.members import Member, make_team

if TYPE_CHECKING:
    from pathlib import Path

    from tests.hub.conftest import Server

pytestmark = pytest.mark.anyio


async def chain(member: Member, first: str) -> list[str]:
    """The ids from ``first`` along ``superseded_by`` in a member's store."""
    records = await member.records()
    ids = [first]
    while records[ids[-1]].superseded_by is not None:
        ids.append(str(records[ids[-1]].superseded_by))
        assert len(ids) <= len(records), "a cycle"
    return ids


@pytest.mark.parametrize("first", ["alice", "bob"])
async def test_concurrent_supersession_makes_one_chain_in_hub_order(
    pg_server: Server, hub_db: str, tmp_path: Path, first: str
) -> None:
    alice, bob, carol = await make_team(pg_server, hub_db, tmp_path)
    base = await carol.record("Queue names", "Queue names use snake_case.")
    await carol.sync()
    await alice.sync()
    await bob.sync()
    # both supersede the same version while neither has synced
    by_alice = await alice.supersede(base.id, "Queue names use kebab-case (alice).")
    by_bob = await bob.supersede(base.id, "Queue names use camelCase (bob).")
    winner, loser = (alice, bob) if first == "alice" else (bob, alice)
    won = by_alice if first == "alice" else by_bob
    lost = by_bob if first == "alice" else by_alice

    assert (await winner.sync()).rebased == []
    rebased = (await loser.sync()).rebased
    assert rebased == [{"id": base.id, "onto": won.id, "successor": lost.id}]
    for member in (alice, bob, carol):
        await member.sync()
    for member in (alice, bob, carol):
        # one linear chain, in hub order, nothing lost: base -> the first pushed -> the rebased
        assert await chain(member, base.id) == [base.id, won.id, lost.id], member.name
        current = await member.records(current=True)
        assert set(current) == {lost.id}, member.name
        async with member.store() as store:
            listed = await local.conflicts(store)
        assert [(c["record_id"], c["onto"], c["successor"]) for c in listed] == [
            (base.id, won.id, lost.id)
        ], member.name


async def test_a_clock_a_day_ahead_does_not_decide_who_wins(
    pg_server: Server, hub_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    alice, bob, carol = await make_team(pg_server, hub_db, tmp_path)
    base = await carol.record("Deploy window", "Deploys happen on Tuesdays.")
    for member in (carol, alice, bob):
        await member.sync()
    by_alice = await alice.supersede(base.id, "Deploys happen on Wednesdays.")
    # bob's clock runs a day ahead: his version claims to be newer, and is pushed second
    from agentctx.core import clock

    real_now = clock.now
    monkeypatch.setattr(clock, "now", lambda: clock.days_ago(-1))
    by_bob = await bob.supersede(base.id, "Deploys happen on Thursdays.")
    monkeypatch.setattr(clock, "now", real_now)
    assert by_bob.recorded_at > by_alice.recorded_at
    await alice.sync()
    await bob.sync()
    await carol.sync()
    # hub order: alice's came first, bob's is rebased onto it, whatever the clocks say
    assert await chain(carol, base.id) == [base.id, by_alice.id, by_bob.id]


async def test_one_current_fact_per_key_the_later_at_the_hub_wins(
    pg_server: Server, hub_db: str, tmp_path: Path
) -> None:
    alice, bob, carol = await make_team(pg_server, hub_db, tmp_path)
    fact = {"type": "profile", "key": "test_command"}
    first = await alice.record("Test command", "pytest -q", **fact)
    await alice.sync()
    # bob, who has not pulled it, states the same key; his push comes second, so his wins
    second = await bob.record("Test command", "nox -s tests", **fact)
    await bob.sync()
    for member in (alice, bob, carol):
        await member.sync()
    for member in (alice, bob, carol):
        records = await member.records()
        current = [r.id for r in records.values() if r.is_current and r.key == "test_command"]
        assert current == [second.id], member.name
        assert records[first.id].superseded_by == second.id, member.name
