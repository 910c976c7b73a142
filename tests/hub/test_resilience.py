"""Erasures that stick, crashes that duplicate nothing, a hub that goes down or is restored."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from typing import TYPE_CHECKING

import anyio
import psycopg
import pytest

from agentctx.records import NewRecord
from agentctx.team.hub import hubpause, local
from agentctx.team.hub import sync as hub_sync
from tests.hub.members import Member, make_team

if TYPE_CHECKING:
    from pathlib import Path

    from tests.hub.conftest import Server

pytestmark = pytest.mark.anyio


def hub_count(server: Server, db: str, where: str = "kind = 'version'") -> int:
    with psycopg.connect(server.dsn(dbname=db)) as conn:
        row = conn.execute(f"SELECT count(*) FROM agentctx_hub.log WHERE {where}").fetchone()
    return int(row[0]) if row else 0


async def forget_acks(member: Member) -> None:
    """As if the member's home were restored from a backup taken before its last push."""
    async with member.store() as store, store.transaction() as tx:
        await tx.execute("DELETE FROM hub_items WHERE origin = 'local'")
        await tx.execute("DELETE FROM hub_ends")


async def test_an_erased_record_never_comes_back(
    pg_server: Server, hub_db: str, tmp_path: Path
) -> None:
    alice, bob, carol = await make_team(pg_server, hub_db, tmp_path, roles={"carol": "maintainer"})
    gone = await alice.record("Old vendor", "We buy from the old vendor.")
    kept = await alice.record("New vendor", "We buy from the new vendor.")
    for member in (alice, bob, carol):
        await member.sync()
    # bob goes offline and supersedes it; carol (a maintainer) erases it meanwhile, by the CLI
    by_bob = await bob.supersede(gone.id, "We buy from the old vendor, on Fridays.")
    result = carol.cli("team", "erase", gone.id)
    assert result.returncode == 0, result.stderr
    assert gone.id not in await carol.records()
    # alice, whose home came back from an old backup, pushes it again: refused, removed here
    await forget_acks(alice)
    report = await alice.sync()
    assert {"id": gone.id, "kind": "version", "reason": "erased"} in report.refused
    assert gone.id not in await alice.records() and kept.id in await alice.records()
    # bob comes back: his supersession is refused (deletion wins), the record leaves his store,
    # his own new version stays his and current
    report = await bob.sync()
    assert any(r["id"] == gone.id and r["kind"] == "supersede" for r in report.refused)
    mine = await bob.records()
    assert gone.id not in mine and mine[by_bob.id].is_current
    for member in (alice, bob, carol):
        await member.sync()
        assert gone.id not in await member.records(), member.name
    assert hub_count(pg_server, hub_db, f"id = '{gone.id}' AND item IS NOT NULL") == 0


