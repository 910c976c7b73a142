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


def render(projects: Sequence[ProjectSummary], *, token: str) -> Safe:
    """The Projects page."""
    local = [p for p in projects if p.project_id != schema.GLOBAL_PROJECT_ID]
    total = sum(p.current for p in projects)
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
        tag("section", *(_card(p) for p in projects), class_="cards"),
        token=token,
    )
