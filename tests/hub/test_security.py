"""Rights and walls: readers, forged authors, other teams, unlisted projects, secrets, old clients."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import psycopg
import pytest

from agentctx.core.handles import handle
from agentctx.team.hub import HubError, admin, connect
from tests.hub.members import Member, make_checkout, make_team

if TYPE_CHECKING:
    from pathlib import Path

    from tests.hub.conftest import Server

pytestmark = pytest.mark.anyio
SECRET = "AKIAIOSFODNN7EXAMPLE"


def version(record_id: str, body: str, **extra: object) -> dict[str, object]:
    """A version item as an older or hostile client might send it (no redaction)."""
    record = {
        "type": "decision",
        "title": "t",
        "body": body,
        "keywords": "",
        "key": None,
        "rationale": None,
        "valid_from": "2026-01-01T00:00:00.000Z",
        "recorded_at": "2026-01-01T00:00:00.000Z",
        "cues": [],
        **extra,
    }
    return {"kind": "version", "id": record_id, "hash": "h-" + record_id, "record": record}


async def call(member: Member, function: str, *args: object) -> object:
    async with connect.Session(member.dsn) as hub:
        return await hub.call(function, *args)


def hub_rows(server: Server, db: str, sql: str) -> list[tuple[object, ...]]:
    with psycopg.connect(server.dsn(dbname=db)) as conn:
        return list(conn.execute(sql).fetchall())


async def test_a_reader_cannot_push_and_its_sync_only_pulls(
    pg_server: Server, hub_db: str, tmp_path: Path
) -> None:
    alice, _bob, carol = await make_team(pg_server, hub_db, tmp_path, roles={"carol": "reader"})
    project = carol.project.project_id
    with pytest.raises(HubError, match="reader of team acme: it may not push"):
        await call(carol, "push", "acme", project, [version("R1", "x")], connect.CLIENT)
    await carol.record("Reader's note", "A note the reader wrote.")
    shared = await alice.record("Writer's note", "A note the writer wrote.")
    await alice.sync()
    report = await carol.sync()
    assert report.error is None and report.pushed == 0 and report.applied == 1
    assert hub_rows(pg_server, hub_db, "SELECT id FROM agentctx_hub.log") == [(shared.id,)]


async def test_the_author_is_the_login_role_never_the_payload(
    pg_server: Server, hub_db: str, tmp_path: Path
) -> None:
    alice, bob, _carol = await make_team(pg_server, hub_db, tmp_path)
    project = alice.project.project_id
    acks = await call(
        alice,
        "push",
        "acme",
        project,
        [version("F1", "forged", author="bob", source="cli", pinned=True)],
        connect.CLIENT,
    )
    assert acks["acks"][0]["status"] == "ok"  # type: ignore[index]
    assert hub_rows(pg_server, hub_db, "SELECT author FROM agentctx_hub.log") == [("alice",)]
    await bob.sync()
    got = (await bob.records())["F1"]
    assert got.session_id is not None and got.session_id.endswith(" alice")
    assert (got.source, got.pinned) == ("import", False)
    # no table privilege at all: the functions are the only door
    with psycopg.connect(alice.dsn) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute(
            "INSERT INTO agentctx_hub.log(team, seq, kind, id, project, author) "
            "VALUES ('acme', 99, 'version', 'X', 'p', 'bob')"
        )
    # a supersession whose new version is someone else's, or the old one itself, is refused
    await call(bob, "push", "acme", project, [version("B1", "bob's")], connect.CLIENT)
    for successor in ("B1", "F1"):
        item = {"kind": "supersede", "id": "F1", "successor": successor}
        acks = await call(alice, "push", "acme", project, [item], connect.CLIENT)
        assert acks["acks"][0]["status"] == "refused"  # type: ignore[index]


async def test_another_team_cannot_read_write_or_guess(
    pg_server: Server, hub_db: str, tmp_path: Path
) -> None:
    alice, _bob, _carol = await make_team(pg_server, hub_db, tmp_path)
    await alice.record("Acme secret plan", "Only acme may read this.")
    await alice.sync()
    admin_dsn = pg_server.dsn("hubadmin", hub_db)
    await admin.hub_init(admin_dsn, "other")
    await admin.member_add(admin_dsn, "other", "dave", "admin")
    dave = Member(
        "dave",
        tmp_path / "dave-home",
        make_checkout(tmp_path / "dave-src"),
        pg_server.dsn("dave", hub_db),
    )
    project = alice.project.project_id
    # the functions refuse, with the same line for a team that exists and one that does not
    for team in ("acme", "no-such-team"):
        with pytest.raises(HubError, match=f"role dave is not a member of team {team}$"):
            await call(dave, "pull", team, project, 0, 100, connect.CLIENT)
        with pytest.raises(HubError, match="not a member"):
            await call(dave, "push", team, project, [version("D1", "x")], connect.CLIENT)
        with pytest.raises(HubError, match="not a member"):
            await call(dave, "member_add", team, "dave", "admin", connect.CLIENT)
    # RLS, the second wall: given a table grant by mistake, dave still sees no acme row
    pg_server.admin(
        "GRANT USAGE ON SCHEMA agentctx_hub TO dave; "
        "GRANT SELECT ON ALL TABLES IN SCHEMA agentctx_hub TO dave",
        hub_db,
    )
    with psycopg.connect(dave.dsn) as conn:
        assert conn.execute("SELECT count(*) FROM agentctx_hub.log").fetchone() == (0,)
        assert conn.execute("SELECT team FROM agentctx_hub.teams").fetchall() == [("other",)]
        assert conn.execute("SELECT role_name FROM agentctx_hub.members").fetchall() == [("dave",)]
    # alice has no grant: the functions only
    with psycopg.connect(alice.dsn) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute("SELECT count(*) FROM agentctx_hub.log")


async def test_an_unlisted_project_is_never_pushed(
    pg_server: Server, hub_db: str, tmp_path: Path
) -> None:
    alice, _bob, _carol = await make_team(pg_server, hub_db, tmp_path)
    other = make_checkout(tmp_path / "alice-other", "https://git.example.com/acme/private.git")
    linking = Member("alice", alice.home, other, alice.dsn)
    result = linking.cli("team", "link", "--dsn", alice.dsn, "--team", "acme")
    assert result.returncode == 1
    assert "is not listed in team acme" in result.stderr and "Traceback" not in result.stderr
    await linking.record("Private", "A record of the unlisted project.")
    with pytest.raises(HubError, match="is not listed"):
        await call(
            linking,
            "push",
            "acme",
            linking.project.project_id,
            [version("U1", "x")],
            connect.CLIENT,
        )
    await alice.record("Listed", "A record of the listed project.")
    await alice.sync()
    bodies = [
        r[0] for r in hub_rows(pg_server, hub_db, "SELECT item->>'body' FROM agentctx_hub.log")
    ]
    assert bodies == ["A record of the listed project."]


async def test_a_planted_secret_is_refused_both_ways(
    pg_server: Server, hub_db: str, tmp_path: Path
) -> None:
    alice, bob, _carol = await make_team(pg_server, hub_db, tmp_path)
    project = alice.project.project_id
    # an older client that does not redact: the hub's tripwire refuses the item
    acks = await call(
        alice, "push", "acme", project, [version("S1", f"the key is {SECRET}")], connect.CLIENT
    )
    assert acks["acks"][0] == {"ref": "S1", "status": "refused", "reason": "secret"}  # type: ignore[index]
    # this client: a secret that reached the store under older rules is redacted again on the way
    mine = await alice.record("Deploy key", "Deploys use the key below.")
    async with alice.store() as store:  # as if written before a rule existed
        await store.write_sync(
            lambda conn: conn.execute(
                "UPDATE records SET body = ? WHERE id = ?", (f"Deploys use {SECRET}.", mine.id)
            )
        )
    report = await alice.sync()
    assert report.pushed == 1 and report.refused == []
    stored = hub_rows(pg_server, hub_db, "SELECT item::text FROM agentctx_hub.log")
    assert SECRET not in json.dumps(stored)
    # pulled text is checked too: a secret already at the hub is redacted when it lands here
    pg_server.admin(
        "INSERT INTO agentctx_hub.log(team, seq, kind, id, project, author, hash, item) "
        f"VALUES ('acme', 100, 'version', 'S2', '{project}', 'alice', 'h', "
        f'\'{{"type": "decision", "title": "old", "body": "key {SECRET}", '
        '"valid_from": "2026-01-01T00:00:00.000Z", "recorded_at": "2026-01-01T00:00:00.000Z"}\'); '
        "UPDATE agentctx_hub.teams SET head = 100",
        hub_db,
    )
    await bob.sync()
    got = await bob.records()
    assert "S2" in got and SECRET not in got["S2"].body


async def test_a_client_older_than_the_minimum_gets_one_line(
    pg_server: Server, hub_db: str, tmp_path: Path
) -> None:
    alice, _bob, _carol = await make_team(pg_server, hub_db, tmp_path)
    await admin.set_min_client(pg_server.dsn("hubadmin", hub_db), "9.0")
    report = await alice.sync()
    assert report.error is not None and "older than this hub's minimum 9.0" in report.error
    result = alice.cli("team", "sync")
    assert result.returncode == 1
    lines = result.stdout.strip().splitlines() + result.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install -U" in lines[0], lines
    # the hooks are unaffected: they never talk to the hub
    mine = await alice.record(
        "Payments retry with exponential backoff",
        "The payments client retries idempotent calls with exponential backoff and jitter.",
        keywords="payments retry backoff jitter",
    )
    injected = alice.prompt("how do payments retry, with backoff and jitter?")
    assert injected is not None and f"id {handle(mine.id)}" in injected
