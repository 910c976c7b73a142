"""The team hub's cost on this machine: push and pull of N versions, a member joining, a no-op sync.

Usage, from the repository root (the test venv: psycopg, the offline test model, and PostgreSQL's
server binaries; ``python3 -m nox -s bench_hub``)::

    python benchmarks/team_hub.py [--versions 10000] [--join 100000] [--embed-sample 512] [--out FILE]

It starts a PostgreSQL of its own (as the hub tests do: ``tests/hub/conftest.py``), makes a team of
three members (three agentctx homes, three login roles), and times with the real client:

* **push**: alice's sync of N new versions (batches of 500, acks stamped per batch), compared with
  one worker deadline (``WORKER_DEADLINE_S``);
* **pull**: bob's sync of the same N versions through the import confinement; the records are
  searchable by keywords when it ends (FTS is written with each record);
* **join**: alice brings the team's log to ``--join`` versions, a fifth of them later versions that
  supersede earlier ones (pushed by the real client), then a new member (carol) pulls it all from
  scratch: the time until every current record is searchable by keywords (the pull's end: each
  page of 500 is searchable when its transaction commits), then the time until embedded: the real
  ``embed_pending`` with the offline all-MiniLM-L6-v2 (the default model's family) embeds
  ``--embed-sample`` records of carol's store, which must all be current versions (current first);
  the time for all current records and for all records is that rate extrapolated (embedding 100K
  records takes tens of CPU minutes: it is consolidation's work, at its own pace);
* **no-op**: a sync with nothing to push or pull (what a SessionEnd worker adds when nothing
  changed), the median of 10.

The load average is read before and after each step (the machine is shared). Results go to
``benchmarks/results/team_hub.md``.
"""

from __future__ import annotations

import argparse
import math
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

import minilm  # noqa: E402
from agentctx.records import NewRecord  # noqa: E402
from agentctx.store import SearchQuery  # noqa: E402
from agentctx.team.hub import admin  # noqa: E402
from agentctx.workers import WORKER_DEADLINE_S  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "team_hub.md"


def server_cpu(server: Server) -> float:
    """CPU seconds the benchmark's PostgreSQL has used so far: the postmaster's own and its
    reaped children's (the backends of closed connections), and its live children's."""
    tick = os.sysconf("SC_CLK_TCK")
    with open(os.path.join(server.folder, "data", "postmaster.pid")) as handle:
        postmaster = int(handle.readline())

    def times(pid: int) -> tuple[int, float]:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        # after the name: state, ppid, ... utime, stime, cutime, cstime (fields 14 to 17 of proc(5))
        return int(fields[1]), sum(int(v) for v in fields[11:15]) / tick

    total = times(postmaster)[1]
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != postmaster:
            try:
                parent, used = times(int(entry))
            except (OSError, IndexError, ValueError):
                continue
            if parent == postmaster:
                total += used
    return total


def load() -> str:
    """The 1-minute load average, for the report (the machine is shared)."""
    return f"{os.getloadavg()[0]:.1f}"


async def fill(
    member: Member, count: int, offset: int = 0, supersede: list[str] | None = None
) -> list[str]:
    """``count`` shareable decisions in a member's store, written in batches; their ids.

    ``supersede``: ids of current records, each ended by one of the new ones (a new version).
    """
    ids: list[str] = []
    olds = list(supersede or [])
    async with member.store() as store:
        await store.touch_project(member.project)
        for start in range(0, count, 1000):
            async with store.transaction() as tx:
                for n in range(start, min(count, start + 1000)):
                    record = await tx.add(
                        NewRecord(
                            type="decision",
                            project_id=member.project.project_id,
                            title=f"Decision {offset + n} about the ledger service",
                            body=f"Service {offset + n} writes its ledger entries in batches of {n % 97 + 3}.",
                            keywords=f"ledger batch svc{offset + n}",
                            supersedes=olds[n] if n < len(olds) else None,
                            rationale="batch size changed" if n < len(olds) else None,
                        )
                    )
                    ids.append(record.id)
    return ids


#: CPU seconds of the last :func:`timed_sync`: this process's (all threads), the hub's.
CPU: dict[str, float] = {}


