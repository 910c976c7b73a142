"""What each view shows, gathered from the library: plain data in, plain data out.

The handlers in :mod:`agentctx.web.app` call these, and these call the same library API as the CLI
and the MCP server (``Store``, :mod:`agentctx.preferences`, :mod:`agentctx.claude.claudemd`,
:mod:`agentctx.web.graph`); nothing here writes or runs SQL of its own. Where the library answers one
question at a time (``Store.search`` covers one project and the global records), the answers are
combined here.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import anyio

from agentctx.claude import claudemd
from agentctx.core import schema
from agentctx.core.errors import ValidationError
from agentctx.store import SearchQuery, inventory

if TYPE_CHECKING:
    from collections.abc import Mapping

    from agentctx.core.shapes import SessionListing
    from agentctx.records import Record
    from agentctx.store import Store

RESULTS_MAX = 200
SCOPES = ("all", "project", "global")
#: Days the Sessions charts cover.
CHART_DAYS = 30


@dataclass(frozen=True, slots=True)
class RecordFilter:
    """The Records view's query: text and filters, each empty for "any"."""

    q: str = ""
    project: str = ""
    type: str = ""
    scope: str = "all"
    confidence: str = ""
    superseded: bool = False
    limit: int = RESULTS_MAX

    @classmethod
    def parse(cls, params: Mapping[str, str]) -> RecordFilter:
        """From query parameters; an unknown type, scope or confidence is a ValidationError."""
        kind = params.get("type", "")
        scope = params.get("scope", "") or "all"
        confidence = params.get("confidence", "")
        for name, value, allowed in (
            ("type", kind, schema.RECORD_TYPES),
            ("scope", scope, SCOPES),
            ("confidence", confidence, schema.CONFIDENCES),
        ):
            if value and value not in allowed:
                raise ValidationError(f"{name} {value!r} is not one of: {', '.join(allowed)}")
        try:
            limit = max(1, min(RESULTS_MAX, int(params.get("limit") or RESULTS_MAX)))
        except ValueError as exc:
            raise ValidationError(f"limit {params.get('limit')!r} is not a number") from exc
        return cls(
            q=params.get("q", "").strip(),
            project=params.get("project", ""),
            type=kind,
            scope=scope,
            confidence=confidence,
            superseded=params.get("superseded", "") in ("1", "on", "true", "yes"),
            limit=limit,
        )


@dataclass(slots=True)
class Found:
    """Records matching a filter (best first when searched, newest first otherwise)."""

    records: list[tuple[Record, float | None]]
    total: int
    degraded: str | None = None


async def find_records(store: Store, f: RecordFilter) -> Found:
    """The records a filter selects: keyword search when ``q`` is given, else a listing."""
    types = (f.type,) if f.type else ()
    project = f.project or None
    if f.q:
        if project is not None or f.scope == "global":
            targets = [(project, f.scope)]
        else:  # Store.search covers one project (and the global records) per call
            targets = [(p["project_id"], "project") for p in await store.projects()]
            targets.append((None, "global"))
        hits: dict[str, tuple[Record, float | None]] = {}
        degraded: str | None = None
        for target, scope in targets:
            result = await store.search(
                SearchQuery(
                    text=f.q,
                    project_id=target,
                    types=types,
                    scope=scope,
                    include_superseded=f.superseded,
                    limit=RESULTS_MAX,
                )
            )
            degraded = degraded or result.degraded
            for hit in result.hits:
                if not f.confidence or hit.record.confidence == f.confidence:
                    hits.setdefault(hit.record.id, (hit.record, hit.score))
        ranked = sorted(hits.values(), key=lambda pair: -(pair[1] or 0.0))
        return Found(ranked[: f.limit], len(ranked), degraded)
    if f.scope == "global":
        listed = await store.list_records(
            schema.GLOBAL_PROJECT_ID, types=types, include_superseded=f.superseded
        )
    else:
        listed = await store.list_records(project, types=types, include_superseded=f.superseded)
        if project is not None and f.scope == "all" and project != schema.GLOBAL_PROJECT_ID:
            listed += await store.list_records(
                schema.GLOBAL_PROJECT_ID, types=types, include_superseded=f.superseded
            )
        if f.scope == "project":
            listed = [r for r in listed if r.project_id != schema.GLOBAL_PROJECT_ID]
    if f.confidence:
        listed = [r for r in listed if r.confidence == f.confidence]
    listed.sort(key=lambda r: (r.recorded_at, r.id), reverse=True)
    return Found([(r, None) for r in listed[: f.limit]], len(listed))