def paused_worker(
    member: Member, point: str, tmp_path: Path
) -> tuple[subprocess.Popen[bytes], Path]:
    """The real ``agentctx worker team-sync`` in a process of its own, told to pause at ``point``
    (:mod:`agentctx.team.hub.hubpause`); the file it writes when it gets there."""
    marker = tmp_path / f"{member.name}-{point}.pid"
    child = subprocess.Popen(
        [sys.executable, "-m", "agentctx", "worker", "team-sync"],
        cwd=member.checkout,
        env={**os.environ, **member.env, hubpause.VARIABLE: f"{point}:{marker}"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return child, marker


def kill_when_paused(
    child: subprocess.Popen[bytes], marker: Path, busy: Member | None = None
) -> None:
    """Wait until the worker is at its pause point, then SIGKILL it (blocking: the worker is
    another process, this one has nothing to do meanwhile). ``busy``: the worker's member, whose
    sync by hand meanwhile must be refused (one sync at a time per home)."""
    deadline = time.monotonic() + 120
    while not marker.exists():
        assert child.poll() is None, "the worker ended before it reached its pause point"
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert int(marker.read_text()) == child.pid
    if busy is not None:
        result = busy.cli("team", "sync")
        assert result.returncode == 1, result
        assert "another team sync of this home is running" in result.stdout + result.stderr
    child.send_signal(signal.SIGKILL)
    child.wait(30)
    assert child.returncode == -signal.SIGKILL


async def test_kill_9_between_the_hub_commit_and_the_local_stamp_duplicates_nothing(
    pg_server: Server, hub_db: str, tmp_path: Path
) -> None:
    alice, bob, _carol = await make_team(pg_server, hub_db, tmp_path)
    for n in range(3):
        await alice.record(f"Rule {n}", f"Rule number {n} of the payments service.")
    worker, marker = paused_worker(alice, "push-acked", tmp_path)
    kill_when_paused(worker, marker, busy=alice)
    assert hub_count(pg_server, hub_db) == 3  # the hub committed the batch
    async with alice.store() as store:  # the stamp's transaction died with the process
        assert len(await local.pending_versions(store, alice.project.project_id)) == 3
        assert await store.rows("SELECT * FROM hub_items") == []
    report = await alice.sync()  # re-pushed: acked as duplicates, nothing twice at the hub
    assert (report.error, report.pushed, report.duplicates) == (None, 0, 3)
    assert hub_count(pg_server, hub_db) == 3
    async with alice.store() as store:
        assert await local.pending_versions(store, alice.project.project_id) == []
    assert len(await alice.records()) == 3  # nothing echoed back as a copy
    assert (await bob.sync()).applied == 3
    assert len(await bob.records()) == 3


async def test_a_backend_terminated_mid_push_leaves_nothing_half_written(
    pg_server: Server, hub_db: str, tmp_path: Path
) -> None:
    alice, bob, _carol = await make_team(pg_server, hub_db, tmp_path)
    for n in range(3):
        await alice.record(f"Limit {n}", f"Rate limit number {n}.")
    # bob holds the team's counter row, so alice's push waits inside its transaction
    holder = psycopg.connect(bob.dsn)
    holder.execute(
        "SELECT hub_v1.push('acme', %s, '[]'::jsonb, %s)", (alice.project.project_id, "0.1.0")
    )

    def terminate() -> None:
        deadline = time.monotonic() + 30
        with psycopg.connect(pg_server.dsn(dbname=hub_db), autocommit=True) as conn:
            while time.monotonic() < deadline:
                row = conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE usename = 'alice' AND wait_event_type = 'Lock'"
                ).fetchone()
                if row and row[0]:
                    return
                time.sleep(0.05)

    killer = threading.Thread(target=terminate)
    killer.start()
    report = await alice.sync()
    killer.join(30)
    holder.rollback()
    holder.close()
    assert report.error is not None and "connection" in report.error
    assert hub_count(pg_server, hub_db) == 0  # rolled back whole
    async with alice.store() as store:
        assert len(await local.pending_versions(store, alice.project.project_id)) == 3
    report = await alice.sync()
    assert (report.error, report.pushed) == (None, 3)
    assert hub_count(pg_server, hub_db) == 3


async def test_kill_9_in_the_middle_of_a_pulled_page_applies_nothing_of_it(
    pg_server: Server, hub_db: str, tmp_path: Path
) -> None:
    alice, bob, _carol = await make_team(pg_server, hub_db, tmp_path)
    for n in range(5):
        await alice.record(f"Endpoint {n}", f"Endpoint {n} is versioned in its path.")
    await alice.sync()
    worker, marker = paused_worker(bob, "pull-applying", tmp_path)
    kill_when_paused(worker, marker)  # the page is half written in an open transaction
    assert await bob.records() == {}
    async with bob.store() as store:
        link = await local.link_of(store, bob.project.project_id)
        assert await store.rows("SELECT * FROM hub_items") == []
    assert link is not None and link["cursor"] == 0
    report = await bob.sync()
    assert (report.error, report.applied) == (None, 5)
    assert len(await bob.records()) == 5


async def test_the_hub_down_then_back(pg_server: Server, hub_db: str, tmp_path: Path) -> None:
    alice, bob, _carol = await make_team(pg_server, hub_db, tmp_path)
    pg_server.ctl("stop")
    try:
        mine = await alice.record("Offline decision", "Decided while the hub was down.")
        started = time.monotonic()
        report = await alice.sync()
        assert time.monotonic() - started < 15
        assert report.error is not None and "cannot be reached" in report.error
        assert "\n" not in report.error
        async with alice.store() as store:
            link = await local.link_of(store, alice.project.project_id)
            assert link is not None and link["failures"] == 1
            # the background worker backs off; a sync by hand still tries
            assert await hub_sync.sync_all(store, background=True) == []
        result = alice.cli("team", "sync")
        assert result.returncode == 1 and "cannot be reached" in result.stdout
    finally:
        pg_server.ctl("start")
    report = await alice.sync()
    assert (report.error, report.pushed) == (None, 1)
    assert (await bob.sync()).applied == 1
    assert mine.id in await bob.records()


async def test_the_hub_restored_from_an_older_dump(
    pg_server: Server, hub_db: str, tmp_path: Path
) -> None:
    alice, bob, carol = await make_team(pg_server, hub_db, tmp_path)
    early = await alice.record("Early", "Recorded before the dump.")
    for member in (alice, bob, carol):
        await member.sync()
    dump = os.path.join(pg_server.folder, "log", f"{hub_db}.dump")
    pg_server.run(
        "pg_dump",
        "-h",
        pg_server.sockets,
        "-p",
        str(pg_server.port),
        "-U",
        "postgres",
        "-Fc",
        "-f",
        dump,
        hub_db,
    )
    late = await bob.record("Late", "Recorded after the dump.")
    later = await carol.supersede(early.id, "Recorded before the dump, amended.")
    for member in (bob, carol, alice):
        await member.sync()
    # the hub's database is lost; the operator restores the dump into a new one
    restored = f"{hub_db}_restored"
    pg_server.admin(f"CREATE DATABASE {restored} OWNER hubadmin")
    pg_server.run(
        "pg_restore",
        "-h",
        pg_server.sockets,
        "-p",
        str(pg_server.port),
        "-U",
        "postgres",
        "-d",
        restored,
        dump,
    )
    try:
        for member in (alice, bob, carol):
            member.dsn = pg_server.dsn(member.name, restored)
            # the service file now names the new host
            async with member.store() as store, store.transaction() as tx:
                await tx.execute("UPDATE hub_links SET conninfo = ?", (member.dsn,))
        reports = [await m.sync() for m in (alice, bob, carol)]
        assert all(r.reset and r.error is None for r in reports)
        for member in (alice, bob, carol):
            await member.sync()
        states = []
        for member in (alice, bob, carol):
            records = await member.records()
            assert {early.id, late.id, later.id} <= set(records), member.name
            states.append({i: (records[i].superseded_by) for i in (early.id, late.id, later.id)})
        assert states[0] == states[1] == states[2]
        assert states[0][early.id] == later.id
        assert hub_count(pg_server, restored) == 3
    finally:
        pg_server.admin(f"DROP DATABASE IF EXISTS {restored} WITH (FORCE)")


async def test_a_push_stops_between_batches_at_the_deadline_and_resumes(
    pg_server: Server, hub_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    alice, bob, _carol = await make_team(pg_server, hub_db, tmp_path)
    async with alice.store() as store, store.transaction() as tx:
        for n in range(1200):
            await tx.add(
                NewRecord(
                    type="decision",
                    project_id=alice.project.project_id,
                    title=f"Batch rule {n}",
                    body=f"Rule {n} of the batch.",
                )
            )
    checks = 0

    def one_batch_left(deadline: float | None) -> bool:
        nonlocal checks
        checks += 1
        return checks == 1  # time for the first batch only, then the deadline has come

    with monkeypatch.context() as patch:
        patch.setattr(hub_sync, "_time_left", one_batch_left)
        report = await alice.sync(deadline=time.monotonic() + 30)
    assert not report.complete and report.pushed == 500
    assert hub_count(pg_server, hub_db) == 500  # whole batches only
    rest = await alice.sync()
    assert rest.complete and report.pushed + rest.pushed == 1200 and rest.duplicates == 0
    assert hub_count(pg_server, hub_db) == 1200
    assert (await bob.sync()).applied == 1200


async def test_kill_9_during_a_pull_leaves_whole_pages_only(
    pg_server: Server, hub_db: str, tmp_path: Path
) -> None:
    alice, bob, _carol = await make_team(pg_server, hub_db, tmp_path)
    async with alice.store() as store, store.transaction() as tx:
        for n in range(2000):
            await tx.add(
                NewRecord(
                    type="decision",
                    project_id=alice.project.project_id,
                    title=f"Kill rule {n}",
                    body=f"Rule {n}, pulled page by page.",
                )
            )
    assert (await alice.sync()).pushed == 2000
    child = subprocess.Popen(  # noqa: ASYNC220 - a real process, to kill -9
        [sys.executable, "-m", "agentctx", "team", "sync"],
        cwd=bob.checkout,
        env={**os.environ, **bob.env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    db = str(bob.home / "agentctx.db")

    def cursor() -> int:
        try:
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as conn:
                row = conn.execute("SELECT cursor FROM hub_links").fetchone()
        except sqlite3.Error:
            return 0
        return int(row[0]) if row else 0

    deadline = time.monotonic() + 120
    while cursor() == 0:  # the first page is applied
        assert child.poll() is None, "the sync ended before it could be killed"
        assert time.monotonic() < deadline
        await anyio.sleep(0.02)
    child.send_signal(signal.SIGKILL)
    child.wait(30)
    assert child.returncode == -signal.SIGKILL
    at = cursor()
    records = await bob.records()
    assert 0 < at < 2000 and at % 500 == 0, at  # whole pages only, the cursor with them
    assert len(records) == at
    report = await bob.sync()
    assert report.error is None and report.applied == 2000 - at
    assert len(await bob.records()) == 2000
