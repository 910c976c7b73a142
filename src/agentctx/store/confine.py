"""Importing what a repository holds: confined to the importing project (docs/security.md, "Imports").

A file read from a repository (a teammate's ``.agentctx/context.md``, or any export someone put
there) is untrusted input. :func:`import_confined` merges it so that it can only add team context:

- every record goes to the importing project, with ``scope`` project, never global, never pinned,
  ``confidence`` inferred (shown to Claude as unconfirmed) and ``source`` import, its counters
  zeroed and its times no later than now: it weighs no more in search than a record written now
  (its keywords and cues are capped by the one write path, :func:`agentctx.core.writes.store_row`);
- the file is validated as ``--restore`` validates one (:func:`agentctx.store.import_check.check`)
  before anything is written: a record that supersedes itself, a cycle, a cue that is not a string
  refuse the whole file, each problem named;
- each carries its provenance in ``session_id``: ``import:<file>[@<commit>]`` (the path inside its
  repository and the last commit of the file when git tracks it; ``+modified`` when it differs
  from that commit), shown by ``agentctx show`` and the dashboard;
- it touches no record it did not create: an id already in the store is skipped unless that record
  came from an earlier confined import into the same project (then a supersession made since then
  travels with the file), and a record whose key collides with a current one here is skipped (the
  local one stays); handovers (one person's session state) are not imported;
- nothing else in the file is used: project rows (their ``root`` is a path on someone's machine,
  and paths are never write targets), nodes, entity links and edges other than the ``supersedes``
  edges among the file's own records are dropped.

Restoring one's own full export, every field as written, is the separate, explicit
``agentctx import --restore`` (:func:`agentctx.store.transfer.import_data`); :func:`restore_plan`
says what it will change first.
"""

from __future__ import annotations

import os
import subprocess
from typing import TYPE_CHECKING, Any

import sqlean

from agentctx.core import clock, schema, writes
from agentctx.core.errors import ValidationError
from agentctx.store import import_check
from agentctx.store.transfer import ImportReport, record_from_data

if TYPE_CHECKING:
    from collections.abc import Mapping

    from agentctx.records import Record
    from agentctx.store import Store, Transaction

PREFIX = "import:"
#: Record types a repository file may bring (a handover is one person's session state).
IMPORTED_TYPES = ("decision", "convention", "preference", "discovery", "bugfix", "profile")


def confine(data: Mapping[str, Any], project_id: str, origin: str) -> dict[str, Any]:
    """The parsed file with every record made the importing project's team context (pure)."""
    records = []
    now = clock.now()
    for item in data.get("records", []):
        if not isinstance(item, dict):
            raise ValidationError("import: a record entry is not an object")
        if item.get("type") in IMPORTED_TYPES:
            records.append(confined_record(item, project_id, origin, now))
    ids = {r.get("id") for r in records}
    edges = [
        e
        for e in data.get("edges", [])
        if isinstance(e, dict)
        and e.get("rel_type") == "supersedes"
        and e.get("from_id") in ids
        and e.get("to_id") in ids
    ]
    return {**data, "projects": [], "records": records, "edges": edges, "nodes": [],
            "record_entities": []}  # fmt: skip


def confined_record(
    item: Mapping[str, Any], project_id: str, origin: str, now: str
) -> dict[str, Any]:
    """One record of a file as team context of ``project_id``: what the file may not choose is
    set here, whatever it says (see the module docstring)."""
    return {
        **item,
        # no more weight than a record written now: a time in the future would never age
        "valid_from": _not_after(item.get("valid_from"), now),
        "recorded_at": _not_after(item.get("recorded_at"), now),
        "project_id": project_id,
        "scope": "project",
        "pinned": False,
        "confidence": "inferred",
        "source": "import",
        "session_id": origin,
        "reinforce_count": 0,
        "access_count": 0,
        "last_accessed": None,
        "score": 1.0,
        "claudemd_drift_score": 0.0,
        "pending_embedding": True,
    }


def _not_after(value: Any, now: str) -> Any:
    """A record's time, or ``now`` when it is later; anything unreadable is left to the check."""
    if not isinstance(value, str):
        return value
    try:
        return min(clock.parse_time(value), now)
    except ValueError:
        return value


async def import_confined(
    store: Store, data: Mapping[str, Any], project_id: str, origin: str
) -> ImportReport:
    """Merge a repository's file as team context of ``project_id`` (see the module docstring).

    One transaction, idempotent by id; ``report.kept_local`` lists the records left out because
    they would have touched a record this import did not create.
    """
    # the same validation as --restore, before anything is written: every record of the file
    # (the handovers it will not import too), then the records as confinement made them
    rows = data.get("records", [])
    if isinstance(rows, list):  # a field the file leaves out takes what confinement will set
        now = clock.now()
        rows = [
            {**confined_record(r, project_id, origin, now), **r} if isinstance(r, dict) else r
            for r in rows
        ]
    import_check.refuse(import_check.shape_problems({**data, "records": rows}))
    confined = confine(data, project_id, origin)
    await import_check.check(store, confined, within_file=True)
    records = [record_from_data(item) for item in confined["records"]]
    report = ImportReport()
    try:
        await _apply(store, records, confined["edges"], project_id, report)
    except sqlean.IntegrityError as exc:
        raise ValidationError(
            f"import: the data is inconsistent ({exc}); nothing was imported"
        ) from exc
    return report


