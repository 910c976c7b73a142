"""Records: the search page, and one record's page with its history and the forms that change it.

Every change is made through ``/api/…`` by ``app.js`` (it adds the write token): an edit or a
supersession writes a new version that supersedes this one, and the browser then opens the new
version, whose timeline shows the old one. Pinning changes the record in place.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlencode

from agentctx.core import inject, schema
from agentctx.core.inject import described, provenance
from agentctx.web.html import Safe, tag
from agentctx.web.views.page import (
    badge,
    confidence_badge,
    empty,
    heading,
    page,
    project_name,
    project_select,
    select,
    type_badge,
    when,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agentctx.records import Record
    from agentctx.web.queries import Found, RecordFilter


def flags(record: Record) -> list[Safe]:
    """The badges after a record's title: scope, confidence, pinned, superseded."""
    out = [confidence_badge(record)]
    if record.scope == "global":
        out.append(badge("global", "scope"))
    if record.pinned:
        out.append(badge("pinned", "pinned"))
    if not record.is_current:
        out.append(badge("superseded", "old"))
    return out


def _filters(f: RecordFilter, projects: Sequence[tuple[str, str]]) -> Safe:
    types = [("", "Any type"), *((t, t) for t in schema.RECORD_TYPES)]
    scopes = [("all", "Project + global"), ("project", "Project only"), ("global", "Global only")]
    worded = inject.CONFIDENCE  # the label's words, the stored values as the options' values
    confidences = [
        ("", "Any confidence"),
        *(
            (c, f"{worded.get(c, c)} ({c})" if worded.get(c, c) != c else c)
            for c in schema.CONFIDENCES
        ),
    ]
    return tag(
        "form",
        tag(
            "label",
            tag("span", "Search"),
            tag(
                "input",
                type="search",
                name="q",
                value=f.q,
                placeholder="keywords, e.g. sqlite driver",
                autofocus=True,
            ),
            class_="field grow",
        ),
        project_select(projects, f.project),
        select("type", types, f.type, label="Type"),
        select("scope", scopes, f.scope, label="Scope"),
        select("confidence", confidences, f.confidence, label="Confidence"),
        tag(
            "label",
            tag("input", type="checkbox", name="superseded", value="1", checked=f.superseded),
            " superseded too",
            class_="check",
        ),
        tag("button", "Search", type="submit", class_="primary"),
        method="get",
        action="/records",
        class_="filters",
        role="search",
    )


def _row(record: Record, score: float | None, names: dict[str, str]) -> Safe:
    return tag(
        "tr",
        tag(
            "td",
            tag("a", record.title, href=f"/records/{record.id}", class_="title"),
            tag("div", record.body[:160], class_="snippet"),
        ),
        tag("td", type_badge(record.type)),
        tag("td", *flags(record), class_="flags"),
        tag("td", project_name(record.project_id, names), class_="small nowrap"),
        tag("td", when(record.valid_from), class_="small nowrap"),
        tag("td", f"{score:.2f}" if score is not None else "", class_="num small"),
        class_=None if record.is_current else "old",
        data_id=record.id,
    )


def render_list(
    f: RecordFilter, found: Found, projects: Sequence[tuple[str, str]], *, token: str
) -> Safe:
    """The Records page: filters and the matching records."""
    names = dict(projects)
    shown = len(found.records)
    noun = ("match" if f.q else "record") if found.total == 1 else ("matches" if f.q else "records")
    summary = f"{found.total:,} {noun}" + (f", {shown:,} shown" if shown < found.total else "")
    table = (
        tag(
            "table",
            tag(
                "thead",
                tag(
                    "tr",
                    tag("th", "Title"),
                    tag("th", "Type"),
                    tag("th", ""),
                    tag("th", "Project"),
                    tag("th", "Valid from"),
                    tag("th", "Score" if f.q else "", class_="num"),
                ),
            ),
            tag("tbody", *(_row(r, s, names) for r, s in found.records)),
            class_="records",
        )
        if found.records
        else empty("No records match." if f.q else "No records yet.")
    )
    return page(
        "Records",
        "records",
        heading("Records", tag("p", summary, class_="muted", id="summary")),
        _filters(f, projects),
        tag("p", found.degraded, class_="note") if found.degraded else None,
        table,
        token=token,
    )


def _provenance(record: Record, names: dict[str, str]) -> Safe:
    rows: list[tuple[str, Safe | str]] = [
        ("id", tag("code", record.id)),
        ("project", project_name(record.project_id, names)),
        ("source", described(record)[0]),
        ("session", tag("code", record.session_id) if record.session_id else "—"),
        ("confidence", described(record)[1]),
        ("reinforced", f"{record.reinforce_count} times"),
        ("read", f"{record.access_count} times, last {record.last_accessed or 'never'}"),
        ("score", f"{record.score:.2f}"),
        ("valid from", when(record.valid_from)),
        ("recorded", when(record.recorded_at)),
    ]
    if record.keywords:
        rows.append(("keywords", record.keywords))
    if record.cues:  # search text only (never injected): shown here to explain a search hit
        rows.append(("cues", " · ".join(record.cues)))
    if record.key:
        rows.append(("key", tag("code", record.key)))
    if record.rationale:
        rows.append(("rationale", record.rationale))
    if record.claudemd_drift_score:
        rows.append(("CLAUDE.md drift", f"{record.claudemd_drift_score:.2f}"))
    return tag("dl", *(tag("div", tag("dt", k), tag("dd", v)) for k, v in rows), class_="facts")


