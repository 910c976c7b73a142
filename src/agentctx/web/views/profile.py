"""Profile: the global preferences with their confidence and evidence; edit or clear each."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentctx.core.inject import provenance
from agentctx.web.html import Safe, tag
from agentctx.web.views.page import badge, confidence_badge, empty, heading, page, when

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agentctx.preferences import ProfileEntry


def _entry(e: ProfileEntry) -> Safe:
    sessions = (
        "no session (typed by hand)"
        if e.evidence == 0
        else ("seen in 1 session" if e.evidence == 1 else f"seen in {e.evidence} sessions")
    )
    edit = tag(
        "details",
        tag("summary", "Edit"),
        tag(
            "form",
            tag("label", "Title", tag("input", name="title", value=e.title, required=True)),
            tag("label", "Body", tag("textarea", e.body, name="body", rows=5, required=True)),
            tag("button", "Save", type="submit", class_="primary"),
            tag("span", class_="error", role="alert"),
            data_api=f"/api/profile/{e.id}/edit",
            class_="stack",
        ),
    )
    clear = tag(
        "details",
        tag("summary", "Clear"),
        tag(
            "form",
            tag(
                "p",
                "It leaves the profile, every digest and search; its history stays.",
                class_="muted small",
            ),
            tag("button", "Clear this preference", type="submit", class_="danger"),
            tag("span", class_="error", role="alert"),
            data_api=f"/api/profile/{e.id}/clear",
            class_="stack",
        ),
    )
    return tag(
        "article",
        tag(
            "header",
            tag("h2", tag("a", e.title, href=f"/records/{e.id}")),
            tag(
                "div",
                confidence_badge(e),
                badge("every digest" if e.in_digest else "on match only", "scope"),
                badge("pinned", "pinned") if e.pinned else None,
                class_="flags",
            ),
        ),
        tag("p", e.body, class_="pref-body"),
        tag(
            "p",
            tag("strong", sessions),
            f" · reinforced {e.reinforce_count} times · {provenance(e)} · since ",
            when(e.valid_from),
            class_="small muted",
        ),
        tag("div", edit, clear, class_="actions"),
        class_="card pref",
        data_id=e.id,
    )


def render(entries: Sequence[ProfileEntry], *, token: str) -> Safe:
    """The Profile page."""
    in_digest = sum(e.in_digest for e in entries)
    return page(
        "Profile",
        "profile",
        heading(
            "Developer profile",
            tag(
                "p",
                f"{len(entries)} global preferences · {in_digest} in every session's digest",
                class_="muted",
            ),
        ),
        tag(
            "p",
            "Global preferences are seen by every project. Explicit and reinforced ones go into "
            "each session's digest; inferred ones only when a prompt matches them.",
            class_="intro",
        ),
        tag("section", *(_entry(e) for e in entries), class_="prefs")
        if entries
        else empty("No global preferences yet."),
        token=token,
    )
