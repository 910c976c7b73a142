"""Export and import: the whole store as JSON or as organized, readable Markdown, and back.

Both formats carry every field, so ``export`` then ``import`` on an empty home gives the same store,
and importing into the store it came from changes nothing (rows are merged by id). The Markdown form is
meant for people: grouped by project and type, a heading per record, the body as written; the fields a
person does not need to read ride along in one HTML comment per record, invisible when rendered::

    #### Use gRPC for internal services
    <!-- agentctx:record {"id": "01J...", "type": "decision", ...} -->
    We moved from REST to gRPC ...
    <!-- /agentctx:record 01J... -->

The team file (``.agentctx/context.md``, written by :mod:`agentctx.team`) is the same format with a
``"team": true`` export marker, one project and only the fields that describe the fact and its history:
no project id (a teammate's clone may compute another one), no counters, scores or session ids, so that
an unchanged store renders byte-identical text and a change touches only its own lines. Parsing a team
file gives its records the project of the importing side (:func:`parse`'s ``project_id``, by default
the project of the working directory).

:func:`export_data` and :func:`import_data` are the data path under both formats: free functions over
an open :class:`~agentctx.store.Store`, the import one write transaction of it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict, cast

import orjson
import sqlean

from agentctx.core import clock, schema, writes
from agentctx.core.errors import TransferError, ValidationError
from agentctx.core.project import identify
from agentctx.core.schema import RECORD_TYPES
from agentctx.records import COLUMNS, NewRecord, Record
from agentctx.store import import_check

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from agentctx.core.shapes import EdgeRow, LinkRow, NodeRow, ProjectRow, RecordRow
    from agentctx.store import Store, Transaction

FORMAT = "agentctx-export"
_PLURAL = {
    "decision": "Decisions",
    "convention": "Conventions",
    "preference": "Preferences",
    "discovery": "Discoveries",
    "bugfix": "Bugfixes",
    "handover": "Handovers",
    "profile": "Profile",
}
assert set(_PLURAL) == set(RECORD_TYPES)
#: The record fields a team file carries; the rest are local bookkeeping (docs/spec.md, 8.5).
#: No confidence, source or pin: whoever imports a team file gets team context, unconfirmed
#: (agentctx.store.confine), so the file says the same from every teammate's store.
TEAM_FIELDS = (
    "id",
    "type",
    "valid_from",
    "recorded_at",
    "keywords",
    "key",
    "rationale",
    "superseded_at",
    "superseded_by",
)
TEAM_TITLE = "# agentctx team context"
_TEAM_NOTE = (
    "The shared records of this project, written by agentctx while `team_export` is on. Merge them "
    "into your own store with `agentctx import .agentctx/context.md`, run inside the project (records "
    "you already have are skipped). Change records with agentctx, not here: this file is rewritten."
)
_META = "<!-- agentctx:{kind} {payload} -->"
_RECORD_START = re.compile(r"^<!-- agentctx:record (\{.*\}) -->$")
_BLOCK = re.compile(r"^<!-- agentctx:(project|edge|node|link|export) (\{.*\}) -->$")


class Export(TypedDict):
    """An export (:func:`export_data`): every row of the records it holds and what they refer to.

    A team file's export marker adds ``team``; :func:`parse` drops it again.
    """

    format: str
    version: int
    projects: list[ProjectRow]
    records: list[RecordRow]
    edges: list[EdgeRow]
    nodes: list[NodeRow]
    record_entities: list[LinkRow]
    team: NotRequired[bool]


@dataclass(slots=True)
class ImportReport:
    """What an import did: ``added`` new rows per table, ``skipped`` rows already present."""

    added: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    superseded_on_conflict: list[str] = field(default_factory=list)
    superseded_on_import: list[str] = field(default_factory=list)
    #: Records a confined import left out: they would have touched a record it did not create.
    kept_local: list[str] = field(default_factory=list)


# -- the data path ----------------------------------------------------------------------------------


async def export_data(store: Store, project_id: str | None = None) -> Export:
    """Projects, records, edges, nodes and entity links as plain data (``None`` = everything).

    Archived records are exported with the rest (they are superseded records); imported, they
    land in ``records`` as superseded records, and a later consolidation archives them again.
    """
    records = await store.list_records(project_id)
    ids = {r.id for r in records}
    project_ids = {r.project_id for r in records}
    if project_id is not None:
        project_ids.add(project_id)
    projects = [p for p in await store.projects() if p["project_id"] in project_ids]
    edges = [
        cast("EdgeRow", dict(row))
        for row in await store.rows("SELECT * FROM edges ORDER BY created_at, id")
        if row["from_id"] in ids or row["to_id"] in ids
    ]
    links = [
        cast("LinkRow", dict(row))
        for row in await store.rows("SELECT * FROM record_entities ORDER BY record_id, entity_id")
        if row["record_id"] in ids
    ]
    nodes = [
        cast("NodeRow", dict(row))
        for row in await store.rows("SELECT * FROM nodes ORDER BY project_id, kind, name")
        if row["project_id"] in project_ids
    ]
    return {
        "format": FORMAT,
        "version": 1,
        "projects": sorted(projects, key=lambda p: str(p["project_id"])),
        "records": [r.to_dict() for r in records],
        "edges": edges,
        "nodes": nodes,
        "record_entities": links,
    }


async def import_data(store: Store, data: Mapping[str, Any]) -> ImportReport:
    """Merge an export (the shape of :func:`export_data`); rows already present are kept.

    Idempotent by id, and one transaction: an error leaves the store as it was. A current handover
    or keyed profile record that collides with a current one already here is resolved by time: the
    later ``valid_from`` stays current and the other is marked superseded by it, so the keyed rules
    still hold. Handovers collide per checkout (``key``): current ones of different checkouts
    coexist, and a keyed one also meets the legacy (key NULL) one.
    """
    await import_check.check(store, data)  # all or nothing: every problem named, nothing written
    report = ImportReport()
    records = [record_from_data(item) for item in data.get("records", [])]
    projects = {r.id: r.project_id for r in records}
    for record in records:
        successor = record.superseded_by
        if successor is None:
            continue
        if successor not in projects:
            known = await store.find(successor)
            projects[successor] = known.project_id if known else record.project_id
        if projects[successor] != record.project_id:
            raise ValidationError(
                f"import: record {record.id} is superseded by {successor} of another project "
                "or scope; a record is only superseded within its own namespace"
            )
    try:
        async with store.transaction() as tx:
            await tx.execute("PRAGMA defer_foreign_keys = ON")
            await _insert_rows(tx, "projects", data.get("projects", []), report)
            for record in records:
                await _import_record(store, tx, record, report)
            await _insert_rows(tx, "nodes", data.get("nodes", []), report)
            await _insert_rows(tx, "edges", data.get("edges", []), report)
            await _insert_rows(tx, "record_entities", data.get("record_entities", []), report)
    except sqlean.IntegrityError as exc:
        raise ValidationError(
            f"import: the data is inconsistent ({exc}), e.g. a reference to a record that is "
            "neither in the file nor in the store; nothing was imported"
        ) from exc
    return report


async def _import_record(
    store: Store, tx: Transaction, record: Record, report: ImportReport
) -> None:
    stored = await store.find(record.id)
    if stored is not None:  # archived ones count as present
        if (
            stored.superseded_at is None
            and record.superseded_at is not None
            and stored.project_id == record.project_id
        ):
            # A supersession made after an earlier import travels with the next one. Like every
            # supersession it is set once (only on a current row), so the merge stays idempotent.
            await tx.execute(
                schema.SUPERSEDE_SQL, (record.superseded_at, record.superseded_by, record.id)
            )
            tx.mark_project_changed(record.project_id)
            report.superseded_on_import.append(record.id)
        report.skipped["records"] = report.skipped.get("records", 0) + 1
        return
    if record.superseded_at is None:
        # A keyed handover meets its checkout's current one and the legacy (key NULL) one.
        for rival in await tx.keyed_current(record):
            other = await store.get(rival)
            newer, older = (
                (record, other) if record.valid_from >= other.valid_from else (other, record)
            )
            lost = older is record
            if lost:
                record = replace(record, superseded_at=newer.valid_from, superseded_by=newer.id)
            else:
                await tx.execute(schema.SUPERSEDE_SQL, (newer.valid_from, newer.id, older.id))
            await tx.execute(
                schema.INSERT_EDGE_SQL,
                (clock.ulid(), newer.id, older.id, "supersedes", newer.valid_from),
            )
            report.superseded_on_conflict.append(older.id)
            if lost:
                break  # the record lost: the other rivals are not its to resolve
    await tx.run(writes.store_row(record.to_row()))  # redacted
    tx.mark_project_changed(record.project_id)
    report.added["records"] = report.added.get("records", 0) + 1


_TABLE_COLUMNS = {
    "projects": ("project_id", "name", "root", "remote", "created_at", "last_seen_at"),
    "nodes": ("id", "project_id", "kind", "name", "created_at"),
    "edges": ("id", "from_id", "to_id", "rel_type", "weight", "created_at"),
    "record_entities": ("record_id", "entity_id"),
}


async def _insert_rows(
    tx: Transaction, table: str, rows: Iterable[dict[str, Any]], report: ImportReport
) -> None:
    columns = _TABLE_COLUMNS[table]
    sql = (
        f"INSERT OR IGNORE INTO {table}({', '.join(columns)}) "
        f"VALUES ({', '.join('?' * len(columns))})"
    )
    for row in rows:
        try:
            values = [row[name] for name in columns]
        except (KeyError, TypeError) as exc:
            raise ValidationError(f"import: a {table} row lacks a field ({exc})") from exc
        if table == "nodes" and isinstance(values[3], str):
            values[3] = writes.node_name(values[3])  # redacted like every node name
        bucket = report.added if await tx.execute(sql, values) == 1 else report.skipped
        bucket[table] = bucket.get(table, 0) + 1


_DEFAULTS: dict[str, Any] = {
    "keywords": "",
    "pinned": False,
    "reinforce_count": 0,
    "access_count": 0,
    "score": 1.0,
    "claudemd_drift_score": 0.0,
    "pending_embedding": True,
    "cues": "",
}


def record_from_data(item: Any) -> Record:
    """A record of an export's data, its fields checked (ValidationError naming the one that is wrong)."""
    if not isinstance(item, dict):
        raise ValidationError("import: a record entry is not an object")
    missing = [name for name in import_check.REQUIRED if not item.get(name)]
    if missing:
        raise ValidationError(f"import: a record lacks {', '.join(missing)}")
    try:
        draft = NewRecord(
            type=item.get("type", ""),
            title=item.get("title", ""),
            body=item.get("body", ""),
            project_id=item["project_id"],
            scope=item.get("scope", "project"),
            confidence=item.get("confidence", "inferred"),
            source=item.get("source", "import"),
        ).validated()
    except ValidationError as exc:  # import_check refuses these first; this names the record too
        raise ValidationError(f"import: record {item.get('id')!r}: {exc}") from exc
    data = {name: item[name] for name in COLUMNS if name in item}
    data.update(title=draft.title, body=draft.body, project_id=draft.project_id)
    try:
        return Record.from_row({name: data.get(name, _DEFAULTS.get(name)) for name in COLUMNS})
    except TypeError as exc:
        raise ValidationError(f"import: record {item.get('id')!r} is malformed ({exc})") from exc