def _timeline(record: Record, history: Sequence[Record]) -> Safe:
    items = []
    for version in history:
        here = version.id == record.id
        state = "current" if version.is_current else "superseded"
        if version.superseded_at and not version.superseded_by:
            state = "cleared"
        items.append(
            tag(
                "li",
                tag("span", class_="dot"),
                tag(
                    "div",
                    tag("a", version.title, href=f"/records/{version.id}")
                    if not here
                    else tag("strong", version.title),
                    " ",
                    badge(state, "old" if state != "current" else "now"),
                    class_="line",
                ),
                tag(
                    "div",
                    "valid from ",
                    when(version.valid_from),
                    f" · {provenance(version)}",
                    f" · {version.rationale}" if version.rationale else None,
                    class_="small muted",
                ),
                class_="here" if here else None,
                data_id=version.id,
            )
        )
    return tag("ol", *items, class_="timeline")


def _actions(record: Record) -> Safe:
    if not record.is_current:
        target = record.superseded_by
        return tag(
            "p",
            "This version is history: ",
            tag("a", "open the current version", href=f"/records/{target}")
            if target
            else "it was cleared, with no successor.",
            class_="note",
        )
    pin = tag(
        "form",
        tag("input", type="hidden", name="pinned", value="false" if record.pinned else "true"),
        tag("button", "Unpin" if record.pinned else "Pin", type="submit", id="pin"),
        tag("span", class_="error", role="alert"),
        data_api=f"/api/records/{record.id}/pin",
        class_="inline",
    )
    edit = tag(
        "details",
        tag("summary", "Edit"),
        tag(
            "form",
            tag("p", "Saving writes a new version that supersedes this one.", class_="muted small"),
            tag("label", "Title", tag("input", name="title", value=record.title, required=True)),
            tag("label", "Body", tag("textarea", record.body, name="body", rows=8, required=True)),
            tag("button", "Save new version", type="submit", class_="primary"),
            tag("span", class_="error", role="alert"),
            data_api=f"/api/records/{record.id}/edit",
            class_="stack",
        ),
        id="edit",
    )
    supersede = tag(
        "details",
        tag("summary", "Supersede"),
        tag(
            "form",
            tag("p", "State what replaces this fact, and why.", class_="muted small"),
            tag("label", "New title", tag("input", name="title", value=record.title)),
            tag("label", "New body", tag("textarea", "", name="body", rows=6, required=True)),
            tag("label", "Rationale", tag("input", name="rationale", required=True)),
            tag("button", "Supersede", type="submit", class_="primary"),
            tag("span", class_="error", role="alert"),
            data_api=f"/api/records/{record.id}/supersede",
            class_="stack",
        ),
        id="supersede",
    )
    return tag("div", pin, edit, supersede, class_="actions")


def render_detail(
    record: Record,
    history: Sequence[Record],
    entities: Sequence[dict[str, str]],
    projects: Sequence[tuple[str, str]],
    *,
    token: str,
) -> Safe:
    """One record's page: body, provenance, entities, supersession timeline and actions."""
    names = dict(projects)
    banner = None
    if record.superseded_by:
        banner = tag(
            "p",
            "Superseded ",
            when(record.superseded_at),
            " by ",
            tag("a", record.superseded_by, href=f"/records/{record.superseded_by}"),
            class_="banner",
        )
    elif record.superseded_at:
        banner = tag("p", "Cleared ", when(record.superseded_at), class_="banner")
    ents = (
        tag(
            "ul",
            *(
                tag("li", badge(e["kind"], f"k-{e['kind']}"), " ", tag("code", e["name"]))
                for e in entities
            ),
            class_="entities",
        )
        if entities
        else empty("No code linked (files, modules, packages, symbols).")
    )
    graph_link = urlencode({"project": record.project_id, "focus": record.id})
    return page(
        record.title,
        "records",
        tag("p", tag("a", "← Records", href="/records"), class_="crumbs"),
        heading(record.title, tag("div", type_badge(record.type), *flags(record), class_="flags")),
        banner,
        tag(
            "div",
            tag(
                "section",
                tag("pre", record.body, class_="body", id="body"),
                _actions(record),
                tag("h2", "Provenance"),
                _provenance(record, names),
                class_="main-col",
            ),
            tag(
                "aside",
                tag("h2", f"History ({len(history)} versions)"),
                _timeline(record, history),
                tag("h2", "Entities"),
                ents,
                tag(
                    "p", tag("a", "Show in the graph", href=f"/graph?{graph_link}"), class_="small"
                ),
                class_="side-col",
            ),
            class_="two-col",
        ),
        token=token,
    )
