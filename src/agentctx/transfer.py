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
"""

from __future__ import annotations

import os
import re
from typing import Any

import orjson

from agentctx.errors import TransferError
from agentctx.project import identify
from agentctx.schema import RECORD_TYPES

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
TEAM_FIELDS = (
    "id",
    "type",
    "confidence",
    "source",
    "valid_from",
    "recorded_at",
    "keywords",
    "key",
    "rationale",
    "pinned",
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


def to_json(data: dict[str, Any]) -> bytes:
    """The export as pretty JSON bytes."""
    return orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"


def to_markdown(data: dict[str, Any]) -> str:
    """The export as organized Markdown (see the module docstring)."""
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


def to_team_markdown(records: list[dict[str, Any]], edges: list[dict[str, Any]]) -> str:
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
    """Read a JSON or Markdown export back into the data shape of ``Store.export_data``.

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
        for record in data["records"]:
            record["project_id"] = project_id
            record["scope"] = "project"
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


def _dumps(value: dict[str, Any]) -> str:
    # "--" cannot appear inside an HTML comment; JSON escapes keep the text unchanged on load.
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode().replace("--", "-\\u002d")
