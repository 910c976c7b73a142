"""Several OS processes against one store file: creation, migration and writes serialize."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from contextlib import ExitStack, closing
from typing import TYPE_CHECKING

import pytest

from agentctx.core import db, schema

if TYPE_CHECKING:
    from pathlib import Path

PROCESSES = 8
RECORDS_EACH = 200
PROJECT = "c" * 64


def worker(body: str) -> str:
    """A worker script running ``body`` with ``store`` open (and ``worker``, ``NewRecord`` at hand).

    Each worker imports everything, says "ready", and waits for "go" on stdin, so that all of them
    open the (not yet existing) database at the same moment.
    """
    return f"""
import sys
import anyio
from agentctx.records import NewRecord
from agentctx.store import Store

path, worker = sys.argv[1], int(sys.argv[2])
print("ready", flush=True)
sys.stdin.readline()

async def main():
    async with await Store.open(path) as store:
{textwrap.indent(textwrap.dedent(body).strip(), " " * 8)}

anyio.run(main)
print("done", flush=True)
"""


ADD_WORKER = worker(f"""
    for n in range({RECORDS_EACH}):
        await store.add(NewRecord(
            type="discovery",
            title=f"worker {{worker}} finding {{n}}",
            body=f"Concurrent write number {{n}} from worker {{worker}} (zebrafish).",
            project_id="{PROJECT}",
            keywords=[f"w{{worker}}"],
        ))
""")
HANDOVER_WORKER = worker(f"""
    for n in range(5):
        await store.add(NewRecord(
            type="handover", title="Handover", body=f"worker {{worker}} step {{n}}",
            project_id="{PROJECT}",
        ))
""")


def run_together(script: str, path: str, count: int = PROCESSES) -> list[tuple[int, str, str]]:
    """Start ``count`` workers, release them at once, and return (exit code, stdout, stderr)."""
    with ExitStack() as stack:
        procs = [
            stack.enter_context(
                subprocess.Popen(
                    [sys.executable, "-c", script, path, str(n)],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            )
            for n in range(count)
        ]
        try:
            for proc in procs:
                assert proc.stdout is not None
                assert proc.stdout.readline().strip() == "ready"
            for proc in procs:
                assert proc.stdin is not None
                proc.stdin.write("go\n")
                proc.stdin.flush()
            results = []
            for proc in procs:
                out, err = proc.communicate(timeout=120)
                results.append((proc.returncode, "ready\n" + out, err))
            return results
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()


def check_workers(results: list[tuple[int, str, str]]) -> None:
    for code, out, err in results:
        assert "database is locked" not in err
        assert "Traceback" not in err, err
        assert code == 0, err
        assert out.split() == ["ready", "done"]


@pytest.mark.slow  # eight processes writing 200 records each: seconds of CPU
def test_eight_processes_create_migrate_and_write_one_store(tmp_path: Path) -> None:
    path = str(tmp_path / "fresh" / "agentctx.db")
    assert not os.path.exists(os.path.dirname(path))
    results = run_together(ADD_WORKER, path)
    check_workers(results)
    total = PROCESSES * RECORDS_EACH

    conn, _ = db.connect(path, load_vec=False)
    with closing(conn):
        assert conn.execute("SELECT count(*) FROM records").fetchone()[0] == total
        assert conn.execute("SELECT count(DISTINCT id) FROM records").fetchone()[0] == total
        assert conn.execute("SELECT count(*) FROM records_fts").fetchone()[0] == total
        # The index itself (not only the content table it reads through) holds every row.
        assert conn.execute("SELECT count(*) FROM records_fts_docsize").fetchone()[0] == total
        conn.execute("INSERT INTO records_fts(records_fts) VALUES ('integrity-check')")
        matched = conn.execute(
            "SELECT count(*) FROM records_fts WHERE records_fts MATCH 'zebrafish'"
        ).fetchone()[0]
        assert matched == total
        per_worker = conn.execute(
            "SELECT keywords, count(*) FROM records GROUP BY keywords ORDER BY keywords"
        ).fetchall()
        assert [tuple(row) for row in per_worker] == [
            (f"w{n}", RECORDS_EACH) for n in range(PROCESSES)
        ]
        assert conn.execute("SELECT count(*) FROM schema_migrations").fetchone()[0] == len(
            schema.MIGRATIONS
        )
        assert schema.schema_version(conn) == schema.SCHEMA_VERSION
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []


def test_concurrent_handovers_keep_one_current(tmp_path: Path) -> None:
    """Every add supersedes the current handover in its own transaction: one linear chain."""
    path = str(tmp_path / "agentctx.db")
    check_workers(run_together(HANDOVER_WORKER, path, count=4))
    conn, _ = db.connect(path, load_vec=False)
    with closing(conn):
        rows = conn.execute(
            "SELECT id, superseded_by FROM records WHERE type = 'handover'"
        ).fetchall()
        edges = conn.execute(
            "SELECT from_id, to_id FROM edges WHERE rel_type = 'supersedes'"
        ).fetchall()
    assert len(rows) == 20
    current = [row["id"] for row in rows if row["superseded_by"] is None]
    assert len(current) == 1
    successor = {row["id"]: row["superseded_by"] for row in rows}
    # Walk back from the current one: the chain covers every handover exactly once.
    predecessor = {new: old for old, new in successor.items() if new is not None}
    assert len(predecessor) == 19
    chain = [current[0]]
    while chain[-1] in predecessor:
        chain.append(predecessor[chain[-1]])
    assert len(chain) == 20
    assert sorted((row[0], row[1]) for row in edges) == sorted(
        (new, old) for old, new in successor.items() if new is not None
    )


OPEN_WORKER = """
import sys
import anyio
from agentctx.store import Store

async def main():
    print("ready", flush=True)
    while path := sys.stdin.readline().strip():
        try:
            store = await Store.open(path)
            await store.close()
        except Exception as exc:
            print("error", type(exc).__name__, exc, flush=True)
        else:
            print("ok", flush=True)

anyio.run(main)
"""


@pytest.mark.slow  # rounds of processes racing to create one store
def test_processes_creating_the_same_new_store_together(tmp_path: Path) -> None:
    """Round after round, 8 processes open one brand-new path at the same moment.

    Switching a new file to WAL is where SQLite answers "database is locked" at once instead of
    waiting; every open must still succeed.
    """
    rounds = 80
    with ExitStack() as stack:
        procs = [
            stack.enter_context(
                subprocess.Popen(
                    [sys.executable, "-c", OPEN_WORKER],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            )
            for _ in range(PROCESSES)
        ]
        failures: list[str] = []
        try:
            for proc in procs:
                assert proc.stdout is not None
                assert proc.stdout.readline().strip() == "ready"
            for n in range(rounds):
                path = str(tmp_path / str(n) / "agentctx.db")
                for proc in procs:
                    assert proc.stdin is not None
                    proc.stdin.write(path + "\n")
                    proc.stdin.flush()
                for proc in procs:
                    assert proc.stdout is not None
                    line = proc.stdout.readline().strip()
                    if line != "ok":
                        failures.append(line)
            for proc in procs:
                _, err = proc.communicate(timeout=60)
                assert proc.returncode == 0, err
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
    assert failures == []
    for n in range(rounds):
        conn, _ = db.connect(str(tmp_path / str(n) / "agentctx.db"), load_vec=False, create=False)
        with closing(conn):
            assert schema.schema_version(conn) == schema.SCHEMA_VERSION
            count = conn.execute("SELECT count(*) FROM schema_migrations").fetchone()[0]
            assert count == len(schema.MIGRATIONS)
