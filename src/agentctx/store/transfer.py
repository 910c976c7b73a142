"""Export and import: the whole store as JSON or as organized, readable Markdown, and back.

Both formats carry every field, so ``export`` then ``import`` on an empty home gives the same store,
and importing into the store it came from changes nothing (rows are merged by id). The Markdown form is
meant for people: grouped by project and type, a heading per record, one line saying what it is (the
digest's words: type, who wrote it, how sure), since when it holds and what replaced it, then the body
as written between two short id comments; the fields a person does not read ride along in one data
block at the end, an HTML comment invisible when rendered (issue 27)::

    #### Use gRPC for internal services

    *decision · you · stated · valid since 2026-11-02 09:14 (34d ago) · replaces “Use REST”*

    <!-- agentctx:record 01J... -->
    We moved from REST to gRPC ...
    <!-- /agentctx:record 01J... -->
    ...
    <!-- agentctx:data (every field of the records above, ...)
    record {"id":"01J...","title":"Use gRPC for internal services","type":"decision",...}
    -->

Exports written before issue 27 (each record's fields inline in its start comment) still import.

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
#: A record's start in a team file (and in exports before issue 27): its fields inline.
_RECORD_START = re.compile(r"^<!-- agentctx:record (\{.*\}) -->$")
#: A record's start in an export: its id only; its fields are in the data block at the end.
_RECORD_ID = re.compile(r"^<!-- agentctx:record ([^\s{]\S*) -->$")
_DATA_START = "<!-- agentctx:data"
_DATA_NOTE = "(every field of the records above, read back by `agentctx import`)"
_DATA_END = "-->"
_DATA_LINE = re.compile(r"^(record|project|node|edge|link) (\{.*\})$")
_EXPORT_NOTE = (
    "Grouped by project and type; under each title, what the record is, who or what wrote it and "
    "how sure the store is, since when it holds and what replaced it. `agentctx import --restore "
    "FILE` reads this file back into a store (the block at the end carries the other fields)."
)
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
    """The export (:class:`Export`, or one :func:`parse` read back) as Markdown for people (see the
    module docstring): per project and type, each record's title, what it is and how sure, since
    when it holds and what replaced it, and its body; the fields nobody reads in one data block
    at the end, which :func:`parse` reads back."""
    records: list[dict[str, Any]] = list(data.get("records", []))
    titles = {r["id"]: r["title"] for r in records}
    replaced: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        if record.get("superseded_by"):
            replaced.setdefault(record["superseded_by"], []).append(record)
    out = ["# agentctx context export", "", _summary(data), "", _EXPORT_NOTE, ""]
    out += [_META.format(kind="export", payload=_dumps({"format": FORMAT, "version": 1})), ""]
    names = {p["project_id"]: p for p in data.get("projects", [])}
    by_project: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        by_project.setdefault(record["project_id"], []).append(record)
    for project_id in sorted(by_project, key=lambda p: (p == "global", p)):
        project = names.get(project_id)
        label = (
            "Global (every project)"
            if project_id == "global"
            else (project["name"] if project else project_id)
        )
        group_all = by_project[project_id]
        current = sum(1 for r in group_all if r.get("superseded_at") is None)
        about = _plural(current, "current record") + (
            f", {len(group_all) - current} superseded" if len(group_all) > current else ""
        )
        if project and project.get("root"):
            about = f"{project['root']} · {about}"
        out += [f"## {label}", "", about, ""]
        for record_type in RECORD_TYPES:
            group = [r for r in group_all if r["type"] == record_type]
            if not group:
                continue
            out += [f"### {_PLURAL[record_type]}", ""]
            for record in group:
                state = "" if record.get("superseded_at") is None else " (superseded)"
                out += [
                    f"#### {record['title']}{state}",
                    "",
                    _about(record, titles, replaced.get(record["id"], [])),
                    "",
                    f"<!-- agentctx:record {record['id']} -->",
                    record["body"],
                    f"<!-- /agentctx:record {record['id']} -->",
                    "",
                ]
    out.append(f"{_DATA_START} {_DATA_NOTE}")
    out += [f"project {_dumps(p)}" for p in data.get("projects", [])]
    out += [f"record {_dumps({k: v for k, v in r.items() if k != 'body'})}" for r in records]
    for kind, key in (("node", "nodes"), ("edge", "edges"), ("link", "record_entities")):
        out += [f"{kind} {_dumps(row)}" for row in data.get(key, [])]
    out.append(_DATA_END)
    return "\n".join(out) + "\n"


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


def _summary(data: Mapping[str, Any]) -> str:
    """The export's first line: when, and how much of what."""
    records = data.get("records", [])
    current = sum(1 for r in records if r.get("superseded_at") is None)
    projects = {r["project_id"] for r in records if r["project_id"] != "global"}
    glob = sum(1 for r in records if r["project_id"] == "global")
    where = _plural(len(projects), "project")
    where = f": {len(records) - glob} of {where}, {glob} global" if glob else f" in {where}"
    return (
        f"Exported {_when(clock.now())} UTC: {_plural(len(records), 'record')} ({current} current, "
        f"{len(records) - current} superseded){where}."
    )


