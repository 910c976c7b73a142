"""When sync runs: the SessionEnd worker, the worker SessionStart starts, and the hook's cost."""

from __future__ import annotations

import os
import statistics
import time
from typing import TYPE_CHECKING

import psycopg
import pytest

from agentctx.core import hubstamp
from agentctx.team.hub import local
from tests import helpers
from tests.hub.members import Member, make_checkout, make_team

if TYPE_CHECKING:
    from pathlib import Path

    from tests.hub.conftest import Server

pytestmark = pytest.mark.anyio


def hub_versions(server: Server, db: str) -> int:
    with psycopg.connect(server.dsn(dbname=db)) as conn:
        row = conn.execute(
            "SELECT count(*) FROM agentctx_hub.log WHERE kind = 'version'"
        ).fetchone()
    return int(row[0]) if row else 0


def wait_for_line(path: Path, text: str, timeout: float = 60) -> str:
    """The log's text once it holds ``text`` (polled with a deadline)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = path.read_text() if path.exists() else ""
        if text in found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"{text!r} never reached {path}: {found!r}")


def quiet(member: Member) -> None:
    """No model downloads in the workers' consolidation (offline machine)."""
    result = member.cli("config", "set", "embeddings", "off")
    assert result.returncode == 0, result.stderr


async def test_the_session_end_worker_pushes_and_the_session_start_worker_pulls(
    pg_server: Server, hub_db: str, tmp_path: Path
) -> None:
    alice, bob, _carol = await make_team(pg_server, hub_db, tmp_path)
    for member in (alice, bob):
        quiet(member)
    mine = await alice.record("Feature flags", "Feature flags live in the flags service.")
    done = alice.cli("worker", "session-end", "--project", alice.project.project_id, "--no-extract")
    assert done.returncode == 0, done.stderr
    assert "team sync acme: pushed 1 version(s)" in done.stderr
    assert hub_versions(pg_server, hub_db) == 1
    # bob's SessionStart: the stamp is old, so the hook starts the team-sync worker detached
    stamp = bob.home / hubstamp.STAMP
    old = time.time() - hubstamp.SYNC_EVERY_S - 5
    os.utime(stamp, (old, old))
    result = helpers.run_hook(
        "session-start",
        helpers.payload("SessionStart", "s-b", bob.checkout, source="startup"),
        env=bob.env,
        cwd=bob.checkout,
    )
    assert result.returncode == 0
    wait_for_line(bob.home / "logs" / "workers.log", "team sync acme: pushed 0 version(s)")
    assert mine.id in await bob.records()
    assert stamp.stat().st_mtime > old + 5  # stamped: the next start does not sync again


async def test_session_start_with_a_dead_hub_costs_what_it_costs_without_one(
    pg_server: Server, hub_db: str, tmp_path: Path
) -> None:
    plain = Member("plain", tmp_path / "plain-home", make_checkout(tmp_path / "plain-src"), "")
    linked = Member(
        "dead",
        tmp_path / "dead-home",
        make_checkout(tmp_path / "dead-src"),
        "host=127.0.0.1 port=9 dbname=nohub user=nobody",
    )
    for member in (plain, linked):
        await member.record("Something", "Something worth a digest.")
        quiet(member)
    async with linked.store() as store:
        await local.save_link(
            store,
            linked.project.project_id,
            team="acme",
            info=linked.dsn,
            name="dead",
            role_name="nobody",
            role="writer",
            epoch="e",
        )
        hubstamp.touch()

    def start(member: Member, n: int) -> float:
        began = time.perf_counter()
        result = helpers.run_hook(
            "session-start",
            helpers.payload("SessionStart", f"s-{n}", member.checkout, source="startup"),
            env=member.env,
            cwd=member.checkout,
        )
        took = time.perf_counter() - began
        assert helpers.contract(result, "SessionStart") is not None
        return took

    old = time.time() - hubstamp.SYNC_EVERY_S - 5
    times: dict[str, list[float]] = {"plain": [], "dead": []}
    for n in range(5):  # interleaved, so machine load hits both alike
        os.utime(
            linked.home / hubstamp.STAMP, (old, old)
        )  # due every time: the worker starts each time
        times["dead"].append(start(linked, n))
        times["plain"].append(start(plain, n))
    dead, base = statistics.median(times["dead"]), statistics.median(times["plain"])
    # the hook only stats a file and forks: no connection is waited for
    # (a hook that waited for the hub would take its 5 s connect timeout; the bound is loose so
    # that a loaded machine does not fail it at random)
    assert dead < base * 2 + 0.3, times
    log = wait_for_line(linked.home / "logs" / "workers.log", "cannot be reached")
    assert "Traceback" not in log
