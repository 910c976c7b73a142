"""Projects: every project in the store, its last activity and its current records by type."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlencode

from agentctx.core import schema
from agentctx.web.html import Safe, tag
from agentctx.web.views.charts import type_strip
from agentctx.web.views.page import age, empty, heading, page, short_path, type_badge

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agentctx.web.queries import ProjectSummary


def _card(p: ProjectSummary) -> Safe:
    query = urlencode({"project": p.project_id})
    is_global = p.project_id == schema.GLOBAL_PROJECT_ID
    counts = [
        tag("li", type_badge(t), tag("span", str(p.counts[t]), class_="n"))
        for t in schema.RECORD_TYPES
        if p.counts.get(t)
    ]
    links = [tag("a", "Records", href=f"/records?{query}")]
    if is_global:
        links.append(tag("a", "Profile", href="/profile"))
    else:
        links += [
            tag("a", "Graph", href=f"/graph?{query}"),
            tag("a", "Sessions", href=f"/sessions?{query}"),
            tag("a", "Sync", href=f"/sync?{query}"),
        ]
    return tag(
        "article",
        tag(
            "header",
            tag("h2", tag("a", p.name, href=f"/records?{query}")),
            tag("span", "last active ", age(p.last_activity), class_="muted small"),
        ),
        tag(
            "p",
            short_path(p.root) if p.root else "preferences every project sees" if is_global else "",
            class_="path",
            title=p.root,
        ),
        tag(
            "div",
            tag("strong", f"{p.current:,}"),
            " current record" if p.current == 1 else " current records",
            tag("span", f" · {_plural(p.sessions, 'session')}", class_="muted")
            if not is_global
            else None,
            class_="total",
        ),
        type_strip(p.counts),
        tag("ul", *counts, class_="counts") if counts else empty("no records yet"),
        tag("footer", *links),
        class_="card project",
        data_project=p.project_id,
    )


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


def _command(text: str) -> Safe:
    return tag("code", text)


def getting_started() -> Safe:
    """What to do when the store is empty (the first run): where records come from."""
    return tag(
        "section",
        tag("h2", "Nothing learned yet"),
        tag(
            "p",
            "Decisions, conventions, fixes and handovers appear here as you work with Claude Code "
            "(a project's detected profile is all ",
            _command("agentctx init"),
            " records). Three ways to start:",
        ),
        tag(
            "ol",
            tag(
                "li",
                tag("strong", "Start a Claude Code session"),
                " in a project after ",
                _command("agentctx init"),
                ": the hooks note the files and test runs, and each session's end turns what was "
                "decided into records (with an API key or a ",
                _command("claude"),
                " login; ",
                _command("agentctx doctor"),
                " says whether extraction is on).",
            ),
            tag(
                "li",
                tag("strong", "See the whole loop first"),
                " with ",
                _command("agentctx demo"),
                ": a scripted session in a temporary home, offline; this store is not touched.",
            ),
            tag(
                "li",
                tag("strong", "Record a fact yourself"),
                ": ",
                _command(
                    'agentctx record --type decision --title "Invoices live in PostgreSQL" '
                    '--body "… Rationale: …"'
                ),
                ", run in the project.",
            ),
        ),
        tag("p", "Then reload this page.", class_="muted"),
        class_="getting-started",
        data_empty="",
    )


def render(projects: Sequence[ProjectSummary], *, token: str) -> Safe:
    """The Projects page (a getting-started note while the store is empty)."""
    local = [p for p in projects if p.project_id != schema.GLOBAL_PROJECT_ID]
    total = sum(p.current for p in projects)
    # nothing learned: no session seen, no record but the profile facts `init` detects
    learned = any(p.sessions or p.current - p.counts.get("profile", 0) for p in projects)
    return page(
        "Projects",
        "projects",
        heading(
            "Projects",
            tag(
                "p",
                f"{_plural(len(local), 'project')} · {_plural(total, 'current record')}",
                class_="muted",
            ),
        ),
        None if learned else getting_started(),
        tag("section", *(_card(p) for p in projects), class_="cards") if total or local else None,
        token=token,
    )
