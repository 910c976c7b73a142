"""Validate an import before any of it is written: types, supersession, references (issue 16, #7).

:func:`check` is called by :func:`agentctx.store.transfer.import_data` first, so an import is all or
nothing: a file with any problem writes nothing, and the error names every bad record (or row) and
field. What is checked:

* shape: the file is an object whose ``records``, ``projects``, ``nodes``, ``edges`` and
  ``record_entities`` are lists of objects;
* each record's fields have their column's type and values (a string ``score`` is refused here,
  not left to make the dashboard fail later), within the schema's limits and choices;
* retrieval cues: a list of strings (or their stored form, one string), each record named;
* supersession: no record supersedes itself, ``superseded_by`` chains have no cycle, and
  ``superseded_at``/``superseded_by`` come together;
* references: every ``superseded_by``, edge end and entity link names a record, node or session in
  the file or already in the store (no dangling edge); with ``within_file`` (the confined import), a
  ``superseded_by`` must name a record of the file itself.

Both imports run the same :func:`check` before anything is written (issue 24, #7): the restore
(:func:`agentctx.store.transfer.import_data`) on the file as written, the confined import
(:func:`agentctx.store.confine.import_confined`) on the file as written and again on the records
as confinement made them. Kept apart from the imports themselves, which decide *what* an import
may change; this module only decides whether the data is well-formed.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from agentctx.core import clock, schema
from agentctx.core.errors import ValidationError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from agentctx.store import Store

#: How many problems the error lists before "and N more".
SHOWN = 20
_TABLES = ("projects", "records", "nodes", "edges", "record_entities")
#: Fields every imported record must carry (docs/spec.md, 8.4); the rest take column defaults.
REQUIRED = (
    "id",
    "project_id",
    "type",
    "title",
    "body",
    "scope",
    "confidence",
    "source",
    "valid_from",
    "recorded_at",
)
_TEXT_REQUIRED = ("id", "project_id", "title", "body", "valid_from", "recorded_at")
_TEXT_OPTIONAL = (
    "keywords",
    "key",
    "rationale",
    "superseded_at",
    "superseded_by",
    "last_accessed",
    "session_id",
)
_TIMES = ("valid_from", "recorded_at", "superseded_at", "last_accessed")
_CHOICES = {
    "type": schema.RECORD_TYPES,
    "scope": schema.SCOPES,
    "confidence": schema.CONFIDENCES,
    "source": schema.SOURCES,
}
_COUNTS = ("reinforce_count", "access_count")
_REALS = ("score", "claudemd_drift_score")
_FLAGS = ("pinned", "pending_embedding")
_LIMITS = {"title": schema.TITLE_MAX, "body": schema.BODY_MAX}
_ROW_TEXT = {
    "projects": ("project_id", "name", "created_at", "last_seen_at"),
    "nodes": ("id", "project_id", "kind", "name", "created_at"),
    "edges": ("id", "from_id", "to_id", "rel_type", "created_at"),
    "record_entities": ("record_id", "entity_id"),
}


async def check(store: Store, data: Mapping[str, Any], *, within_file: bool = False) -> None:
    """Raise :class:`ValidationError` naming every problem of ``data``; nothing is written.

    ``within_file``: a record may only be superseded by a record of the same file (the confined
    import, which touches no record it did not create).
    """
    problems = shape_problems(data)
    if not problems and within_file:
        problems = _outside_file_problems(data)
    if not problems:
        problems = await _reference_problems(store, data)
    refuse(problems)


def refuse(problems: list[str]) -> None:
    """Raise the one :class:`ValidationError` of an import that has ``problems`` (none: return)."""
    if problems:
        more = f"; and {len(problems) - SHOWN} more" if len(problems) > SHOWN else ""
        raise ValidationError("import: nothing was imported: " + "; ".join(problems[:SHOWN]) + more)


def _outside_file_problems(data: Mapping[str, Any]) -> list[str]:
    ids = {r.get("id") for r in data.get("records", [])}
    return [
        f"record {r['id']}: superseded_by {r['superseded_by']!r} is not a record of the file "
        "(a file's records are only superseded by its own)"
        for r in data.get("records", [])
        if r.get("superseded_by") is not None and r["superseded_by"] not in ids
    ]


def shape_problems(data: Any) -> list[str]:
    """The problems of ``data`` that need no store: shape, field types, supersession."""
    if not isinstance(data, dict):
        return ["the file is not an export object"]
    problems: list[str] = []
    for table in _TABLES:
        rows = data.get(table, [])
        if not isinstance(rows, list):
            problems.append(f"{table} is a {type(rows).__name__}, not a list")
        elif any(not isinstance(row, dict) for row in rows):
            problems.append(f"{table} holds an entry that is not an object")
    if problems:
        return problems
    for index, record in enumerate(data.get("records", [])):
        problems += _record_problems(index, record)
    for table, names in _ROW_TEXT.items():
        for index, row in enumerate(data.get(table, [])):
            label = f"{table} row {row.get('id') or index}"
            for name in names:
                if name not in row:
                    problems.append(f"a {table} row lacks a field ({name!r}): {label}")
                elif not isinstance(row[name], str) or not row[name]:
                    problems.append(f"{label}: {name} must be a non-empty string")
            if table == "edges" and "weight" in row and not _is_real(row["weight"]):
                problems.append(f"{label}: weight must be a number")
            if table == "edges" and row.get("rel_type") not in (*schema.REL_TYPES, None):
                problems.append(f"{label}: rel_type {row.get('rel_type')!r} is not known")
            if table == "nodes" and row.get("kind") not in (*schema.NODE_KINDS, None):
                problems.append(f"{label}: kind {row.get('kind')!r} is not known")
    if not problems:
        problems += _supersession_problems(data.get("records", []))
    return problems


def _record_problems(index: int, record: dict[str, Any]) -> list[str]:
    record_id = record.get("id")
    label = (
        f"record {record_id}" if isinstance(record_id, str) and record_id else f"record #{index}"
    )
    problems: list[str] = []
    missing = [name for name in REQUIRED if record.get(name) in (None, "")]
    if missing:
        problems.append(f"{label} lacks {', '.join(missing)}")
    for name in _TEXT_REQUIRED:
        value = record.get(name)
        if name in missing:
            continue
        if not isinstance(value, str) or not value.strip():
            problems.append(f"{label}: {name} must be a non-empty string, not {_show(value)}")
        elif name in _LIMITS and len(value) > _LIMITS[name]:
            problems.append(
                f"{label}: {name} is {len(value)} characters, over the limit of {_LIMITS[name]}"
            )
    for name in _TEXT_OPTIONAL:
        value = record.get(name)
        if value is not None and not isinstance(value, str):
            problems.append(f"{label}: {name} must be a string or null, not {_show(value)}")
    for name, allowed in _CHOICES.items():
        if name not in missing and name in record and record[name] not in allowed:
            problems.append(f"{label}: {name} {_show(record[name])} is not one of {allowed}")
    for name in _COUNTS:
        value = record.get(name, 0)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            problems.append(f"{label}: {name} must be a whole number >= 0, not {_show(value)}")
    for name in _REALS:
        if name in record and not _is_real(record[name]):
            problems.append(f"{label}: {name} must be a number, not {_show(record[name])}")
    for name in _FLAGS:
        if name in record and record[name] not in (True, False, 0, 1):
            problems.append(f"{label}: {name} must be true or false, not {_show(record[name])}")
    for name in _TIMES:
        value = record.get(name)
        if isinstance(value, str) and value:
            try:
                clock.parse_time(value)
            except ValueError:
                problems.append(f"{label}: {name} {_show(value)} is not an ISO-8601 time")
    if record.get("scope") == "project" and record.get("project_id") == schema.GLOBAL_PROJECT_ID:
        problems.append(f"{label}: a project-scoped record needs a project id, not 'global'")
    cues = record.get("cues")
    if not (cues is None or isinstance(cues, str) or _strings(cues)):
        problems.append(f"{label}: cues must be a list of strings, not {_show(cues)}")
    if (record.get("superseded_at") is None) != (record.get("superseded_by") is None):
        problems.append(f"{label}: superseded_at and superseded_by must be set together")
    if record.get("superseded_by") is not None and record.get("superseded_by") == record_id:
        problems.append(f"{label}: superseded_by names the record itself")
    return problems


def _supersession_problems(records: list[dict[str, Any]]) -> list[str]:
    """Cycles in the file's ``superseded_by`` chains (a → b → … → a)."""
    successor = {
        r["id"]: r["superseded_by"] for r in records if isinstance(r.get("superseded_by"), str)
    }
    problems: list[str] = []
    reported: set[str] = set()
    for start in successor:
        seen: list[str] = []
        current: str | None = start
        while current is not None and current not in seen:
            seen.append(current)
            current = successor.get(current)
        if current is not None and current not in reported:
            cycle = seen[seen.index(current) :]
            reported.update(cycle)
            problems.append(
                f"record {current}: superseded_by forms a cycle ({' -> '.join([*cycle, current])})"
            )
    return problems


