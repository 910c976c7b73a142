"""The team hub's cost on this machine: push and pull of N versions, a member joining, a no-op sync.

Usage, from the repository root (the test venv: psycopg, and PostgreSQL's server binaries;
``python3 -m nox -s bench_hub``)::

    python benchmarks/team_hub.py [--versions 10000] [--join 10000] [--out FILE]

It starts a PostgreSQL of its own (as the hub tests do: ``tests/hub/conftest.py``), makes a team of
two members (two agentctx homes, two login roles), and times with the real client:

* **push**: alice's sync of N new versions (batches of 500, acks stamped per batch);
* **pull**: bob's sync of the same N versions through the import confinement; the records are
  searchable by keywords when it ends (FTS is written with each record); their embeddings wait for
  consolidation (``pending_embedding``), whose rate is the consolidation benchmark's;
* **join**: a third member (carol) pulling a team log of ``--join`` versions from scratch;
* **no-op**: a sync with nothing to push or pull (what a SessionEnd worker adds when nothing
  changed), the median of 10.

Each number is compared with one worker deadline (``WORKER_DEADLINE_S``). Results go to
``benchmarks/results/team_hub.md``.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.hub.conftest import Server, start_server, stop_server  # noqa: E402
from tests.hub.members import Member, make_checkout  # noqa: E402

from agentctx.records import NewRecord  # noqa: E402
from agentctx.store import SearchQuery  # noqa: E402
from agentctx.team.hub import admin  # noqa: E402
from agentctx.workers import WORKER_DEADLINE_S  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "team_hub.md"


async def fill(member: Member, count: int, offset: int = 0) -> None:
    """``count`` shareable decisions in a member's store, written in batches."""
    async with member.store() as store:
        await store.touch_project(member.project)
        for start in range(0, count, 1000):
            async with store.transaction() as tx:
                for n in range(start, min(count, start + 1000)):
                    await tx.add(
                        NewRecord(
                            type="decision",
                            project_id=member.project.project_id,
                            title=f"Decision {offset + n} about the ledger service",
                            body=f"Service {offset + n} writes its ledger entries in batches of {n % 97 + 3}.",
                            keywords=f"ledger batch svc{offset + n}",
                        )
                    )


async def timed_sync(member: Member) -> tuple[float, int, int]:
    began = time.perf_counter()
    report = await member.sync()
    assert report.error is None, report.error
    return time.perf_counter() - began, report.pushed, report.applied


async def run(server: Server, versions: int, join: int, work: Path) -> dict[str, float | int]:
    db = "hub_bench"
    server.admin(f"CREATE DATABASE {db} OWNER hubadmin")
    admin_dsn = server.dsn("hubadmin", db)
    await admin.hub_init(admin_dsn, "bench")
    members = {
        name: Member(
            name, work / f"{name}-home", make_checkout(work / f"{name}-src"), server.dsn(name, db)
        )
        for name in ("alice", "bob", "carol")
    }
    project = members["alice"].project
    await admin.project_add(admin_dsn, "bench", project.project_id, project.name)
    for name, member in members.items():
        await admin.member_add(admin_dsn, "bench", name, "writer")
        await member.link("bench")
    alice, bob, carol = members["alice"], members["bob"], members["carol"]
    await fill(alice, versions)
    push_s, pushed, _ = await timed_sync(alice)
    pull_s, _, applied = await timed_sync(bob)
    async with bob.store() as store:
        hits = await store.search(SearchQuery(text="ledger svc17", project_id=project.project_id))
        assert any(h.record.title.endswith(" 17 about the ledger service") for h in hits.hits)
    if join > versions:
        await fill(bob, join - versions, offset=versions)
        await timed_sync(bob)
    join_s, _, joined = await timed_sync(carol)
    noop = [(await timed_sync(alice))[0] for _ in range(10)]
    return {
        "versions": versions,
        "push_s": push_s,
        "pushed": pushed,
        "pull_s": pull_s,
        "applied": applied,
        "join": join,
        "join_s": join_s,
        "joined": joined,
        "noop_s": statistics.median(noop),
    }


def report(result: dict[str, float | int]) -> str:
    deadline = WORKER_DEADLINE_S
    rows = [
        ("push", result["pushed"], result["push_s"]),
        ("pull (searchable by keywords at the end)", result["applied"], result["pull_s"]),
        ("a new member joins (pull from scratch)", result["joined"], result["join_s"]),
    ]
    lines = [
        "# Team hub: push, pull, join, no-op sync",
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d} on {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, PostgreSQL started by the benchmark (fsync off), "
        "over a unix socket; `python benchmarks/team_hub.py` (`nox -s bench_hub`).",
        "",
        f"| step | versions | seconds | versions/s | within one worker deadline ({deadline:g} s) |",
        "|---|---|---|---|---|",
    ]
    for name, count, seconds in rows:
        rate = float(count) / float(seconds) if seconds else 0.0
        fits = "yes" if float(seconds) < deadline else "no: chunked, resumes at the next sync"
        lines.append(f"| {name} | {count} | {float(seconds):.1f} | {rate:.0f} | {fits} |")
    lines += [
        "",
        f"A sync with nothing to do (connect, whoami, an empty pull): {float(result['noop_s']) * 1000:.0f} ms "
        "(median of 10): what a SessionEnd worker adds when nothing changed.",
        "",
        "Embedding is not part of a sync: pulled records are pending until consolidation embeds "
        "them at its own rate (`benchmarks/results/consolidate.md`); keyword search finds them "
        "as soon as the pull's transaction commits.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--versions", type=int, default=10_000)
    parser.add_argument("--join", type=int, default=10_000)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    server = start_server()
    try:
        with tempfile.TemporaryDirectory(prefix="agentctx-bench-hub-") as tmp:
            os.environ["AGENTCTX_HOME"] = str(Path(tmp) / "unused-home")
            result = anyio.run(run, server, args.versions, args.join, Path(tmp))
    finally:
        stop_server(server)
    text = report(result)
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
