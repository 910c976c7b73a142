"""The archive of long-superseded records (still answerable) and the prune candidates."""

from __future__ import annotations

from contextlib import closing
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from agentctx.consolidate import archive as archive_module
from agentctx.consolidate.archive import ARCHIVE_AFTER_DAYS, archive, prune_candidates
from agentctx.consolidate.reinforce import reinforce_preferences
from agentctx.consolidate.scoring import rescore
from agentctx.consolidate.timebox import TimeBox
from agentctx.core import clock, db
from agentctx.core.project import identify
from agentctx.core.schema import EMBEDDING_DIMS
from agentctx.embeddings.vecstore import BLOB_TABLE
from agentctx.store import SearchQuery, Store, deletion, inventory, transfer
from tests.helpers import new_record
from tests.test_cli import ok, ok_json, status

if TYPE_CHECKING:
    from pathlib import Path

    from agentctx.records import Record

pytestmark = pytest.mark.anyio

P = "a" * 64
Q = "b" * 64
PAST = "2025-01-01T00:00:00.000000Z"


def days(n: float) -> str:
    """The stored time ``n`` days from now (negative: ago)."""
    return clock.format_time(datetime.fromisoformat(clock.now()) + timedelta(days=n))


async def chain(
    store: Store, versions: int = 3, *, project: str = P, title: str = "Database"
) -> list[Record]:
    """A decision superseded ``versions - 1`` times; every version as stored now, oldest first."""
    first = await store.add(
        new_record(
            type="decision",
            title=title,
            body="We use postgres, version 0.",
            project_id=project,
            valid_from=PAST,
        )
    )
    ids = [first.id]
    for n in range(1, versions):
        _, created = await store.supersede(ids[-1], f"We use postgres, version {n}.", "moved on")
        ids.append(created.id)
    return [await store.get(record_id) for record_id in ids]


