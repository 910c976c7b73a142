"""One insert rule and one owner of the sessions table, for the hooks and the library alike.

The capture hooks (:mod:`agentctx.core.observe`, sync) and :meth:`Store.add` (async) run the same plan
(:mod:`agentctx.core.writes`), so the same case writes the same rows both ways; SessionEnd and the
demo close a session with the same :func:`agentctx.core.sessions.end`.
"""

from __future__ import annotations

import os
from contextlib import closing
from typing import TYPE_CHECKING, Any

import pytest

from agentctx.core import db, ledger, observe, plan, sessions, spool, writes
from agentctx.core.errors import ConflictError, NotFoundError, ValidationError
from agentctx.core.project import identify
from agentctx.records import NewRecord
from agentctx.store import Store
from tests.helpers import payload, run_hook, seed

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    import sqlean

    from agentctx.core.shapes import Observation

P = "p" * 64
AT = "2026-05-01T10:00:00.000000Z"
SEEDED: list[dict[str, Any]] = [
    {"type": "handover", "title": "Handover: a, before", "body": "a1", "key": "/w/a"},
    {"type": "handover", "title": "Handover: b", "body": "b1", "key": "/w/b"},
    {"type": "handover", "title": "Handover: legacy", "body": "old", "key": None},
    {"type": "profile", "title": "Language: Python", "body": "py", "key": "language"},
    {"type": "profile", "title": "Framework: none", "body": "-", "key": "framework"},
]


async def seeded(path: str) -> None:
    async with await Store.open(path) as store:
        for spec in SEEDED:
            await store.add(NewRecord(project_id=P, valid_from="2026-04-01", **spec))


def sync_conn(path: str) -> sqlean.Connection:
    conn, _caps = db.connect(path, create=False, load_vec=False)
    return conn


def snapshot(path: str) -> tuple[list[dict[str, Any]], set[tuple[str, str, str]]]:
    """Every record (ids as titles, times as set/unset) and every edge between records."""
    with closing(sync_conn(path)) as conn:
        rows = [dict(r) for r in conn.execute("SELECT * FROM records ORDER BY title, valid_from")]
        titles = {r["id"]: r["title"] for r in rows}
        edges = {
            (titles[a], titles[b], rel)
            for a, b, rel in conn.execute("SELECT from_id, to_id, rel_type FROM edges")
            if a in titles and b in titles
        }
    for row in rows:
        row["id"] = row["title"]
        row["superseded_by"] = titles.get(row["superseded_by"])
        row["superseded_at"] = row["superseded_at"] is not None
        del row["recorded_at"], row["seq"]
    return rows, edges


async def both_ways(
    tmp_path: Path, hook: Callable[[sqlean.Connection], object], library: NewRecord
) -> None:
    """Run one case through the hook path and through ``Store.add``; the stores must agree."""
    hook_db, lib_db = str(tmp_path / "hook.db"), str(tmp_path / "lib.db")
    for path in (hook_db, lib_db):
        await seeded(path)
    with closing(sync_conn(hook_db)) as conn:
        hook(conn)
    async with await Store.open(lib_db) as store:
        await store.add(library)
    assert snapshot(hook_db) == snapshot(lib_db)


HANDOVER: Observation = {
    "kind": "handover",
    "project_id": P,
    "session_id": "s1",
    "at": AT,
    "title": "Handover: a, now",
    "body": "Left: the tests.",
    "keywords": "tests",
}


@pytest.mark.anyio
@pytest.mark.parametrize("checkout", ["/w/a", None])
async def test_a_captured_handover_writes_what_store_add_writes(
    tmp_path: Path, checkout: str | None
) -> None:
    obs: Observation = {**HANDOVER, "checkout": checkout}
    new = NewRecord(
        type="handover",
        title=str(obs["title"]),
        body=str(obs["body"]),
        project_id=P,
        confidence="inferred",
        source="hook_observation",
        keywords="tests",
        key=checkout,
        session_id="s1",
        valid_from=AT,
    )
    await both_ways(tmp_path, lambda conn: observe.apply(conn, [obs]), new)
    rows, edges = snapshot(str(tmp_path / "hook.db"))
    current = {r["title"] for r in rows if r["type"] == "handover" and not r["superseded_at"]}
    if checkout:  # its checkout's and the legacy one replaced, the other worktree's left alone
        assert current == {"Handover: a, now", "Handover: b"}
        assert {
            ("Handover: a, now", "Handover: a, before", "supersedes"),
            ("Handover: a, now", "Handover: legacy", "supersedes"),
        } <= edges
    else:  # a legacy handover replaces only the legacy one
        assert current == {"Handover: a, now", "Handover: a, before", "Handover: b"}
        assert ("Handover: a, now", "Handover: legacy", "supersedes") in edges