# -- the text formats -------------------------------------------------------------------------------


def to_json(data: Mapping[str, Any]) -> bytes:
    """The export (:class:`Export`, or one :func:`parse` read back) as pretty JSON bytes."""
    return orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"


def to_markdown(data: Mapping[str, Any]) -> str:
    """The export (:class:`Export`, or one :func:`parse` read back) as organized Markdown (see the module docstring)."""
    out = ["# agentctx context export", ""]
    out.append(_META.format(kind="export", payload=_dumps({"format": FORMAT, "version": 1})))
    out.append("")
    names = {p["project_id"]: p for p in data.get("projects", [])}
    by_project: dict[str, list[dict[str, Any]]] = {}
    for record in data.get("records", []):
        by_project.setdefault(record["project_id"], []).append(record)
    for project_id in sorted(by_project, key=lambda p: (p == "global", p)):
        project = names.get(project_id)
        label = (
            "Global (every project)"
            if project_id == "global"
            else (project["name"] if project else project_id)
        )
        out += [f"## {label}", ""]
        if project:
            out += [_META.format(kind="project", payload=_dumps(project)), ""]
        for record_type in RECORD_TYPES:
            group = [r for r in by_project[project_id] if r["type"] == record_type]
            if not group:
                continue
            out += [f"### {_PLURAL[record_type]}", ""]
            for record in group:
                meta = {k: v for k, v in record.items() if k not in ("title", "body")}
                state = "" if record["superseded_at"] is None else " (superseded)"
                out += [
                    f"#### {record['title']}{state}",
                    _META.format(kind="record", payload=_dumps(meta)),
                ]
                out += [record["body"], f"<!-- /agentctx:record {record['id']} -->", ""]
    listed = set(by_project)
    for project in data.get("projects", []):
        if project["project_id"] not in listed:
            out += [_META.format(kind="project", payload=_dumps(project))]
    for kind, key in (("node", "nodes"), ("edge", "edges"), ("link", "record_entities")):
        rows = data.get(key, [])
        if rows:
            out += ["", f"<!-- agentctx {key} -->"]
            out += [_META.format(kind=kind, payload=_dumps(row)) for row in rows]
    return "\n".join(out) + "\n"