def rows(store: Store, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Committed rows, read through a separate connection."""
    conn, _ = db.connect(store.path)
    with closing(conn):
        return [tuple(row) for row in conn.execute(sql, params).fetchall()]


def ids_in(store: Store, table: str) -> set[str]:
    return {str(row[0]) for row in rows(store, f"SELECT id FROM {table}")}


def foreign_keys_hold(store: Store) -> bool:
    return rows(store, "PRAGMA foreign_key_check") == []


async def add_vectors(store: Store, record_ids: list[str]) -> None:
    blob = np.ones(EMBEDDING_DIMS, dtype=np.float32).tobytes()
    async with store.transaction() as tx:
        await tx.execute(
            f"CREATE TABLE IF NOT EXISTS {BLOB_TABLE} "
            "(record_id TEXT PRIMARY KEY, embedding BLOB NOT NULL)"
        )
        for record_id in record_ids:
            await tx.execute(f"INSERT INTO {BLOB_TABLE} VALUES (?, ?)", (record_id, blob))
            if store.capabilities.vec_version:
                await tx.execute("INSERT INTO records_vec VALUES (?, ?)", (record_id, blob))


async def link_file(store: Store, record_id: str) -> None:
    async with store.transaction() as tx:
        await tx.execute(
            "INSERT INTO nodes(id, project_id, kind, name, created_at) VALUES (?, ?, ?, ?, ?)",
            ("node-1", P, "file", "src/db.py", clock.now()),
        )
        await tx.execute("INSERT INTO record_entities VALUES (?, ?)", (record_id, "node-1"))


async def search_ids(store: Store, **options: Any) -> list[str]:
    result = await store.search(SearchQuery("postgres", project_id=P, **options))
    return [hit.record.id for hit in result.hits]


# -- moving ----------------------------------------------------------------------------------------


async def test_archived_history_stays_answerable(store: Store) -> None:
    first, second, current = await chain(store)
    every = [first.id, second.id, current.id]
    await add_vectors(store, every)
    await link_file(store, first.id)
    moved_at = days(ARCHIVE_AFTER_DAYS + 1)

    report = await archive(store, P, now=moved_at)

    assert report.to_dict() == {
        "moved": 2,
        "held": 0,
        "left": 0,
        "unfinished": False,
        "prune_candidates": 0,
    }
    assert ids_in(store, "records") == {current.id}
    assert rows(store, "SELECT id, archived_at FROM records_archive ORDER BY valid_from") == [
        (first.id, moved_at),
        (second.id, moved_at),
    ]
    assert await store.get(first.id) == first  # the same record, field for field
    assert await store.history(current.id) == [first, second, current]
    assert await store.history(first.id) == [first, second, current]
    assert await store.list_records(P) == [first, second, current]
    assert await store.list_records(P, include_superseded=False) == [current]
    assert await store.list_records(P, as_of=first.valid_from) == [first]
    assert await search_ids(store, as_of=first.valid_from) == [first.id]
    assert set(await search_ids(store, include_superseded=True)) == set(every)
    assert await search_ids(store) == [current.id]
    found, missing = await store.get_many([first.id, "01NOPE"], P)
    assert (found, missing) == ([first], ["01NOPE"])  # archived: read, not counted as an access
    # The cold rows left the FTS index, their vectors and file links; their edges stay.
    assert rows(store, "SELECT count(*) FROM records_fts WHERE records_fts MATCH 'postgres'") == [
        (1,)
    ]
    assert {r[0] for r in rows(store, f"SELECT record_id FROM {BLOB_TABLE}")} == {current.id}
    if store.capabilities.vec_version:
        vectors = await store.rows("SELECT record_id FROM records_vec")
        assert [r[0] for r in vectors] == [current.id]
    assert rows(store, "SELECT count(*) FROM record_entities") == [(0,)]
    assert rows(store, "SELECT count(*) FROM edges WHERE rel_type = 'supersedes'") == [(2,)]
    assert foreign_keys_hold(store)


async def test_nothing_superseded_less_than_ninety_days_ago_moves(store: Store) -> None:
    await chain(store)
    assert (await archive(store, P)).moved == 0
    assert (await archive(store, P, now=days(ARCHIVE_AFTER_DAYS - 1))).moved == 0
    assert ids_in(store, "records_archive") == set()


async def test_a_rerun_moves_nothing_twice(store: Store) -> None:
    await chain(store)
    await chain(store, project=Q)
    moved_at = days(ARCHIVE_AFTER_DAYS + 1)
    assert (await archive(store, P, now=moved_at)).moved == 2  # only this project's
    assert (await archive(store, P, now=moved_at)).moved == 0
    assert (await archive(store, None, now=moved_at)).moved == 2  # the other project's now
    assert (await archive(store, None, now=days(400))).moved == 0
    assert len(rows(store, "SELECT id FROM records_archive")) == 4
    assert foreign_keys_hold(store)


async def test_a_record_still_named_by_a_newer_row_waits_with_its_chain(store: Store) -> None:
    v1, v2, v3, v4 = await chain(store, 4)
    # History as an import or a merge can leave it: v1 superseded later than its successors.
    async with store.transaction() as tx:
        await tx.execute("UPDATE records SET superseded_at = ? WHERE id = ?", (days(60), v1.id))
    report = await archive(store, P, now=days(ARCHIVE_AFTER_DAYS + 1))
    assert (report.moved, report.held) == (0, 2)  # v2 is named by v1, v3 by v2
    assert foreign_keys_hold(store)
    report = await archive(store, P, now=days(60 + ARCHIVE_AFTER_DAYS + 1))
    assert (report.moved, report.held) == (3, 0)
    assert ids_in(store, "records") == {v4.id}
    assert [r.id for r in await store.history(v4.id)] == [v1.id, v2.id, v3.id, v4.id]
    assert foreign_keys_hold(store)


class Batches(TimeBox):
    """A time box that expires after ``allowed`` looks (one look per batch)."""

    def __init__(self, allowed: int) -> None:
        super().__init__(None)
        self.looks = 0
        self.allowed = allowed

    def expired(self) -> bool:
        self.looks += 1
        return self.looks > self.allowed


async def test_batches_move_whole_chains_and_stop_at_the_time_box(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(archive_module, "BATCH", 2)
    chains = [await chain(store, 4, title=f"Choice {n}") for n in range(3)]
    old = [[r.id for r in versions[:3]] for versions in chains]
    report = await archive(store, P, now=days(ARCHIVE_AFTER_DAYS + 1), timebox=Batches(1))
    assert (report.moved, report.left, report.unfinished) == (3, 6, True)
    archived = ids_in(store, "records_archive")
    assert archived in ({*ids} for ids in old)  # one whole chain, not parts of two
    assert foreign_keys_hold(store)
    report = await archive(store, P, now=days(ARCHIVE_AFTER_DAYS + 1), timebox=TimeBox(0))
    assert (report.moved, report.left, report.unfinished) == (0, 6, True)
    report = await archive(store, P, now=days(ARCHIVE_AFTER_DAYS + 1))
    assert (report.moved, report.left, report.unfinished) == (6, 0, False)
    assert ids_in(store, "records_archive") == {i for ids in old for i in ids}
    assert foreign_keys_hold(store)


async def test_export_import_round_trip_carries_the_archive(store: Store, tmp_path: Path) -> None:
    first, second, current = await chain(store)
    await archive(store, P, now=days(ARCHIVE_AFTER_DAYS + 1))
    data = transfer.parse(transfer.to_json(await transfer.export_data(store)).decode())
    assert {r["id"] for r in data["records"]} == {first.id, second.id, current.id}

    async with await Store.open(str(tmp_path / "other" / "agentctx.db")) as other:
        report = await transfer.import_data(other, data)
        assert report.added["records"] == 3
        # Imported, archived records are superseded records again, history intact.
        assert await other.history(current.id) == [first, second, current]
        assert await other.list_records(P, as_of=first.valid_from) == [first]
        assert (await archive(other, P, now=days(ARCHIVE_AFTER_DAYS + 1))).moved == 2
        assert await transfer.export_data(other) == await transfer.export_data(store)

    again = await transfer.import_data(store, data)  # into the store it came from: nothing is added
    assert again.added.get("records", 0) == 0 and again.skipped["records"] == 3
    assert ids_in(store, "records") == {current.id}
    assert ids_in(store, "records_archive") == {first.id, second.id}


async def test_reset_deletes_the_projects_archive_too(store: Store) -> None:
    await chain(store)
    await chain(store, project=Q)
    await archive(store, None, now=days(ARCHIVE_AFTER_DAYS + 1))
    assert await deletion.reset(store, P) == 3
    assert {r.project_id for r in await store.list_records()} == {Q}
    assert foreign_keys_hold(store)


# -- prune candidates --------------------------------------------------------------------------


async def stale(store: Store, title: str, project: str = P, **extra: Any) -> Record:
    """A discovery so old that it scores below 0.1."""
    fields: dict[str, Any] = {"type": "discovery", "title": title, "body": "Once true.",
                              "project_id": project, "valid_from": "2020-01-01", **extra}  # fmt: skip
    return await store.add(new_record(**fields))


async def test_prune_candidates_after_sixty_low_days(store: Store) -> None:
    low = await stale(store, "Old gotcha")
    global_low = await stale(store, "Old global gotcha", scope="global")
    await stale(store, "Another project's", project=Q)
    gone = await stale(store, "Superseded one")
    await store.supersede(gone.id, "Replaced.", "newer")
    fresh = await store.add(new_record(type="discovery", title="New", body="b", project_id=P))
    fell = days(-61)
    await rescore(store, None, now=fell)
    candidates = await prune_candidates(store, P)
    assert [c.id for c in candidates] == sorted([low.id, global_low.id])
    assert {c.low_score_since for c in candidates} == {fell}
    assert candidates[0].score < 0.1
    assert len(await prune_candidates(store, None)) == 3
    assert await prune_candidates(store, P, now=days(-2)) == []  # 59 days low then: not yet
    assert fresh.id not in {c.id for c in candidates}
    info = await inventory.status(store, P)
    assert info["prune_candidates"]["count"] == 2
    assert [r["id"] for r in info["prune_candidates"]["records"]] == [c.id for c in candidates]
    report = await archive(store, P)
    assert report.prune_candidates == 2
    assert ids_in(store, "records") >= {low.id, global_low.id}  # listed, never deleted


async def test_status_shows_archived_and_prune_candidates(project_dir: Path) -> None:
    pid = identify(str(project_dir)).project_id
    async with await Store.open() as store:
        first, _, current = await chain(store, project=pid)
        await archive(store, pid, now=days(ARCHIVE_AFTER_DAYS + 1))
        low = await stale(store, "Old gotcha", project=pid)
        await rescore(store, pid, now=days(-61))

    info = status(project_dir)
    assert (info["archived"], info["superseded"]) == (2, 0)
    assert info["prune_candidates"]["count"] == 1
    (shown,) = info["prune_candidates"]["records"]
    assert (shown["id"], shown["type"], shown["title"]) == (low.id, "discovery", "Old gotcha")
    assert shown["score"] < 0.1
    text = ok("status", cwd=project_dir)
    assert "0 superseded records, 2 archived" in text
    assert "prune     1 candidates" in text and low.id in text
    history = ok_json("show", current.id, "--history", cwd=project_dir)
    assert [r["id"] for r in history] == [first.id, history[1]["id"], current.id]
    found = ok_json("search", "postgres", "--as-of", first.valid_from, cwd=project_dir)
    assert [r["id"] for r in found] == [first.id]


async def test_reinforcement_counts_the_sessions_of_archived_versions(store: Store) -> None:
    old = await store.add(
        new_record(
            type="preference",
            title="Small commits",
            body="Commit small.",
            project_id=P,
            confidence="inferred",
            session_id="s1",
        )
    )
    async with store.transaction() as tx:
        await tx.mark_seen_in(old.id, "s2")
    _, current = await store.supersede(
        old.id, "Commit in small steps.", "merged", confidence="inferred", session_id="s3"
    )
    assert (await archive(store, P, now=days(ARCHIVE_AFTER_DAYS + 1))).moved == 1
    assert await reinforce_preferences(store, P, threshold=3) == 1
    assert (await store.get(current.id)).confidence == "reinforced"