async def _reference_problems(store: Store, data: Mapping[str, Any]) -> list[str]:
    """Ids the file names that neither the file nor the store holds."""
    records = {r["id"] for r in data.get("records", [])}
    nodes = {n["id"] for n in data.get("nodes", [])}
    wanted: list[tuple[str, str, str]] = []  # (what refers, field, id)
    for record in data.get("records", []):
        if record.get("superseded_by") and record["superseded_by"] not in records:
            wanted.append((f"record {record['id']}", "superseded_by", record["superseded_by"]))
    for edge in data.get("edges", []):
        for name in ("from_id", "to_id"):
            if edge[name] not in records and edge[name] not in nodes:
                wanted.append((f"edges row {edge['id']}", name, edge[name]))
    for link in data.get("record_entities", []):
        if link["record_id"] not in records:
            wanted.append(
                (f"record_entities row {link['record_id']}", "record_id", link["record_id"])
            )
        if link["entity_id"] not in nodes:
            wanted.append(
                (f"record_entities row {link['record_id']}", "entity_id", link["entity_id"])
            )
    problems: list[str] = []
    for label, name, target in wanted:
        if not await _known(store, target):
            problems.append(
                f"{label}: {name} {target!r} is in neither the file nor the store "
                "(the data is inconsistent)"
            )
    return problems


async def _known(store: Store, target: str) -> bool:
    for sql in (
        "SELECT 1 FROM records WHERE id = ?",
        "SELECT 1 FROM records_archive WHERE id = ?",
        "SELECT 1 FROM nodes WHERE id = ?",
        "SELECT 1 FROM sessions WHERE session_id = ?",
    ):
        if await store.rows(sql, (target,)):
            return True
    return False


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _is_real(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