@dataclass(slots=True)
class ProjectSummary:
    """One project on the Projects view."""

    project_id: str
    name: str
    root: str | None
    last_activity: str | None
    counts: dict[str, int] = field(default_factory=dict)
    sessions: int = 0

    @property
    def current(self) -> int:
        """Current records of the project, all types."""
        return sum(self.counts.values())


async def project_summaries(store: Store) -> list[ProjectSummary]:
    """Every project with its current records by type and its last activity; global last."""
    current = await store.list_records(None, include_superseded=False)
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    latest: dict[str, str] = {}
    for record in current:
        counts[record.project_id][record.type] += 1
        latest[record.project_id] = max(latest.get(record.project_id, ""), record.recorded_at)
    sessions: Counter[str] = Counter()
    for row in await inventory.sessions(store, None, limit=None):
        project_id = row["project_id"] or ""
        sessions[project_id] += 1
        if row["started_at"]:
            latest[project_id] = max(latest.get(project_id, ""), row["started_at"])
    out: list[ProjectSummary] = []
    for project in await store.projects():
        pid = project["project_id"]
        last = max(project["last_seen_at"] or "", latest.get(pid, "")) or None
        out.append(
            ProjectSummary(
                pid, project["name"], project["root"], last, dict(counts[pid]), sessions[pid]
            )
        )
    out.sort(key=lambda p: p.last_activity or "", reverse=True)
    known = {p.project_id for p in out}
    for pid in counts:  # records of a project whose row is gone (e.g. imported)
        if pid not in known and pid != schema.GLOBAL_PROJECT_ID:
            out.append(ProjectSummary(pid, pid, None, latest.get(pid), dict(counts[pid])))
    glob = schema.GLOBAL_PROJECT_ID
    out.append(ProjectSummary(glob, "Global", None, latest.get(glob), dict(counts[glob])))
    return out


async def project_choices(store: Store) -> list[tuple[str, str]]:
    """(project_id, name) of every project, most recently seen first, then the global namespace."""
    rows = await store.projects()
    return [(r["project_id"], r["name"]) for r in rows] + [(schema.GLOBAL_PROJECT_ID, "Global")]


# -- sessions ---------------------------------------------------------------------------------------