async def _apply(
    store: Store,
    records: list[Record],
    edges: list[dict[str, Any]],
    project_id: str,
    report: ImportReport,
) -> None:
    async with store.transaction() as tx:
        await tx.execute("PRAGMA defer_foreign_keys = ON")
        plan = await _plan(store, tx, records, project_id)
        for record in records:
            action = plan[record.id]
            if action == "create":
                await tx.run(writes.store_row(record.to_row()))
                report.added["records"] = report.added.get("records", 0) + 1
            else:
                report.skipped["records"] = report.skipped.get("records", 0) + 1
            if action == "update":
                # a supersession the file's author made since an earlier import of it
                await tx.execute(
                    schema.SUPERSEDE_SQL, (record.superseded_at, record.superseded_by, record.id)
                )
                report.superseded_on_import.append(record.id)
            elif action == "keep_local":
                report.kept_local.append(record.id)
        if any(action in ("create", "update") for action in plan.values()):
            tx.mark_project_changed(project_id)
        created = {i for i, action in plan.items() if action == "create"}
        for edge in edges:
            if edge["from_id"] not in created and edge["to_id"] not in created:
                continue
            added = await tx.execute(
                "INSERT OR IGNORE INTO edges(id, from_id, to_id, rel_type, weight, created_at) "
                "VALUES (?, ?, ?, 'supersedes', 1.0, ?)",
                (
                    str(edge.get("id") or clock.ulid()),
                    edge["from_id"],
                    edge["to_id"],
                    str(edge.get("created_at") or clock.now()),
                ),
            )
            bucket = report.added if added == 1 else report.skipped
            bucket["edges"] = bucket.get("edges", 0) + 1


async def _plan(
    store: Store, tx: Transaction, records: list[Record], project_id: str
) -> dict[str, str]:
    """Per record: ``create``, ``update`` (its supersession), ``skip`` or ``keep_local``."""
    plan: dict[str, str] = {}
    ours: set[str] = set()  # already here from an earlier confined import into this project
    claimed: set[tuple[str, str | None]] = set()
    for record in records:
        stored = await store.find(record.id)
        if stored is not None:
            later = stored.superseded_at is None and record.superseded_at is not None
            if stored.project_id != project_id or not (stored.session_id or "").startswith(PREFIX):
                # someone else's record (or the user's own): never touched, whatever the file says
                plan[record.id] = "keep_local" if later else "skip"
                continue
            ours.add(record.id)
            plan[record.id] = "update" if later else "skip"
            continue
        if record.superseded_at is None and record.key is not None:
            slot = (record.type, record.key)
            if slot in claimed or await tx.keyed_current(record):
                plan[record.id] = "keep_local"  # the current record of this key stays
                continue
            claimed.add(slot)
        plan[record.id] = "create"
    changed = True
    while changed:  # a record whose successor is not (or no longer) here cannot be superseded
        changed = False
        for record in records:
            successor = record.superseded_by
            if plan[record.id] not in ("create", "update") or successor is None:
                continue
            if plan.get(successor) != "create" and successor not in ours:
                plan[record.id] = "keep_local" if plan[record.id] == "create" else "skip"
                changed = True
    return plan


def provenance(path: str) -> str:
    """``import:<file>[@<commit>[+modified]]``: where a file came from, as precisely as git says.

    ``<file>`` is the path inside its repository when git knows the folder, else the absolute
    path; the commit is the last one that changed a tracked file.
    """
    absolute = os.path.abspath(path)
    folder = os.path.dirname(absolute)
    top = _git(folder, "rev-parse", "--show-toplevel")
    if not top:
        return PREFIX + absolute
    name = os.path.relpath(os.path.realpath(absolute), os.path.realpath(top))
    if _git(top, "ls-files", "--error-unmatch", "--", name) is None:
        return PREFIX + name
    commit = _git(top, "log", "-1", "--format=%h", "--", name)
    if not commit:
        return PREFIX + name
    modified = _git(top, "diff", "--quiet", "HEAD", "--", name) is None
    return f"{PREFIX}{name}@{commit}{'+modified' if modified else ''}"


def _git(cwd: str, *args: str) -> str | None:
    """A git command's stripped output, or None when it fails (or git is missing)."""
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


async def restore_plan(store: Store, data: Mapping[str, Any]) -> list[str]:
    """What ``import --restore`` of ``data`` will change, one line each (read only)."""
    records = [r for r in data.get("records", []) if isinstance(r, dict)]
    new = [r for r in records if await store.find(str(r.get("id"))) is None]
    present = len(records) - len(new)
    by_project: dict[str, int] = {}
    for r in new:
        by_project[str(r.get("project_id"))] = by_project.get(str(r.get("project_id")), 0) + 1
    lines = [
        f"adds {len(new)} records ({present} already present): "
        + (", ".join(f"{n} to {p}" for p, n in sorted(by_project.items())) or "none")
    ]
    global_ = sum(1 for r in new if r.get("scope") == "global")
    pinned = sum(1 for r in new if r.get("pinned"))
    if global_ or pinned:
        lines.append(f"{global_} of them global (every project sees them), {pinned} pinned")
    later = 0
    for r in records:
        stored = await store.find(str(r.get("id")))
        if stored is not None and stored.superseded_at is None and r.get("superseded_at"):
            later += 1
    if later:
        lines.append(f"marks {later} records already here as superseded")
    known = {str(p["project_id"]) for p in await store.projects()}
    for project in data.get("projects", []):
        if isinstance(project, dict) and str(project.get("project_id")) not in known:
            lines.append(
                f"adds project {project.get('name')} ({project.get('project_id')})"
                + (f" at {project['root']}" if project.get("root") else "")
            )
    return lines