async def timed_sync(member: Member, server: Server | None = None) -> tuple[float, int, int]:
    hub_before = server_cpu(server) if server else 0.0
    cpu_before = time.process_time()
    began = time.perf_counter()
    report = await member.sync()
    seconds = time.perf_counter() - began
    CPU["client"] = time.process_time() - cpu_before
    CPU["hub"] = server_cpu(server) - hub_before if server else 0.0
    assert report.error is None, report.error
    assert report.complete
    return seconds, report.pushed, report.applied


async def embed_sample(member: Member, sample: int, model_dir: Path) -> dict[str, float | int]:
    """Embed ``sample`` records of a member's store with the real model: the rate, and whether
    they were all current versions (current first)."""
    from agentctx.embeddings import models, vecstore

    embedder = models.load_model(minilm.settings(model_dir))
    assert embedder is not None, "the test model did not load"
    async with member.store() as store:
        counts = await store.row(
            "SELECT count(*) FILTER (WHERE superseded_at IS NULL), count(*) FROM records "
            "WHERE pending_embedding = 1"
        )
        await embedder.embed(["warm up"])
        began, cpu = time.perf_counter(), time.process_time()
        done = await vecstore.embed_pending(store, embedder, limit=sample)
        seconds, cpu = time.perf_counter() - began, time.process_time() - cpu
        superseded = await store.row(
            "SELECT count(*) FROM records_vec v JOIN records r ON r.id = v.record_id "
            "WHERE r.superseded_at IS NOT NULL"
        )
    return {
        "pending_current": int(counts[0]),
        "pending_all": int(counts[1]),
        "embedded": done,
        "embed_s": seconds,
        "embed_cpu": cpu,
        "embedded_superseded": int(superseded[0]),
    }


async def run(
    server: Server, versions: int, join: int, sample: int, work: Path, model_dir: Path
) -> dict[str, float | int | str]:
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
    result: dict[str, float | int | str] = {"versions": versions, "join": join}
    first = await fill(alice, versions)
    result["load_push"] = load()
    result["push_s"], result["pushed"], _ = await timed_sync(alice, server)
    result["push_cpu"], result["push_hub"] = CPU["client"], CPU["hub"]
    result["load_pull"] = load()
    result["pull_s"], _, result["applied"] = await timed_sync(bob, server)
    result["pull_cpu"], result["pull_hub"] = CPU["client"], CPU["hub"]
    async with bob.store() as store:
        hits = await store.search(SearchQuery(text="ledger svc17", project_id=project.project_id))
        assert any(h.record.title.endswith(" 17 about the ledger service") for h in hits.hits)
    # the team's log grows to `join` versions, a fifth of them new versions of earlier ones
    superseded = join // 5
    plain = join - versions - superseded
    assert plain >= 0 and superseded <= versions + plain, "--join is too small"
    more = await fill(alice, plain, offset=versions)
    await fill(alice, superseded, offset=versions + plain, supersede=(first + more)[:superseded])
    began = time.perf_counter()
    while True:  # as the workers would: several syncs (it is not timed as a push)
        report = await alice.sync()
        assert report.error is None, report.error
        if report.complete and not report.pushed and not report.events:
            break
    result["grow_s"] = time.perf_counter() - began
    result["superseded"] = superseded
    result["load_join"] = load()
    result["join_s"], _, result["joined"] = await timed_sync(carol, server)
    result["join_cpu"], result["join_hub"] = CPU["client"], CPU["hub"]
    result["load_join_end"] = load()
    last = versions + plain + superseded - 1
    async with carol.store() as store:
        hits = await store.search(
            SearchQuery(text=f"ledger svc{last}", project_id=project.project_id)
        )
        assert any(h.record.title == f"Decision {last} about the ledger service" for h in hits.hits)
        counts = await store.row(
            "SELECT count(*) FILTER (WHERE superseded_at IS NULL), count(*) FROM records "
            "WHERE project_id = ?",
            (project.project_id,),
        )
    result["current"], result["join_items"] = int(counts[0]), result["joined"]
    result["joined"] = int(counts[1])  # versions (the pull's items also count the supersessions)
    result["load_embed"] = load()
    result.update(await embed_sample(carol, sample, model_dir))
    result["load_noop"] = load()
    noop = [(await timed_sync(alice))[0] for _ in range(10)]
    result["noop_s"] = statistics.median(noop)
    return result