def _when(stored: str | None) -> str:
    """A stored time as ``2026-12-06 13:51``."""
    return clock.minute(stored or "") or "?"


def _quoted(title: str) -> str:
    return "“" + title.replace("*", "\\*") + "”"


def _about(
    record: Mapping[str, Any], titles: Mapping[str, str], replaces: list[dict[str, Any]]
) -> str:
    """One line under a record's title: what it is, who said it and how sure (the digest's words,
    :func:`agentctx.core.inject.label`), since when it holds, and its supersession."""
    from agentctx.core import inject  # the label's words, from the one place

    parts = [record["type"], inject.provenance(record), inject.confidence(record)]
    if record.get("pinned"):
        parts.append("pinned")
    valid = record.get("valid_from")
    ended = record.get("superseded_at")
    if ended is None:
        parts.append(f"valid since {_when(valid)} ({clock.age_label(valid)} ago)" if valid else "")
    else:
        parts.append(f"valid {_when(valid)} to {_when(ended)}")
        successor = record.get("superseded_by")
        if successor:
            parts.append(f"superseded by {_quoted(titles.get(successor, successor))}")
        else:
            parts.append("retired")
    if replaces:
        parts.append("replaces " + ", ".join(_quoted(r["title"]) for r in replaces))
    if record.get("rationale"):
        parts.append(f"why: {' '.join(str(record['rationale']).split())}")
    return "*" + " · ".join(p for p in parts if p) + "*"


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
    bodies: dict[str, tuple[str, int]] = {}  # id -> (body, line index): fields in the data block
    fields: list[tuple[dict[str, Any], int]] = []
    i = 0
    while i < len(lines):
        line = marks[i]
        by_id = _RECORD_ID.match(line)
        if by_id:
            record_id = by_id.group(1)
            stop = _end_of(marks, record_id, i)
            if record_id in bodies:
                raise TransferError(f"line {i + 1}: record {record_id} appears twice")
            bodies[record_id] = ("\n".join(lines[i + 1 : stop]), i)
            i = stop + 1
            continue
        if line.startswith(_DATA_START):
            i = _read_data(marks, i, data, fields, targets)
            continue
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
            stop = _end_of(marks, record.get("id"), i)
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
    for record, index in fields:  # the data block's records take their bodies from the text
        found = bodies.pop(str(record.get("id")), None)
        if found is None:
            raise TransferError(
                f"line {index + 1}: record {record.get('id')} has no text above "
                f"(no '<!-- agentctx:record {record.get('id')} -->' block)"
            )
        record["body"] = found[0]
        data["records"].append(record)
    for record_id, (_, index) in bodies.items():
        raise TransferError(
            f"line {index + 1}: record {record_id} has no fields in the data block at the end"
        )
    return data


def _end_of(marks: list[str], record_id: object, start: int) -> int:
    """The line index of a record's end marker (after ``start``)."""
    try:
        return marks.index(f"<!-- /agentctx:record {record_id} -->", start + 1)
    except ValueError:
        raise TransferError(f"line {start + 1}: record {record_id} has no end marker") from None


def _read_data(
    marks: list[str],
    start: int,
    data: dict[str, Any],
    fields: list[tuple[dict[str, Any], int]],
    targets: Mapping[str, str],
) -> int:
    """Read the data block that starts at ``start``; the index of the line after its end."""
    i = start + 1
    while i < len(marks) and marks[i] != _DATA_END:
        if marks[i].strip():
            found = _DATA_LINE.match(marks[i])
            if found is None:
                raise TransferError(f"line {i + 1}: not a data line (kind, then a JSON object)")
            kind, payload = found.groups()
            value = _load(payload, i)
            if kind == "record":
                fields.append((value, i))
            else:
                data[targets[kind]].append(value)
        i += 1
    if i == len(marks):
        raise TransferError(f"line {start + 1}: the data block has no end ('-->')")
    return i + 1


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
