"""Sync: the CLAUDE.md drift report of a project and the diff ``agentctx sync --apply`` would write.

Read-only on purpose: writing CLAUDE.md stays a deliberate act in the project's terminal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentctx.web.html import Safe, tag
from agentctx.web.views.page import (
    empty,
    heading,
    page,
    project_select,
    short_path,
    type_badge,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agentctx.web.queries import SyncView


def _diff(text: str) -> Safe:
    lines = []
    for line in text.splitlines():
        if line.startswith(("+++", "---")):
            css = "file"
        elif line.startswith("@@"):
            css = "hunk"
        elif line.startswith("+"):
            css = "add"
        elif line.startswith("-"):
            css = "del"
        else:
            css = "ctx"
        lines.append(tag("span", line + "\n", class_=css))
    return tag("pre", *lines, class_="diff", id="diff")


def _report(view: SyncView) -> Safe:
    report = view.report
    if report is None:
        return tag("p", view.problem or "no report", class_="note")
    stats = tag(
        "ul",
        tag("li", tag("strong", str(report.checked)), " records checked"),
        tag("li", tag("strong", str(report.missing_total)), " missing from CLAUDE.md"),
        tag("li", tag("strong", str(len(report.contradictions))), " superseded snippets"),
        class_="stats",
    )
    missing = (
        tag(
            "ul",
            *(
                tag(
                    "li",
                    type_badge(m.type),
                    " ",
                    tag("a", m.title, href=f"/records/{m.id}"),
                    tag("span", f" · keywords covered {m.coverage:.0%}", class_="muted small"),
                )
                for m in report.missing
            ),
            class_="plain",
        )
        if report.missing
        else empty("Every checked decision and convention is in CLAUDE.md.")
    )
    stale = (
        tag(
            "ul",
            *(
                tag(
                    "li",
                    tag("code", f"{short_path(c.file)}:{c.line}"),
                    " still says ",
                    tag("q", c.text),
                    "; now ",
                    tag("a", c.current_title, href=f"/records/{c.superseded_by}"),
                )
                for c in report.contradictions
            ),
            class_="plain",
        )
        if report.contradictions
        else empty("No superseded text found.")
    )
    diff = (
        _diff(report.diff)
        if report.changed
        else empty("CLAUDE.md is up to date: nothing to propose.")
    )
    return tag(
        "div",
        tag("p", "Compared with ", tag("code", short_path(report.target)), class_="small"),
        stats,
        tag("h2", "Missing records"),
        missing,
        tag("h2", "Superseded text still in CLAUDE.md"),
        stale,
        tag("h2", "Proposed change"),
        tag(
            "p",
            "To write it, run ",
            tag("code", "agentctx sync --apply"),
            " in the project. It only ever adds or replaces agentctx's own marked block.",
            class_="muted small",
        ),
        diff,
        tag("p", report.method, class_="muted small"),
        class_="sync",
    )


def render(
    view: SyncView | None, project: str, projects: Sequence[tuple[str, str]], *, token: str
) -> Safe:
    """The Sync page."""
    local = [p for p in projects if p[0] != "global"]
    return page(
        "Sync",
        "sync",
        heading("CLAUDE.md sync"),
        tag(
            "form",
            project_select(local, project, any_label=None if project else "Choose a project"),
            method="get",
            action="/sync",
            class_="filters compact",
        ),
        _report(view) if view is not None else empty("Choose a project to compare."),
        token=token,
    )
