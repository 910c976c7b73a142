"""Sessions: per-day charts (tokens injected, extraction cost, records extracted, sessions) and
the table of the newest sessions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentctx.web.html import Safe, tag
from agentctx.web.views import precision as precision_view
from agentctx.web.views.charts import bars
from agentctx.web.views.page import (
    duration,
    empty,
    heading,
    money,
    number,
    page,
    project_name,
    project_select,
    when,
)

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from agentctx.core.shapes import SessionListing
    from agentctx.web.queries import DayTotals


def _row(row: SessionListing, names: dict[str, str]) -> Safe:
    error = row.get("extraction_error")
    return tag(
        "tr",
        tag("td", tag("code", row["session_id"][:12], title=row["session_id"])),
        tag("td", project_name(row["project_id"], names), class_="small"),
        tag("td", when(row["started_at"]), class_="small nowrap"),
        tag("td", duration(row["duration_s"]), class_="num"),
        tag("td", number(int(row["tokens_injected"] or 0)), class_="num"),
        tag("td", number(int(row["injections"] or 0)), class_="num"),
        tag("td", money(float(row["extraction_cost_usd"] or 0.0)), class_="num"),
        tag("td", row.get("extraction_backend") or "", class_="small"),
        tag("td", number(row["records_extracted"]), class_="num"),
        tag("td", tag("span", "error", title=error, class_="badge old") if error else ""),
        data_id=row["session_id"],
    )


def render(
    rows: Sequence[SessionListing],
    days: Sequence[DayTotals],
    project: str,
    projects: Sequence[tuple[str, str]],
    *,
    token: str,
    precision: Mapping[str, Any] | None = None,
) -> Safe:
    """The Sessions page (with the store's precision, :mod:`agentctx.web.views.precision`)."""
    names = dict(projects)
    charts = tag(
        "section",
        bars("Tokens injected", [(d.day, d.tokens) for d in days]),
        bars(
            "Extraction cost",
            [(d.day, d.cost) for d in days],
            fmt=lambda v: money(v),
            css="cost",
        ),
        bars("Records extracted", [(d.day, d.records) for d in days], css="records"),
        bars("Sessions", [(d.day, d.sessions) for d in days], css="count"),
        class_="charts",
    )
    table = (
        tag(
            "table",
            tag(
                "thead",
                tag(
                    "tr",
                    tag("th", "Session"),
                    tag("th", "Project"),
                    tag("th", "Started"),
                    tag("th", "Duration", class_="num"),
                    tag("th", "Tokens injected", class_="num"),
                    tag("th", "Injections", class_="num"),
                    tag("th", "Extraction cost", class_="num"),
                    tag("th", "Extracted by"),
                    tag("th", "Records extracted", class_="num"),
                    tag("th", ""),
                ),
            ),
            tag("tbody", *(_row(r, names) for r in rows)),
            class_="sessions",
        )
        if rows
        else empty("No sessions yet.")
    )
    return page(
        "Sessions",
        "sessions",
        heading("Sessions", tag("p", f"last {len(days)} days", class_="muted")),
        tag(
            "form",
            project_select([p for p in projects if p[0] != "global"], project),
            method="get",
            action="/sessions",
            class_="filters compact",
        ),
        charts,
        precision_view.section(precision) if precision is not None else "",
        tag("h2", f"Newest sessions ({len(rows)})"),
        table,
        token=token,
    )
