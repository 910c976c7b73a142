"""Sessions: per-day charts (tokens injected, extraction cost, records extracted, sessions) and
the table of the same sessions, with their total (the charts' figures)."""

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
    project_select,
    when,
)

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from agentctx.core.shapes import SessionListing
    from agentctx.web.queries import DayTotals, SessionsView


def short_id(session_id: str) -> str:
    """A session id short enough for a table cell, with its start and end (ids that share a
    prefix, as a resumed session's, stay apart)."""
    return session_id if len(session_id) <= 14 else f"{session_id[:8]}…{session_id[-4:]}"


def _row(row: SessionListing) -> Safe:
    error = row.get("extraction_error")
    return tag(
        "tr",
        tag("td", tag("code", short_id(row["session_id"]), title=row["session_id"])),
        tag("td", row["project_name"], class_="small project", title=row["project_id"] or None),
        tag("td", when(row["started_at"]), class_="small nowrap"),
        tag("td", duration(row["duration_s"]), class_="num"),
        tag("td", number(int(row["tokens_injected"] or 0)), class_="num", data_key="tokens"),
        tag("td", number(int(row["injections"] or 0)), class_="num", data_key="injections"),
        tag("td", money(float(row["extraction_cost_usd"] or 0.0)), class_="num", data_key="cost"),
        tag("td", row.get("extraction_backend") or "", class_="small"),
        tag("td", number(row["records_extracted"]), class_="num", data_key="records"),
        tag("td", tag("span", "error", title=error, class_="badge old") if error else ""),
        data_id=row["session_id"],
    )


def _total_row(total: DayTotals) -> Safe:
    return tag(
        "tr",
        tag("th", f"All {number(total.sessions)} sessions", colspan=4, scope="row"),
        tag("td", number(total.tokens), class_="num", data_key="tokens"),
        tag("td", number(total.injections), class_="num", data_key="injections"),
        tag("td", money(total.cost), class_="num", data_key="cost"),
        tag("td", ""),
        tag("td", number(total.records), class_="num", data_key="records"),
        tag("td", ""),
        class_="total",
    )


def render(
    view: SessionsView,
    project: str,
    projects: Sequence[tuple[str, str]],
    *,
    token: str,
    precision: Mapping[str, Any] | None = None,
    shown: int = 100,
) -> Safe:
    """The Sessions page: charts and table from one :class:`~agentctx.web.queries.SessionsView`
    (the charts' figures are its total, which is the table's total row), then the store's
    precision (:mod:`agentctx.web.views.precision`)."""
    days, rows = view.days, view.rows
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
            "div",
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
                tag("tbody", *(_row(r) for r in rows[:shown])),
                tag("tfoot", _total_row(view.total)),
                class_="sessions",
            ),
            class_="table-box",
        )
        if rows
        else empty(
            "No sessions in these days. Sessions appear once Claude Code runs in a project after "
            "`agentctx init` (the hooks note each one)."
        )
    )
    listed = (
        f"Sessions of the last {len(days)} days ({len(rows)})"
        if len(rows) <= shown
        else f"Sessions of the last {len(days)} days: the newest {shown} of {len(rows)}"
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
        precision_view.section(precision, filtered=bool(project)) if precision is not None else "",
        tag("h2", listed),
        table,
        token=token,
    )
