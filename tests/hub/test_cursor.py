"""A pull cursor never skips a row that a slow writer commits late."""

from __future__ import annotations

import random
import threading
import time
from typing import TYPE_CHECKING, Any

import anyio
import psycopg
import pytest
from psycopg.types.json import Jsonb

from agentctx.team.hub import admin
from agentctx.team.hub.connect import CLIENT
from tests.hub.members import Member, make_checkout

if TYPE_CHECKING:
    from pathlib import Path

    from tests.hub.conftest import Server

pytestmark = pytest.mark.anyio


def item(record_id: str) -> dict[str, Any]:
    record = {
        "type": "decision",
        "title": record_id,
        "body": "b",
        "keywords": "",
        "cues": [],
        "valid_from": "2026-01-01T00:00:00.000Z",
        "recorded_at": "2026-01-01T00:00:00.000Z",
    }
    return {"kind": "version", "id": record_id, "hash": record_id, "record": record}


def pull(dsn: str, project: str, after: int) -> dict[str, Any]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT hub_v1.pull('acme', %s, %s, 500, %s)", (project, after, CLIENT)
        ).fetchone()
    assert row is not None
    result: dict[str, Any] = row[0]
    return result


async def setup(server: Server, db: str, tmp: Path) -> str:
    admin_dsn = server.dsn("hubadmin", db)
    await admin.hub_init(admin_dsn, "acme")
    project = Member("x", tmp / "h", make_checkout(tmp / "src"), "").project.project_id
    await admin.project_add(admin_dsn, "acme", project, "payments")
    for name in ("alice", "bob", "carol"):
        await admin.member_add(admin_dsn, "acme", name, "writer")
    return project


def waiting_on_lock(server: Server, db: str, user: str) -> bool:
    with psycopg.connect(server.dsn(dbname=db), autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE usename = %s AND wait_event_type = 'Lock'",
            (user,),
        ).fetchone()
    return bool(row and row[0])


async def test_a_fast_writer_waits_for_the_slow_one_and_the_cursor_sees_both(
    pg_server: Server, hub_db: str, tmp_path: Path
) -> None:
    project = await setup(pg_server, hub_db, tmp_path)
    slow = psycopg.connect(pg_server.dsn("alice", hub_db))  # a transaction left open: slow
    slow.execute("SELECT hub_v1.push('acme', %s, %s, %s)", (project, Jsonb([item("SLOW")]), CLIENT))
    done = threading.Event()

    def fast() -> None:
        with psycopg.connect(pg_server.dsn("bob", hub_db), autocommit=True) as conn:
            conn.execute(
                "SELECT hub_v1.push('acme', %s, %s, %s)", (project, Jsonb([item("FAST")]), CLIENT)
            )
        done.set()

    thread = threading.Thread(target=fast)
    thread.start()
    deadline = time.monotonic() + 30
    while not waiting_on_lock(pg_server, hub_db, "bob"):
        assert time.monotonic() < deadline, "bob's push never queued behind alice's"
        await anyio.sleep(0.05)
    assert not done.is_set()
    # a reader now sees neither: nothing committed yet, and nothing it could skip later
    early = pull(pg_server.dsn("carol", hub_db), project, 0)
    assert early["items"] == []
    slow.commit()
    slow.close()
    thread.join(30)
    assert done.is_set()
    page = pull(pg_server.dsn("carol", hub_db), project, 0)
    assert [(i["seq"], i["id"]) for i in page["items"]] == [(1, "SLOW"), (2, "FAST")]


def test_concurrent_writers_with_random_delays_never_leave_a_gap(
    pg_server: Server, hub_db: str, tmp_path: Path
) -> None:
    project = anyio.run(setup, pg_server, hub_db, tmp_path)
    rng = random.Random(26)
    plans = {name: [rng.random() * 0.02 for _ in range(15)] for name in ("alice", "bob")}
    errors: list[BaseException] = []

    def writer(name: str) -> None:
        try:
            with psycopg.connect(pg_server.dsn(name, hub_db)) as conn:
                for n, delay in enumerate(plans[name]):
                    conn.execute(
                        "SELECT hub_v1.push('acme', %s, %s, %s)",
                        (project, Jsonb([item(f"{name}-{n}")]), CLIENT),
                    )
                    time.sleep(delay)  # the slow part of a transaction, before its commit
                    conn.commit()
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in plans]
    for thread in threads:
        thread.start()
    cursor, seen = 0, []
    dsn = pg_server.dsn("carol", hub_db)
    while True:
        alive = any(t.is_alive() for t in threads)
        page = pull(dsn, project, cursor)
        seqs = [i["seq"] for i in page["items"]]
        assert seqs == list(range(cursor + 1, cursor + 1 + len(seqs))), "a gap: a row skipped"
        seen += [i["id"] for i in page["items"]]
        cursor = seqs[-1] if seqs else cursor
        if not alive and not seqs:
            break
    for thread in threads:
        thread.join(30)
    assert errors == []
    assert sorted(seen) == sorted(f"{n}-{i}" for n in plans for i in range(15))
