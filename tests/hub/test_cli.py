"""The admin's and the member's commands through the real CLI, with --json."""

from __future__ import annotations

import json
import sqlite3
from typing import TYPE_CHECKING

import psycopg
import pytest

from tests import helpers
from tests.hub.members import Member, make_checkout

if TYPE_CHECKING:
    from pathlib import Path

    from tests.hub.conftest import Server


def test_hub_init_members_projects_link_sync_status_conflicts_unlink(
    pg_server: Server, hub_db: str, tmp_path: Path
) -> None:
    admin_dsn = pg_server.dsn("hubadmin", hub_db)
    boss = Member(
        "hubadmin", tmp_path / "admin-home", make_checkout(tmp_path / "admin-src"), admin_dsn
    )
    first = boss.cli("team", "hub-init", "--dsn", admin_dsn, "--team", "acme", "--json")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout) == {
        "schema": 2,
        "was": None,
        "team": "acme",
        "admin": "hubadmin",
    }
    again = boss.cli("team", "hub-init", "--dsn", admin_dsn, "--team", "acme")
    assert again.returncode == 0 and again.stdout.startswith("hub schema 2 (upgraded from 2)")
    with psycopg.connect(pg_server.dsn(dbname=hub_db)) as conn:  # the owner: NOLOGIN, no BYPASSRLS
        assert conn.execute(
            "SELECT rolcanlogin, rolbypassrls FROM pg_roles WHERE rolname = 'agentctx_hub_owner'"
        ).fetchone() == (False, False)
        assert conn.execute(
            "SELECT bool_and(relforcerowsecurity) FROM pg_class c JOIN pg_namespace n "
            "ON n.oid = c.relnamespace WHERE n.nspname = 'agentctx_hub' AND c.relkind = 'r'"
        ).fetchone() == (True,)
    for name, role in (("alice", "writer"), ("bob", "reader")):
        added = boss.cli(
            "team", "member", "add", name, "--role", role, "--dsn", admin_dsn, "--team", "acme"
        )
        assert added.returncode == 0 and added.stdout.strip() == f"{name} is a {role} of acme"
    listed = boss.cli("team", "project", "add", "--dsn", admin_dsn, "--team", "acme")
    assert listed.returncode == 0, listed.stderr

    alice = Member(
        "alice",
        tmp_path / "alice-home",
        make_checkout(tmp_path / "alice-src"),
        pg_server.tcp_dsn("alice", hub_db),
    )
    with_password = alice.cli(
        "team", "link", "--dsn", alice.dsn + " password=hunter2", "--team", "acme"
    )
    assert with_password.returncode == 1 and "~/.pgpass" in with_password.stderr
    linked = alice.cli("team", "link", "--dsn", alice.dsn, "--team", "acme")
    assert linked.returncode == 0, linked.stderr
    recorded = alice.cli(
        "record",
        "--type",
        "convention",
        "--title",
        "Money is integer cents",
        "--body",
        "Amounts are stored as integer cents, never floats.",
    )
    assert recorded.returncode == 0, recorded.stderr
    status = json.loads(alice.cli("team", "status", "--json").stdout)
    assert [(s["team"], s["role"], s["waiting"]["versions"]) for s in status] == [
        ("acme", "writer", 1)
    ]
    assert "conninfo" not in status[0] and "password" not in json.dumps(status)
    synced = alice.cli("team", "sync", "--json")
    assert synced.returncode == 0, synced.stderr
    assert [(r["pushed"], r["error"]) for r in json.loads(synced.stdout)] == [(1, None)]
    assert json.loads(alice.cli("team", "conflicts", "--json").stdout) == []
    # bob (a reader) links by a service of libpq's service file: only its name is kept here
    services = tmp_path / "pg_service.conf"
    services.write_text(
        f"[acme-hub]\nhost={pg_server.sockets}\nport={pg_server.port}\nuser=bob\ndbname={hub_db}\n"
    )
    bob = Member("bob", tmp_path / "bob-home", make_checkout(tmp_path / "bob-src"), "")
    bob_env = {**bob.env, "PGSERVICEFILE": str(services)}
    by_service = helpers.run_cli(
        "team", "link", "--service", "acme-hub", "--team", "acme", cwd=bob.checkout, env=bob_env
    )
    assert by_service.returncode == 0, by_service.stderr
    pulled = helpers.run_cli("team", "sync", "--json", cwd=bob.checkout, env=bob_env)
    assert [(r["applied"], r["pushed"], r["error"]) for r in json.loads(pulled.stdout)] == [
        (1, 0, None)
    ]
    with sqlite3.connect(bob.home / "agentctx.db") as db:
        assert db.execute("SELECT conninfo, role FROM hub_links").fetchall() == [
            ("service=acme-hub", "reader")
        ]
    text = alice.cli("team", "status").stdout
    assert "team acme" in text and "waiting     0 version(s), 0 event(s)" in text
    doctor = alice.cli("doctor", "--json")
    found = [c for c in json.loads(doctor.stdout) if c["name"] == "team hub acme"]
    assert len(found) == 1 and "reachable as alice (writer)" in found[0]["detail"]
    assert "waiting 0 version(s), 0 event(s)" in found[0]["detail"]
    assert "last sync " in found[0]["detail"] and "last sync never" not in found[0]["detail"]
    assert found[0]["ok"] is None and "not encrypted" in found[0]["detail"]  # no TLS here
    unlinked = alice.cli("team", "unlink")
    assert unlinked.returncode == 0 and "unlinked" in unlinked.stdout
    assert not (alice.home / "hub-sync.stamp").exists()
    assert "not linked" in alice.cli("team", "sync").stderr


@pytest.mark.parametrize("command", [["team", "status"], ["team", "sync"]])
def test_a_member_of_no_team_gets_one_line(
    pg_server: Server, hub_db: str, tmp_path: Path, command: list[str]
) -> None:
    eve = Member(
        "eve",
        tmp_path / "eve-home",
        make_checkout(tmp_path / "eve-src"),
        pg_server.dsn("eve", hub_db),
    )
    result = eve.cli("team", "link", "--dsn", eve.dsn, "--team", "acme")
    assert result.returncode == 1 and len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr
    assert eve.cli(*command).returncode in (0, 1)