def to_team_markdown(records: list[RecordRow], edges: list[EdgeRow]) -> str:
    """One project's shared records (and the edges among them) as a team file."""
    out = [TEAM_TITLE, ""]
    marker = {"format": FORMAT, "team": True, "version": 1}
    out += [_META.format(kind="export", payload=_dumps(marker)), "", _TEAM_NOTE, ""]
    for record_type in RECORD_TYPES:
        group = [r for r in records if r["type"] == record_type]
        if not group:
            continue
        out += [f"## {_PLURAL[record_type]}", ""]
        for record in group:
            meta = {k: record.get(k) for k in TEAM_FIELDS}
            state = "" if record.get("superseded_at") is None else " (superseded)"
            out += [
                f"### {record['title']}{state}",
                _META.format(kind="record", payload=_dumps(meta)),
                record["body"],
                f"<!-- /agentctx:record {record['id']} -->",
                "",
            ]
    if edges:
        out += ["<!-- agentctx edges -->"]
        out += [_META.format(kind="edge", payload=_dumps(edge)) for edge in edges]
    return "\n".join(out).rstrip("\n") + "\n"


def parse(text: str, *, project_id: str | None = None) -> dict[str, Any]:
    """Read a JSON or Markdown export back into the data shape of :func:`export_data`.

    A team file's records go to ``project_id``, by default the project of the working directory
    (the team file of a clone belongs to whichever project id that clone computes).
    """
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            data = orjson.loads(stripped)
        except orjson.JSONDecodeError as exc:
            raise TransferError(f"not valid JSON: {exc}") from exc
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise TransferError(
                'this JSON is not an agentctx export (no "format": "agentctx-export")'
            )
        return data
    data = _parse_markdown(text)
    if data.pop("team", False):
        if project_id is None:
            project_id = identify(os.getcwd()).project_id
        for record in data["records"]:  # confined (agentctx.store.confine), whatever it says
            record.update(
                project_id=project_id,
                scope="project",
                pinned=False,
                confidence="inferred",
                source="import",
            )
    return data