def _moment(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def duration_seconds(started: str | None, ended: str | None) -> float | None:
    """Seconds between two stored times, None when either is missing."""
    a, b = _moment(started), _moment(ended)
    if a is None or b is None:
        return None
    return max(0.0, (b - a).total_seconds())


@dataclass(slots=True)
class DayTotals:
    """One day of the Sessions charts (or, as ``day`` "total", their sum)."""

    day: str
    sessions: int = 0
    tokens: int = 0
    cost: float = 0.0
    records: int = 0
    injections: int = 0

    def add(self, row: SessionListing) -> None:
        """Count one session in."""
        self.sessions += 1
        self.tokens += int(row["tokens_injected"] or 0)
        self.cost += float(row["extraction_cost_usd"] or 0.0)
        self.records += int(row["records_extracted"] or 0)
        self.injections += int(row["injections"] or 0)


async def session_rows(
    store: Store, project_id: str | None, limit: int | None
) -> list[SessionListing]:
    """The newest sessions with tokens injected, extraction cost, records extracted, duration and
    their project's name (a project without a row, where only the hooks ran, is named after the
    session's folder: never shown as its 64-hex id)."""
    rows = await inventory.sessions(store, project_id, limit=limit)
    names = {p["project_id"]: p["name"] for p in await store.projects()}
    out: list[SessionListing] = []
    for row in rows:
        # The sessions row's extraction bookkeeping columns (not in the inventory's list).
        full = await inventory.session(store, row["session_id"]) or {}
        out.append(
            {
                **row,
                "records_extracted": int(full.get("records_extracted") or 0),
                "extraction_error": full.get("extraction_error"),
                "duration_s": duration_seconds(row["started_at"], row["ended_at"]),
                "project_name": project_label(row["project_id"], row["cwd"], names),
            }
        )
    return out


def project_label(project_id: str | None, cwd: str | None, names: Mapping[str, str]) -> str:
    """A project's name: its row's, else its folder's (``cwd``), else a short form of its id."""
    if project_id == schema.GLOBAL_PROJECT_ID:
        return "Global"
    if not project_id:
        return "—"
    if project_id in names:
        return names[project_id]
    folder = os.path.basename(os.path.normpath(cwd)) if cwd else ""
    return folder or f"{project_id[:8]}…"


def _started_day(row: SessionListing, today: datetime) -> str:
    """The day a session started; an open session not yet in the store (no start) is today's."""
    started = _moment(row["started_at"])
    return (started or today).date().isoformat()


def day_totals(
    rows: list[SessionListing], today: datetime, days: int = CHART_DAYS
) -> list[DayTotals]:
    """Per-day totals of sessions started in the ``days`` days up to ``today``, oldest first."""
    first = (today - timedelta(days=days - 1)).date()
    totals = {
        (first + timedelta(days=i)).isoformat(): DayTotals((first + timedelta(days=i)).isoformat())
        for i in range(days)
    }
    for row in rows:
        day = totals.get(_started_day(row, today))
        if day is not None:
            day.add(row)
    return list(totals.values())


@dataclass(slots=True)
class SessionsView:
    """What the Sessions page shows, all from one list of sessions: those of the window (the
    charts' days), newest first; the charts' days; and their total (the charts' headline figures
    and the table's total row are this one object, so they cannot disagree)."""

    rows: list[SessionListing]
    days: list[DayTotals]
    total: DayTotals


def sessions_view(
    rows: list[SessionListing], today: datetime, days: int = CHART_DAYS
) -> SessionsView:
    """The sessions of the last ``days`` days up to ``today`` (of ``rows``), per day and in all."""
    chart = day_totals(rows, today, days)
    first = chart[0].day if chart else today.date().isoformat()
    last = today.date().isoformat()
    shown = [row for row in rows if first <= _started_day(row, today) <= last]
    total = DayTotals("total")
    for row in shown:
        total.add(row)
    return SessionsView(shown, chart, total)


# -- sync -------------------------------------------------------------------------------------------


@dataclass(slots=True)
class SyncView:
    """The drift report of one project, or why there is none."""

    project_id: str
    root: str | None
    report: claudemd.SyncReport | None = None
    problem: str | None = None


async def sync_report(store: Store, project_id: str) -> SyncView:
    """The CLAUDE.md drift report of a project, as ``agentctx sync`` computes it (nothing written)."""
    row = next((p for p in await store.projects() if p["project_id"] == project_id), None)
    root = row["root"] if row is not None else None
    if not root or not await anyio.to_thread.run_sync(os.path.isdir, root):
        return SyncView(project_id, root, problem="the project's folder is not on this machine")
    files = await claudemd.discover(root, root)
    target = files[0].path if files else os.path.join(root, "CLAUDE.md")
    report = await claudemd.report(store, project_id, files=files, target=target, root=root)
    return SyncView(project_id, root, report)
