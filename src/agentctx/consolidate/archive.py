"""The archive: long-superseded records move to a cold table; long low scorers are only listed.

A record superseded more than :data:`ARCHIVE_AFTER_DAYS` days ago moves from ``records`` to
``records_archive`` (same columns but ``seq``, plus ``archived_at``): its vectors are deleted, its
entity links go with it (``ON DELETE CASCADE``), the FTS delete trigger drops it from the index, and
its edges stay, so its history is whole. The store reads the archive wherever history is asked for
(``Store.get``, ``history``, ``list_records``, searches with ``as_of`` or superseded records).

``records.superseded_by`` references ``records(id)``: a record may move only when no row left in
``records`` names it as its successor. Predecessors of an old record are older still, so chains
normally move whole; a record some newer row still names (imported or merged history) waits, and so
does everything after it in its chain. Each batch of whole chains moves in one transaction that first
re-checks the rule, so a crash or a rerun never moves anything twice and never breaks the key.

A current record whose score has stayed below ``LOW_SCORE`` (0.1) for more than ``PRUNE_AFTER_DAYS``
(60) days is a prune candidate (:func:`prune_candidates`, shown by ``agentctx status``); nothing is
ever deleted for it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from agentctx.core import clock
from agentctx.core.schema import RECORD_COLUMNS
from agentctx.embeddings.vecstore import BLOB_TABLE
from agentctx.store import inventory

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from agentctx.consolidate.timebox import TimeBox
    from agentctx.store import Store, Transaction
    from agentctx.store.inventory import PruneCandidate

ARCHIVE_AFTER_DAYS = 90
BATCH = 500  # records per transaction (whole chains, so a batch may hold a few more)

_MOVED_COLUMNS = ", ".join((*RECORD_COLUMNS, "low_score_since"))
_ELIGIBLE_SQL = (
    "SELECT id, superseded_by, superseded_at FROM records "
    "WHERE superseded_at IS NOT NULL AND superseded_at < ?"
)
_PREDECESSORS_SQL = (
    "SELECT p.id, p.superseded_by FROM records p JOIN records x ON p.superseded_by = x.id "
    "WHERE x.superseded_at IS NOT NULL AND x.superseded_at < ?"
)


@dataclass(slots=True)
class ArchiveReport:
    """What one archive run did."""

    moved: int = 0
    held: int = 0  # old enough, but a row left in records still names them (or their chain)
    left: int = 0  # movable, not moved: the time box expired first
    unfinished: bool = False
    prune_candidates: int = 0

    def to_dict(self) -> dict[str, Any]:
        """Plain data."""
        return asdict(self)


async def archive(
    store: Store,
    project_id: str | None,
    *,
    now: str | None = None,
    timebox: TimeBox | None = None,
) -> ArchiveReport:
    """Move a project's records superseded over :data:`ARCHIVE_AFTER_DAYS` ago to the archive."""
    stamp = clock.parse_time(now) if now else clock.now()
    cutoff = inventory.days_before(stamp, ARCHIVE_AFTER_DAYS)
    eligible_sql, predecessors_sql, params = _ELIGIBLE_SQL, _PREDECESSORS_SQL, [cutoff]
    if project_id is not None:
        eligible_sql += " AND project_id = ?"
        predecessors_sql += " AND x.project_id = ?"
        params.append(project_id)
    eligible = {
        str(row["id"]): (row["superseded_by"], str(row["superseded_at"]))
        for row in await store.rows(eligible_sql, params)
    }
    predecessors = [
        (str(row["id"]), str(row["superseded_by"]))
        for row in await store.rows(predecessors_sql, params)
    ]
    movable = _movable(eligible, predecessors)
    report = ArchiveReport(held=len(eligible) - len(movable))
    batches = _batches(_chains(movable, eligible), BATCH)
    for index, batch in enumerate(batches):
        if timebox is not None and timebox.expired():
            report.left = sum(len(b) for b in batches[index:])
            report.unfinished = True
            break
        async with store.transaction() as tx:
            report.moved += await _move(tx, store, batch, stamp)
    report.prune_candidates = len(await inventory.prune_candidates(store, project_id, now=stamp))
    return report


async def prune_candidates(
    store: Store, project_id: str | None, *, now: str | None = None
) -> list[PruneCandidate]:
    """Current records scored below 0.1 for over 60 days (a project's include the global ones)."""
    return await inventory.prune_candidates(
        store, project_id, now=clock.parse_time(now) if now else None
    )


def _movable(
    eligible: dict[str, tuple[str | None, str]], predecessors: list[tuple[str, str]]
) -> set[str]:
    """The eligible ids no row staying in ``records`` names as its successor."""
    held = {successor for pred, successor in predecessors if pred not in eligible}
    stack = list(held)
    while stack:  # a held record stays and names its successor: that one stays too
        successor = eligible[stack.pop()][0]
        if successor in eligible and successor not in held:
            held.add(successor)
            stack.append(successor)
    return set(eligible) - held


def _chains(movable: set[str], eligible: dict[str, tuple[str | None, str]]) -> list[list[str]]:
    """Movable ids grouped into supersession chains, oldest chain first."""
    parent = {record_id: record_id for record_id in movable}

    def root(item: str) -> str:
        while parent[item] != item:
            parent[item] = parent[parent[item]]
            item = parent[item]
        return item

    for record_id in movable:
        successor = eligible[record_id][0]
        if successor in movable:
            parent[root(record_id)] = root(successor)
    groups: dict[str, list[str]] = {}
    for record_id in sorted(movable, key=lambda r: (eligible[r][1], r)):
        groups.setdefault(root(record_id), []).append(record_id)
    return list(groups.values())


def _batches(chains: list[list[str]], size: int) -> list[list[str]]:
    batches: list[list[str]] = []
    current: list[str] = []
    for chain in chains:
        current.extend(chain)
        if len(current) >= size:
            batches.append(current)
            current = []
    if current:
        batches.append(current)
    return batches


async def _move(tx: Transaction, store: Store, batch: Sequence[str], stamp: str) -> int:
    """Move one batch in the caller's transaction; nothing when a new row names one of them."""
    marks = ", ".join("?" * len(batch))
    named = await tx.rows(
        f"SELECT 1 FROM records WHERE superseded_by IN ({marks}) AND id NOT IN ({marks}) LIMIT 1",
        [*batch, *batch],
    )
    if named:  # written since the batch was planned; the next run plans again
        return 0
    await tx.execute("PRAGMA defer_foreign_keys = ON")
    moved = await tx.execute(
        f"INSERT INTO records_archive({_MOVED_COLUMNS}, archived_at) "
        f"SELECT {_MOVED_COLUMNS}, ? FROM records "
        f"WHERE id IN ({marks}) AND superseded_at IS NOT NULL",
        [stamp, *batch],
    )
    if store.capabilities.vec_version:
        await tx.execute(f"DELETE FROM records_vec WHERE record_id IN ({marks})", batch)
    if await tx.rows(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (BLOB_TABLE,)
    ):
        await tx.execute(f"DELETE FROM {BLOB_TABLE} WHERE record_id IN ({marks})", batch)
    await tx.execute(
        f"DELETE FROM records WHERE id IN ({marks}) AND superseded_at IS NOT NULL", batch
    )
    return moved
