"""The plan executors: one rule, run by the sync (hooks) and the async (library) executor alike."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
import sqlean

from agentctx.core import db, plan

if TYPE_CHECKING:
    from pathlib import Path

    from agentctx.core.plan import Plan
    from agentctx.store import Store

pytestmark = pytest.mark.anyio


def _count_and_add(name: str) -> Plan[tuple[int, int, list[str], int]]:
    before = yield plan.one("SELECT count(*) FROM t")
    added = yield plan.execute("INSERT INTO t(name) VALUES (?)", (name,))
    many = yield plan.execute_many("INSERT INTO t(name) VALUES (?)", [(name + "2",), (name + "3",)])
    names = yield plan.rows("SELECT name FROM t ORDER BY name")
    return int(before[0]), added + many, [str(r["name"]) for r in names], len(names)


def _fallback() -> Plan[str]:
    try:
        yield plan.rows("SELECT * FROM no_such_table")
    except sqlean.OperationalError as exc:
        row = yield plan.one("SELECT 'fell back: ' || ?", (str(exc),))
        return str(row[0])
    return "no error"


def _unhandled() -> Plan[None]:
    yield plan.rows("SELECT * FROM no_such_table")


def _make(path: Path) -> None:
    conn, _ = db.connect(str(path), load_vec=False)
    conn.execute("CREATE TABLE t(name TEXT)")
    conn.close()


async def test_sync_and_async_executors_agree(tmp_path: Path) -> None:
    _make(tmp_path / "a.db")
    _make(tmp_path / "b.db")
    conn, _ = db.connect(str(tmp_path / "a.db"), load_vec=False)
    try:
        synced = plan.run(conn, _count_and_add("x"))
        sync_fallback = plan.run(conn, _fallback())
        with pytest.raises(sqlean.OperationalError, match="no such table"):
            plan.run(conn, _unhandled())
    finally:
        conn.close()
    aconn, _ = await db.connect_async(str(tmp_path / "b.db"), create=False)
    try:
        asynced = await plan.run_async(aconn, _count_and_add("x"))
        async_fallback = await plan.run_async(aconn, _fallback())
        with pytest.raises(sqlean.OperationalError, match="no such table"):
            await plan.run_async(aconn, _unhandled())
    finally:
        await aconn.close()
    assert synced == asynced == (0, 3, ["x", "x2", "x3"], 3)
    assert sync_fallback == async_fallback
    assert sync_fallback.startswith("fell back: no such table")


def _touch(project_id: str, fail: bool) -> Plan[int]:
    changed = yield plan.execute(
        "INSERT INTO projects(project_id, name, root, remote, created_at, last_seen_at) "
        "VALUES (?, 'p', NULL, NULL, '2026-01-01', '2026-01-01')",
        (project_id,),
    )
    if fail:
        raise ValueError("the rule refused")
    return int(changed)


async def test_store_runs_plans_and_rolls_a_failed_write_back(store: Store) -> None:
    assert await store.write(_touch("p1", fail=False), changed=["p1"]) == 1
    with pytest.raises(ValueError, match="refused"):
        await store.write(_touch("p2", fail=True))
    found = await store.run(_project_ids())
    assert found == ["p1"]
    async with store.transaction() as tx:
        assert await tx.run(_touch("p3", fail=False)) == 1
    assert await store.run(_project_ids()) == ["p1", "p3"]


def _project_ids() -> Plan[list[str]]:
    found = yield plan.rows("SELECT project_id FROM projects ORDER BY project_id")
    return [str(row[0]) for row in found]
