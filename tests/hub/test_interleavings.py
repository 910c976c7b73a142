"""A property test: random interleavings of record, a keyed profile fact, supersede, retire, erase,
offline and sync for three members; after final rounds everyone converges to the hub.

Checked after every example: each member holds every version the hub holds and no erased id, each
version is current or ended exactly as the hub says (one linear chain: no version has two
successors, none is superseded twice), at most one current version per key, the same on every
member, and no member received its own record back (no echo).
Derandomized (a fixed set of examples in CI), with a small budget: each example is a new database
and three new homes.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

import anyio
import psycopg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentctx.core import clock
from agentctx.team.hub import HubError
from agentctx.team.hub import sync as hub_sync
from tests.hub.members import Member, make_team

if TYPE_CHECKING:
    import pytest

    from tests.hub.conftest import Server

OPS = ("record", "profile", "supersede", "retire", "erase", "offline", "sync", "sync")
KEYS = ("test_command", "package_manager")
_examples = itertools.count()


def hub_state(server: Server, db: str) -> tuple[set[str], dict[str, str | None], set[str]]:
    """The hub's versions (not erased), the end of each ended one, the erased ids."""
    with psycopg.connect(server.dsn(dbname=db)) as conn:
        rows = conn.execute(
            "SELECT kind, id, successor, item IS NULL FROM agentctx_hub.log"
        ).fetchall()
        erased = {r[0] for r in conn.execute("SELECT id FROM agentctx_hub.erased").fetchall()}
    versions = {r[1] for r in rows if r[0] == "version"} - erased
    ends: dict[str, str | None] = {}
    for kind, record_id, successor, _blank in rows:
        if kind in ("supersede", "retire"):
            assert record_id not in ends, f"{record_id} ended twice at the hub"
            ends[record_id] = successor
    return versions, ends, erased


async def scenario(server: Server, db: str, folder: Any, ops: list[tuple[str, int, int]]) -> None:
    members = await make_team(server, db, folder, roles={"carol": "maintainer"})
    offline: set[str] = set()
    counter = itertools.count()
    for op, who, pick in ops:
        member = members[who]
        online = member.name not in offline
        if op == "record":
            n = next(counter)
            await member.record(f"Rule {n}", f"Rule {n} of the service, by {member.name}.")
        elif op == "profile":
            n = next(counter)
            key = KEYS[pick % len(KEYS)]
            await member.record(f"Fact {n}", f"{key} is value {n}.", type="profile", key=key)
        elif op in ("supersede", "retire", "erase"):
            records = await member.records(current=True)
            if not records:
                continue
            target = sorted(records)[pick % len(records)]
            if op == "supersede":
                await member.supersede(target, f"{records[target].body} Amended {next(counter)}.")
            elif op == "retire":
                async with member.store() as store, store.transaction() as tx:
                    await tx.execute(
                        "UPDATE records SET superseded_at = ? WHERE id = ? AND superseded_at IS NULL",
                        (clock.now(), target),
                    )
            elif online:
                async with member.store() as store:
                    try:  # a writer may erase only its own versions; unknown ones are refused
                        await hub_sync.erase(store, member.project.project_id, target)
                    except HubError:
                        pass
        elif op == "offline":
            offline ^= {member.name}
        elif online:
            report = await member.sync()
            assert report.error is None, report.error
    for _round in range(3):
        for member in members:
            report = await member.sync()
            assert report.error is None, report.error
    await check(server, db, members)


async def check(server: Server, db: str, members: list[Member]) -> None:
    versions, ends, erased = hub_state(server, db)
    keyed: list[dict[str, list[str]]] = []
    for member in members:
        records = await member.records()
        assert not set(records) & erased, f"{member.name} holds an erased record"
        assert versions <= set(records), f"{member.name} misses {versions - set(records)}"
        for record_id in versions:
            record = records[record_id]
            if record_id not in ends:
                assert record.is_current, (member.name, record_id)
            else:
                assert not record.is_current, (member.name, record_id)
                successor = ends[record_id]
                expected = successor if successor in versions else None
                assert record.superseded_by == expected, (member.name, record_id)
        current_by_key: dict[str, list[str]] = {}
        for record in records.values():
            if record.key is not None and record.is_current:
                current_by_key.setdefault(record.key, []).append(record.id)
        assert all(len(ids) == 1 for ids in current_by_key.values()), (member.name, current_by_key)
        keyed.append(current_by_key)
        successors = [r.superseded_by for r in records.values() if r.superseded_by]
        assert len(successors) == len(set(successors)), f"{member.name}: a version superseded twice"
        for record in records.values():  # no echo: our own records never come back as imports
            if record.source == "import":
                assert record.session_id is not None
                assert not record.session_id.endswith(f" {member.name}"), (member.name, record.id)
    assert all(k == keyed[0] for k in keyed), keyed  # the same current fact per key everywhere


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    ops=st.lists(
        st.tuples(st.sampled_from(OPS), st.integers(0, 2), st.integers(0, 1000)),
        min_size=4,
        max_size=24,
    )
)
def test_random_interleavings_converge_to_the_hub(
    pg_server: Server, tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, int, int]]
) -> None:
    db = f"hub_prop_{next(_examples)}"
    pg_server.admin(f"CREATE DATABASE {db} OWNER hubadmin")
    try:
        folder = tmp_path_factory.mktemp("interleaving")
        anyio.run(scenario, pg_server, db, folder, ops)
    finally:
        pg_server.admin(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