def _parse_markdown(text: str) -> dict[str, Any]:
    data: dict[str, Any] = {
        "format": FORMAT,
        "version": 1,
        "projects": [],
        "records": [],
        "edges": [],
        "nodes": [],
        "record_entities": [],
    }
    targets = {"project": "projects", "node": "nodes", "edge": "edges", "link": "record_entities"}
    if text.count("\r\n") == text.count("\n"):  # a CRLF file; else CRs belong to the bodies
        text = text.replace("\r\n", "\n")
    lines = text.split("\n")
    marks = [line.removesuffix("\r") for line in lines]  # markers also match in mixed endings
    seen_header = False
    headings: tuple[str, ...] = ("#### ",)
    i = 0
    while i < len(lines):
        line = marks[i]
        start = _RECORD_START.match(line)
        if start:
            record = _load(start.group(1), i)
            heading = marks[i - 1] if i > 0 else ""
            if not heading.startswith(headings):
                raise TransferError(
                    f"line {i + 1}: a record marker must follow its '#### title' line "
                    "('### title' in a team file)"
                )
            title = heading.split(" ", 1)[1]
            if record.get("superseded_at") is not None and title.endswith(" (superseded)"):
                title = title[: -len(" (superseded)")]
            end = f"<!-- /agentctx:record {record.get('id')} -->"
            try:
                stop = marks.index(end, i + 1)
            except ValueError:
                raise TransferError(
                    f"line {i + 1}: record {record.get('id')} has no end marker"
                ) from None
            record["title"] = title
            record["body"] = "\n".join(lines[i + 1 : stop])
            data["records"].append(record)
            i = stop + 1
            continue
        block = _BLOCK.match(line)
        if block:
            kind, payload = block.groups()
            if kind == "export":
                seen_header = True
                if _is_team(payload):
                    data["team"] = True
                    headings = ("### ", "#### ")
            else:
                data[targets[kind]].append(_load(payload, i))
        i += 1
    if not seen_header:
        raise TransferError("this Markdown is not an agentctx export (no agentctx:export marker)")
    return data


def _is_team(payload: str) -> bool:
    try:
        marker = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return False  # the marker's payload was never required to be readable
    return isinstance(marker, dict) and marker.get("team") is True


def _load(payload: str, index: int) -> dict[str, Any]:
    try:
        value = orjson.loads(payload)
    except orjson.JSONDecodeError as exc:
        raise TransferError(f"line {index + 1}: unreadable metadata ({exc})") from exc
    if not isinstance(value, dict):
        raise TransferError(f"line {index + 1}: metadata is not an object")
    return value


def _dumps(value: Mapping[str, object]) -> str:
    # "--" cannot appear inside an HTML comment; JSON escapes keep the text unchanged on load.
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode().replace("--", "-\\u002d")
