"""Team: the team hubs this store's projects are linked to, read from the store (no connection).

Per linked project: the hub (host, database, user or service; never a password), the team and
the member's role, the last sync and its error, what waits to be pushed, and the conflicts the
hub rebased. Syncing stays a CLI or worker act (``agentctx team sync``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentctx.web.html import Safe, tag
from agentctx.web.views.page import empty, heading, page

if TYPE_CHECKING:
    from collections.abc import Sequence


def _link(link: dict[str, Any]) -> Safe:
    waiting = link["waiting"]
    facts = tag(
        "ul",
        tag("li", "hub ", tag("code", link["hub"])),
        tag(
            "li", "team ", tag("strong", link["team"]), f" as {link['role_name']} ({link['role']})"
        ),
        tag(
            "li",
            "last sync ",
            link["last_sync"] or "never",
            tag("span", f" · failed: {link['last_error']}", class_="error")
            if link["last_error"]
            else None,
        ),
        tag("li", f"waiting {waiting['versions']} version(s), {waiting['events']} event(s)"),
        tag("li", f"cursor {link['cursor']}"),
        class_="plain",
    )
    conflicts = (
        tag(
            "ul",
            *(
                tag(
                    "li",
                    tag("a", c["record_id"], href=f"/records/{c['record_id']}"),
                    " was superseded twice: ",
                    tag("a", c["onto"], href=f"/records/{c['onto']}"),
                    " came first; ",
                    tag("a", c["successor"], href=f"/records/{c['successor']}"),
                    f" (by {c['author']}) was rebased onto it",
                )
                for c in link["conflicts"]
            ),
            class_="plain",
        )
        if link["conflicts"]
        else empty("No conflicts.")
    )
    return tag(
        "article",
        tag("header", tag("h2", link["project_name"])),
        facts,
        tag("h3", "Conflicts"),
        conflicts,
    )


def render(links: Sequence[dict[str, Any]], *, token: str) -> Safe:
    """The Team page."""
    body = (
        [_link(link) for link in links]
        if links
        else [
            empty(
                tag(
                    "span",
                    "No project is linked to a team hub. In a checkout: ",
                    tag("code", "agentctx team link --service NAME --team TEAM"),
                    " (docs/team-hub.md).",
                )
            )
        ]
    )
    return page("Team", "team", heading("Team hub"), *body, token=token)