@pytest.mark.anyio
async def test_a_keyed_profile_record_run_sync_writes_what_store_add_writes(
    tmp_path: Path,
) -> None:
    fields: dict[str, Any] = {
        "type": "profile",
        "title": "Language: Rust",
        "body": "rs",
        "project_id": P,
        "key": " language ",
        "valid_from": AT,
    }

    def hook(conn: sqlean.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")  # a plan runs inside its caller's transaction
        plan.run(conn, writes.add(fields))
        conn.execute("COMMIT")

    await both_ways(tmp_path, hook, NewRecord(**fields))
    rows, _ = snapshot(str(tmp_path / "lib.db"))
    current = {r["title"] for r in rows if r["type"] == "profile" and not r["superseded_at"]}
    assert current == {"Language: Rust", "Framework: none"}


@pytest.mark.anyio
async def test_stubs_dedupe_by_title_on_both_paths(tmp_path: Path) -> None:
    stub: Observation = {
        "kind": "stub",
        "project_id": P,
        "session_id": "s1",
        "at": AT,
        "title": "Test failure:   pytest -q",
        "body": "1 failed",
        "files": ["tests/test_a.py"],
        "keywords": "pytest",
    }
    fields = observe.record_of(stub, P, "s1", AT)
    hook_db, lib_db = str(tmp_path / "hook.db"), str(tmp_path / "lib.db")
    for path in (hook_db, lib_db):
        await seeded(path)
    with closing(sync_conn(hook_db)) as conn:
        observe.apply(conn, [stub, {**stub, "body": "2 failed", "files": ["src/a.py"]}])
        linked = conn.execute("SELECT count(*) FROM record_entities").fetchone()[0]
    async with await Store.open(lib_db) as store:
        first = await store.write(writes.add_stub(fields))
        again = await store.write(writes.add_stub({**fields, "body": "2 failed"}))
    assert first == again
    assert snapshot(hook_db) == snapshot(lib_db)
    assert linked == 2  # the deduplicated stub still gets the second observation's file


@pytest.mark.anyio
async def test_supersession_errors_are_the_same_on_both_paths(tmp_path: Path) -> None:
    path = str(tmp_path / "s.db")
    async with await Store.open(path) as store:
        old = await store.add(NewRecord(type="decision", title="Use A", body="a", project_id=P))
        await store.supersede(old.id, "b", "changed", title="Use B")
        glob = await store.add(
            NewRecord(type="preference", title="Tabs", body="t", project_id=P, scope="global")
        )
        cases = [
            ({"type": "decision", "supersedes": old.id}, ConflictError),
            ({"type": "discovery", "supersedes": old.id}, ConflictError),
            ({"type": "decision", "supersedes": "nope"}, NotFoundError),
            ({"type": "preference", "supersedes": glob.id}, ValidationError),
        ]
        for changes, error in cases:
            fields: dict[str, Any] = {"title": "Use C", "body": "c", "project_id": P, **changes}
            with pytest.raises(error) as from_store:
                await store.add(NewRecord(**fields))
            with closing(sync_conn(path)) as conn:
                conn.execute("BEGIN IMMEDIATE")
                with pytest.raises(error) as from_hook:
                    plan.run(conn, writes.add(fields))
                conn.execute("ROLLBACK")
            assert str(from_hook.value) == str(from_store.value)
        assert len(await store.list_records(P)) == 2


# -- sessions ---------------------------------------------------------------------------------------


def open_session(session_id: str, record_ids: list[str], project_dir: Path) -> None:
    """A session's hook state: two injections in its ledger, one observation spooled."""
    with ledger.Ledger(session_id) as state:
        state.append({"event": "SessionStart", "ids": record_ids[:1], "tokens": 40})
        state.append({"event": "UserPromptSubmit", "ids": record_ids, "tokens": 25})
    project_id = identify(str(project_dir)).project_id
    spool.save([{"kind": "file", "project_id": project_id, "name": f"{session_id}.py"}])


def session_state(session_id: str) -> tuple[Any, ...]:
    from agentctx.core import home

    with closing(sync_conn(home.db_path())) as conn:
        row = conn.execute(
            "SELECT project_id, cwd, transcript_path, tokens_injected, injections, "
            "started_at IS NOT NULL, ended_at IS NOT NULL FROM sessions WHERE session_id = ?",
            (session_id,),
        ).fetchone()
        shown = {
            r[0]
            for r in conn.execute(
                "SELECT record_id FROM session_injections WHERE session_id = ?", (session_id,)
            )
        }
        node = conn.execute("SELECT count(*) FROM nodes WHERE name = ?", (f"{session_id}.py",))
        return (*row, shown, node.fetchone()[0], os.path.exists(ledger.path_for(session_id)))


def test_session_end_and_the_demo_close_a_session_alike(project_dir: Path, tmp_path: Path) -> None:
    from agentctx.demo import _Demo, _Paths

    ids = seed(project_dir, [{"type": "decision", "title": f"D{n}", "body": "b"} for n in "12"])
    where = str(project_dir)
    open_session("by-demo", ids, project_dir)
    demo = _Demo(
        _Paths(str(tmp_path), "", "", where, "", ""),
        {"session_id": "by-demo", "next_session_id": "-"},
        print,
    )
    assert demo._close_session(payload("SessionEnd", "by-demo", project_dir)) == 65
    # the hook last: it starts the detached worker, which writes to the store meanwhile
    open_session("by-hook", ids, project_dir)
    end = payload("SessionEnd", "by-hook", project_dir, reason="other")
    assert run_hook("session-end", end, cwd=project_dir).returncode == 0
    by_hook, by_demo = session_state("by-hook"), session_state("by-demo")
    assert by_hook == by_demo
    assert by_hook[:2] == (identify(where).project_id, where)
    assert by_hook[3:] == (65, 2, True, True, set(ids), 1, False)


def test_a_stale_ledger_is_folded_once_with_the_session_that_ends(project_dir: Path) -> None:
    from agentctx.core import home

    ids = seed(project_dir, [{"type": "decision", "title": "D", "body": "b"}])
    open_session("crashed", ids, project_dir)
    stale = ledger.path_for("crashed")
    os.utime(stale, (1, 1))
    with closing(sync_conn(home.db_path())) as conn:
        folded = sessions.end(conn, "", "", "", "")
        assert folded == ["crashed"]
        assert sessions.end(conn, "", "", "", "") == []
    assert session_state("crashed")[3:7] == (65, 2, True, True)


@pytest.mark.anyio
async def test_extraction_offsets_and_requests_share_the_row(project_dir: Path) -> None:
    from agentctx.core import home

    project_id = identify(str(project_dir)).project_id
    async with await Store.open() as store:
        with closing(sync_conn(home.db_path())) as conn:  # the Stop hook's side
            sessions.refresh(conn, "s", project_id, str(project_dir), "/t.jsonl")
            assert plan.run(conn, sessions.requested_size("s")) == 0
            plan.run(conn, sessions.request_extraction("s", 4096))
        async with store.transaction() as tx:  # extraction's side
            await tx.run(sessions.advance("s", project_id, "/t.jsonl", "u-1", 3, 0.5))
        await store.write(sessions.advance("s", project_id, None, None, 0, 0.25, "boom"))
        assert await store.run(sessions.requested_size("s")) == 4096
        row = await store.row("SELECT * FROM sessions WHERE session_id = 's'")
    assert (row["extracted_uuid"], row["extractions"], row["records_extracted"]) == ("u-1", 2, 3)
    assert (row["extraction_cost_usd"], row["extraction_error"]) == (0.75, "boom")
    assert row["transcript_path"] == "/t.jsonl"


# -- layering ---------------------------------------------------------------------------------------


def test_only_the_entry_point_imports_the_hooks() -> None:
    """The hooks are handlers: the library, the CLI and the core never import them."""
    import ast
    from pathlib import Path

    import agentctx

    root = Path(agentctx.__file__).parent
    offenders = []
    for path in root.rglob("*.py"):
        inside = path.relative_to(root).parts
        if inside[0] == "hooks" or inside == ("_entry.py",):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            if any(n == "agentctx.hooks" or n.startswith("agentctx.hooks.") for n in names):
                offenders.append(f"{path.relative_to(root)}:{node.lineno}")
    assert offenders == []
