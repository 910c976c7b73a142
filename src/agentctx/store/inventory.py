"""The store's inventory: what ``agentctx status``, the MCP overview and the dashboard report.

Read-only queries over an open :class:`~agentctx.store.Store`, as free functions that take it first:
record counts by type, sessions with the tokens injected and the extraction cost, and the prune
candidates (current records scored low for a long time; consolidation keeps
``records.low_score_since``, nothing is ever deleted for it). A session still open has its
injections only in its hook ledger file, so :func:`sessions` reads the open ledgers too.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict, cast

import anyio

from agentctx.core import clock, schema, search
from agentctx.core import sessions as session_table

if TYPE_CHECKING:
    from agentctx.core.shapes import SessionSummary
    from agentctx.store import Store

#: A current record whose score stays below :data:`agentctx.store.LOW_SCORE` for this many days
#: is a prune candidate.
PRUNE_AFTER_DAYS = 60
PRUNE_SHOWN = 5  # candidates listed by status (the count covers all of them)


@dataclass(frozen=True, slots=True)
class PruneCandidate:
    """A current record whose score has been below ``LOW_SCORE`` since ``low_score_since``."""

    id: str
    project_id: str
    type: str
    title: str
    score: float
    low_score_since: str

    def to_dict(self) -> PruneCandidateData:
        """Plain data (the ``status --json`` shape)."""
        return cast("PruneCandidateData", {name: getattr(self, name) for name in self.__slots__})


class PruneCandidateData(TypedDict):
    """A :class:`PruneCandidate` as plain data."""

    id: str
    project_id: str
    type: str
    title: str
    score: float
    low_score_since: str


class PruneSummary(TypedDict):
    """How many records are prune candidates, and the first :data:`PRUNE_SHOWN` of them."""

    count: int
    records: list[PruneCandidateData]


class StoreTotals(TypedDict):
    """The whole store: its file, rows and sessions of every project."""

    path: str
    records: int
    projects: int
    sessions: int
    tokens_injected: int


class Status(TypedDict):
    """What :func:`status` reports (the ``status --json`` shape; the CLI adds ``project``)."""

    project_id: str | None
    counts: dict[str, int]
    current: int
    superseded: int
    archived: int
    prune_candidates: PruneSummary
    sessions: int
    tokens_injected: int
    extraction_cost_usd: float
    recent_sessions: list[SessionSummary]
    extraction_cost_by_month: dict[str, float]
    extraction_today: dict[str, dict[str, float]]
    store: StoreTotals
    precision: dict[str, Any]
    project: NotRequired[dict[str, str | None]]


def days_before(now: str | None, days: float) -> str:
    """The stored time ``days`` before ``now`` (default: the current time)."""
    moment = datetime.fromisoformat(now or clock.now()).astimezone(UTC)
    return clock.format_time(moment - timedelta(days=days))


async def status(store: Store, project_id: str | None = None) -> Status:
    """Counts by type (current records of the project and global), history and sessions."""
    ids = search.scope_projects(project_id, "all")
    marks = ", ".join("?" * len(ids))
    counts = {t: 0 for t in schema.RECORD_TYPES}
    for row in await store.rows(
        f"SELECT type, count(*) AS n FROM records WHERE project_id IN ({marks}) "
        "AND superseded_at IS NULL GROUP BY type",
        ids,
    ):
        counts[row["type"]] = row["n"]
    superseded = await store.row(
        f"SELECT count(*) FROM records WHERE project_id IN ({marks}) AND superseded_at IS NOT NULL",
        ids,
    )
    project_sessions = await sessions(store, project_id, limit=None)
    all_sessions = await sessions(store, None, limit=None)
    # a project counts once it has records (a teammate's import) or was seen by a hook
    totals = await store.row(
        "SELECT (SELECT count(*) FROM records), (SELECT count(*) FROM ("
        "SELECT project_id FROM records WHERE project_id != ? "
        "UNION SELECT project_id FROM projects WHERE project_id != ?))",
        (schema.GLOBAL_PROJECT_ID, schema.GLOBAL_PROJECT_ID),
    )
    archived = await store.row(
        f"SELECT count(*) FROM records_archive WHERE project_id IN ({marks})", ids
    )
    candidates = await prune_candidates(store, project_id)
    today = await extraction_today(store)
    from agentctx.store import precision  # issue 25: the store's own precision

    judged = await precision.summary(store)
    return {
        "project_id": project_id,
        "counts": counts,
        "current": sum(counts.values()),
        "superseded": superseded[0],
        "archived": archived[0],
        "prune_candidates": {
            "count": len(candidates),
            "records": [c.to_dict() for c in candidates[:PRUNE_SHOWN]],
        },
        "sessions": len(project_sessions),
        "tokens_injected": sum(s["tokens_injected"] for s in project_sessions),
        "extraction_cost_usd": float(sum(s["extraction_cost_usd"] for s in project_sessions)),
        "recent_sessions": project_sessions[:10],
        "extraction_cost_by_month": _by_month(all_sessions),
        "extraction_today": today,
        "store": {
            "path": store.path,
            "records": totals[0],
            "projects": totals[1],
            "sessions": len(all_sessions),
            "tokens_injected": sum(s["tokens_injected"] for s in all_sessions),
        },
        "precision": judged,
    }


async def extraction_today(store: Store) -> dict[str, dict[str, float]]:
    """Today's (UTC) extraction ledger by backend (all projects): runs, calls, tokens (cache reads
    and writes apart), cost, and runs deferred by a cap."""
    found: dict[str, dict[str, float]] = {}
    for row in await store.rows(
        "SELECT backend, count(*) AS runs, sum(calls) AS calls, sum(input_tokens) AS input_tokens, "
        "sum(output_tokens) AS output_tokens, sum(cache_creation_tokens) AS cache_creation_tokens, "
        "sum(cache_read_tokens) AS cache_read_tokens, sum(cost_usd) AS cost_usd, "
        "sum(status = 'deferred') AS deferred FROM extraction_ledger WHERE day = ? "
        "GROUP BY backend ORDER BY backend",
        (clock.now()[:10],),
    ):
        values = dict(row)
        name = str(values.pop("backend"))
        found[name] = {k: (float(v) if k == "cost_usd" else int(v or 0)) for k, v in values.items()}
    return found


async def session(store: Store, session_id: str) -> dict[str, Any] | None:
    """The ``sessions`` row of one session, or None."""
    row = await store.row("SELECT * FROM sessions WHERE session_id = ?", (session_id,))
    return None if row is None else dict(row)


async def sessions(
    store: Store, project_id: str | None = None, *, limit: int | None = 200
) -> list[SessionSummary]:
    """Sessions, newest first, with ``tokens_injected`` including still-open hook ledgers.

    A session's injections are written to its ledger file by the hooks and folded into the
    ``sessions`` row at SessionEnd; until then they are read from the ledger here.
    """
    where = "" if project_id is None else "WHERE project_id = ?"
    params: list[Any] = [] if project_id is None else [project_id]
    rows: list[SessionSummary] = [
        cast("SessionSummary", dict(row))
        for row in await store.rows(
            "SELECT session_id, project_id, cwd, started_at, ended_at, tokens_injected, "
            f"injections, extraction_cost_usd, extraction_backend FROM sessions {where} "
            "ORDER BY coalesce(started_at, '') DESC, session_id",
            params,
        )
    ]
    rows = await anyio.to_thread.run_sync(session_table.with_open_ledgers, rows, project_id)
    return rows if limit is None else rows[:limit]


async def prune_candidates(
    store: Store, project_id: str | None = None, *, now: str | None = None, limit: int | None = None
) -> list[PruneCandidate]:
    """Current records scored below ``LOW_SCORE`` for over :data:`PRUNE_AFTER_DAYS` days.

    A project's candidates include the global ones (as :func:`status` counts them); ``None`` = all.
    """
    since = days_before(now, PRUNE_AFTER_DAYS)
    where = "superseded_at IS NULL AND pinned = 0 AND low_score_since < ?"
    params: list[Any] = [since]
    if project_id is not None:
        ids = search.scope_projects(project_id, "all")
        where += f" AND project_id IN ({', '.join('?' * len(ids))})"
        params.extend(ids)
    sql = (
        "SELECT id, project_id, type, title, score, low_score_since FROM records "
        f"WHERE {where} ORDER BY low_score_since, id"
    )
    if limit is not None:
        sql += " LIMIT ?"
        params.append(limit)
    return [PruneCandidate(**dict(row)) for row in await store.rows(sql, params)]


def _by_month(rows: list[SessionSummary]) -> dict[str, float]:
    """Extraction cost per calendar month (UTC) of the sessions' start, all projects."""
    months: dict[str, float] = {}
    for row in rows:
        cost = float(row["extraction_cost_usd"] or 0.0)
        if not cost:
            continue
        month = (row.get("started_at") or "")[:7] or "unknown"
        months[month] = months.get(month, 0.0) + cost
    return dict(sorted(months.items()))
