"""The page shell (head, navigation) and the small parts every view uses.

Scripts and styles are files under ``/static/`` (the Content-Security-Policy allows no inline
script or style); the per-start write token travels in a ``<meta>`` tag that ``app.js`` reads.
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import TYPE_CHECKING

from agentctx.core import clock, schema
from agentctx.core.inject import confidence
from agentctx.web.html import Child, Safe, tag

if TYPE_CHECKING:
    from collections.abc import Sequence

NAV = (
    ("projects", "/", "Projects"),
    ("records", "/records", "Records"),
    ("graph", "/graph", "Graph"),
    ("profile", "/profile", "Profile"),
    ("sessions", "/sessions", "Sessions"),
    ("sync", "/sync", "Sync"),
    ("team", "/team", "Team"),
)


def page(
    title: str,
    active: str,
    *body: Child,
    token: str,
    scripts: Sequence[str] = (),
) -> Safe:
    """A whole HTML document with the navigation bar, ``body`` in ``<main>``."""
    nav = tag(
        "nav",
        *(
            tag("a", label, href=href, class_="active" if key == active else None)
            for key, href, label in NAV
        ),
    )
    head = tag(
        "head",
        tag("meta", charset="utf-8"),
        tag("meta", name="viewport", content="width=device-width, initial-scale=1"),
        tag("meta", name="agentctx-token", content=token),
        tag("title", f"{title} · agentctx"),
        tag("link", rel="icon", href="/static/icon.svg", type="image/svg+xml"),
        tag("link", rel="stylesheet", href="/static/style.css"),
        tag("script", src="/static/app.js", defer=True),
        *(tag("script", src=f"/static/{name}", defer=True) for name in scripts),
    )
    header = tag(
        "header",
        tag("a", tag("span", "◆", class_="logo"), "agentctx", class_="brand", href="/"),
        nav,
        class_="top",
    )
    document = tag("html", head, tag("body", header, tag("main", *body)), lang="en")
    return Safe("<!doctype html>\n" + document)


def heading(text: Child, *extra: Child) -> Safe:
    """The view's title line, with optional parts (counts, actions) beside it."""
    return tag("div", tag("h1", text), *extra, class_="heading")


def badge(text: str, kind: str = "") -> Safe:
    """A small label; ``kind`` picks its colour class (a record type, a confidence, ...)."""
    return tag("span", text, class_=f"badge {kind}".strip())


def confidence_badge(record: object) -> Safe:
    """A record's confidence in the words of the digest's label (``stated``), coloured by the
    stored value, which the tooltip names (``explicit``)."""
    stored = str(getattr(record, "confidence", "") or "")
    return tag("span", confidence(record), class_=f"badge c-{stored}", title=stored)


def type_badge(record_type: str) -> Safe:
    """A record type's coloured label."""
    return badge(record_type, f"t-{record_type}")


def when(stored: str | None) -> Safe:
    """A stored time as ``2026-11-01 14:03`` with its age (``3d``) as a tooltip."""
    if not stored:
        return tag("span", "—", class_="muted")
    short = clock.minute(stored)
    return tag("time", short, datetime=stored, title=f"{clock.age_label(stored)} ago")


def age(stored: str | None) -> Safe:
    """A stored time as its age (``3d ago``), the full time as a tooltip."""
    if not stored:
        return tag("span", "—", class_="muted")
    return tag("time", f"{clock.age_label(stored)} ago", datetime=stored, title=stored)


def duration(seconds: float | None) -> str:
    """``1h 05m``, ``12m 30s``, ``45s`` or an em dash."""
    if seconds is None:
        return "—"
    s = int(seconds)
    if s >= 3600:
        return f"{s // 3600}h {s % 3600 // 60:02d}m"
    if s >= 600:
        return f"{s // 60}m"
    if s >= 60:
        return f"{s // 60}m {s % 60:02d}s"
    return f"{s}s"


def short_path(path: str) -> str:
    """A path with the user's home folder written as ``~``."""
    home = os.path.expanduser("~")
    if home not in ("", "/") and (path == home or path.startswith(home + os.sep)):
        return "~" + path[len(home) :]
    return path


def project_name(project_id: str | None, names: dict[str, str]) -> str:
    """A project's display name (its id when unknown)."""
    if project_id == schema.GLOBAL_PROJECT_ID:
        return "Global"
    if not project_id:
        return "—"
    return names.get(project_id, project_id)


def select(
    name: str, options: Sequence[tuple[str, str]], current: str, *, label: str, auto: bool = True
) -> Safe:
    """A labelled ``<select>``; ``auto`` submits its form on change (app.js)."""
    return tag(
        "label",
        tag("span", label),
        tag(
            "select",
            *(
                tag("option", text, value=value, selected=value == current)
                for value, text in options
            ),
            name=name,
            data_autosubmit="1" if auto else None,
        ),
        class_="field",
    )


def project_select(
    choices: Sequence[tuple[str, str]], current: str, *, any_label: str | None = "All projects"
) -> Safe:
    """The project picker shared by the views."""
    options = ([("", any_label)] if any_label is not None else []) + list(choices)
    return select("project", options, current, label="Project")


def empty(text: Child) -> Safe:
    """The note shown where a list has nothing in it."""
    return tag("p", text, class_="empty")


def money(usd: float) -> str:
    """A cost in US dollars, with cents below a dollar shown to four places."""
    return f"${usd:,.2f}" if usd >= 1 else f"${usd:.4f}"


def number(value: int) -> str:
    """An integer with thousands separators."""
    return f"{value:,}"


def today() -> datetime:
    """Now, in UTC (a function so views do not read the clock themselves)."""
    return datetime.fromisoformat(clock.now())


def error_page(status: int, message: str, *, token: str) -> Safe:
    """A page for a missing record or a bad query."""
    title = "Not found" if status == 404 else "Cannot show this"
    return page(title, "", heading(title), tag("p", message, class_="error-box"), token=token)