def report(result: dict[str, float | int | str], args: str) -> str:
    deadline = WORKER_DEADLINE_S

    def fits(seconds: float) -> str:
        if seconds < deadline:
            return "yes"
        return f"no: {math.ceil(seconds / deadline)} worker runs (chunked, each resumes)"

    f = {k: float(v) for k, v in result.items() if not isinstance(v, str)}
    rate = f["embedded"] / f["embed_s"] if f["embed_s"] else 0.0
    to_current = f["current"] / rate if rate else float("inf")
    to_all = f["joined"] / rate if rate else float("inf")
    rows = [
        ("push (alice's sync: redaction, push, acks, her versions' echo)", "push", f["pushed"]),
        ("pull (bob's sync; searchable by keywords at its end)", "pull", f["applied"]),
        (
            "a new member joins: pull from scratch (every current record searchable by keywords "
            "at its end)",
            "join",
            f["joined"],
        ),
    ]
    lines = [
        "# Team hub: push, pull, a member joining, no-op sync",
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {platform.machine()}, "
        f"{os.cpu_count()} cores shared with other work (the 1-minute load average at each step "
        f"is in the table: figures are noisy), Python {platform.python_version()}, PostgreSQL "
        "started by the benchmark (fsync off), over a unix socket; "
        f"`python benchmarks/team_hub.py {args}` (`nox -s bench_hub`).",
        "",
        "Wall seconds depend on the load; CPU seconds much less: the client's (this process, all "
        "threads) and the hub's (PostgreSQL's processes). The client waits for each hub call, so "
        "on an idle machine a step takes about their sum.",
        "",
        "| step | versions | wall seconds | versions/s | load | CPU s: client + hub "
        f"| within one worker deadline ({deadline:g} s), by wall time |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, step, count in rows:
        seconds = f[f"{step}_s"]
        per = count / seconds if seconds else 0.0
        cpu = f"{f[f'{step}_cpu']:.1f} + {f[f'{step}_hub']:.1f}"
        at = result[f"load_{step}"]
        lines.append(
            f"| {name} | {count:.0f} | {seconds:.1f} | {per:.0f} | {at} | {cpu} | {fits(seconds)} |"
        )
    lines += [
        "",
        f"The joined team's log: {f['joined']:.0f} versions, {f['superseded']:.0f} of them superseded "
        f"by a later version ({f['current']:.0f} current records after the pull); the pull applied "
        f"{f['join_items']:.0f} log items (the versions and the supersessions).",
        "",
        "Until embedded (carol's store after the join, the offline all-MiniLM-L6-v2 int8 through "
        f"fastembed, load {result['load_embed']}): `embed_pending` embedded {f['embedded']:.0f} records "
        f"in {f['embed_s']:.1f} s ({rate:.1f} records/s; {f['embed_cpu']:.1f} CPU s, all threads); {f['embedded_superseded']:.0f} of them were "
        "superseded versions (current versions first). At that rate, extrapolated: every current "
        f"record embedded after {to_current / 60:.0f} min of embedding, every version after "
        f"{to_all / 60:.0f} min. Consolidation does it in its time box, chunk by chunk, at each "
        "SessionEnd worker; until then keyword search finds the pulled records (hybrid search "
        "ranks them by keywords only).",
        "",
        f"A sync with nothing to do (connect, whoami, an empty pull): {f['noop_s'] * 1000:.0f} ms "
        f"(median of 10, load {result['load_noop']}): what a SessionEnd worker adds when nothing changed.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--versions", type=int, default=10_000)
    parser.add_argument("--join", type=int, default=100_000)
    parser.add_argument("--embed-sample", type=int, default=512)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    os.environ["HF_HUB_OFFLINE"] = "1"
    server = start_server()
    try:
        with tempfile.TemporaryDirectory(prefix="agentctx-bench-hub-") as tmp:
            os.environ["AGENTCTX_HOME"] = str(Path(tmp) / "unused-home")
            model_dir = minilm.assemble_int8(Path(tmp) / "minilm")
            result = anyio.run(
                run, server, args.versions, args.join, args.embed_sample, Path(tmp), model_dir
            )
    finally:
        stop_server(server)
    given = f"--versions {args.versions} --join {args.join} --embed-sample {args.embed_sample}"
    text = report(result, given)
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
