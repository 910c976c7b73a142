"""UserPromptSubmit and SubagentStart: inject the records that matter for what is asked now.

UserPromptSubmit runs BM25 over the prompt (current records of the project and global ones), reranks,
drops records this session has already been shown and records below the relevance floor
(``retrieval.min_relevance``: the share of the prompt's term weight a record matches, see
:mod:`agentctx.retrieval`), and injects the top three that fit together within 2,000 tokens and
8,000 characters (a record that does not fit is skipped for the next one). Trivial prompts and
prompts with no new relevant match print nothing. Inferred records are marked unconfirmed.

SubagentStart gives a subagent the project's active decisions and conventions (800 tokens).
"""

from __future__ import annotations

from agentctx import clock, retrieval
from agentctx.core.connect import open_db
from agentctx.core.ledger import Ledger
from agentctx.tokens import estimate_tokens, truncate_to_tokens

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    import sqlean

    from agentctx.hooks.runner import HookContext

TOP_K = 3
MAX_TOKENS = 2000
MAX_CHARS = 8000
SUBAGENT_MAX_TOKENS = 800
SUBAGENT_MAX_CHARS = 3200
RECORD_BODY_CHARS = 1500
HEADER = "Relevant records from the agentctx context store (not shown earlier in this session):"


def handle(ctx: HookContext) -> str | None:
    """Dispatch on the event."""
    if ctx.event == "SubagentStart":
        return _subagent(ctx)
    return _prompt(ctx)


def _prompt(ctx: HookContext) -> str | None:
    terms = retrieval.query_terms(ctx.text("prompt"))
    if not terms:
        return None
    conn = open_db(ctx.log)
    if conn is None:
        return None
    try:
        if not ctx.session_id:
            return render(_search(ctx, conn, terms, ()))[0] or None
        with Ledger(ctx.session_id) as ledger:
            from agentctx.core.ledger import injected_ids

            shown = injected_ids(ledger.entries) | _shown_before(conn, ctx.session_id)
            rows = _search(ctx, conn, terms, shown)
            text, ids = render(rows)
            if not text:
                return None
            ledger.append({"event": ctx.event, "ids": ids, "tokens": estimate_tokens(text)})
            return text
    finally:
        conn.close()


def _shown_before(conn: sqlean.Connection, session_id: str) -> set[str]:
    """Records shown in earlier runs of a resumed session (folded at its SessionEnd)."""
    rows = conn.execute(
        "SELECT record_id FROM session_injections WHERE session_id = ?", (session_id,)
    ).fetchall()
    return {str(row[0]) for row in rows}


def _search(
    ctx: HookContext,
    conn: sqlean.Connection,
    terms: list[str],
    exclude: set[str] | tuple[()],
    *,
    floor: float | None = None,
) -> list[Any]:
    """The best 12 candidates, best first, without those below the relevance floor.

    ``floor`` None reads ``retrieval.min_relevance``; 0 keeps every candidate. The LIKE fallback
    has no term counts to weigh terms with, so it applies no floor.
    """
    import sqlean

    args: dict[str, Any] = {
        "project_ids": retrieval.scope_projects(ctx.project.project_id, "all"),
        "exclude_ids": sorted(exclude),
        "candidates": 40,
    }
    try:
        sql, params = retrieval.term_counts_sql(terms)
        counts = list(conn.execute(sql, params).fetchone())
        chosen = retrieval.select_terms(terms, counts)
        if not chosen:
            return []
        sql, params = retrieval.search_sql(chosen, fts=True, **args)
        rows = conn.execute(sql, params).fetchall()
        ranked = [row for row, _score in retrieval.rerank(rows, limit=12)]
        if not ranked:
            return []
        floor = min_relevance(ctx) if floor is None else floor
        if floor <= 0:
            return ranked
        scores = _relevances(conn, terms, counts, chosen, ranked, floor)
    except sqlean.OperationalError as exc:
        ctx.log(f"FTS5 search failed ({exc}); used LIKE search")
        sql, params = retrieval.search_sql(terms, fts=False, **args)
        rows = conn.execute(sql, params).fetchall()
        return [row for row, _score in retrieval.rerank(rows, limit=12)]
    return [row for row in ranked if scores[row["id"]] >= floor]


def min_relevance(ctx: HookContext) -> float:
    """The configured relevance floor; the default when the config file cannot be read."""
    from agentctx import config
    from agentctx.errors import ConfigError

    try:
        return float(config.get("retrieval.min_relevance"))
    except ConfigError as exc:
        ctx.log(f"config unreadable ({exc}); default relevance floor")
        return retrieval.MIN_RELEVANCE


def relevances(conn: sqlean.Connection, terms: list[str], rows: list[Any]) -> dict[str, float]:
    """Each row's relevance to the query of ``terms`` (:func:`agentctx.retrieval.relevance`)."""
    sql, params = retrieval.term_counts_sql(terms)
    counts = list(conn.execute(sql, params).fetchone())
    chosen = retrieval.select_terms(terms, counts)
    return _relevances(conn, terms, counts, chosen, rows, None)


def _relevances(
    conn: sqlean.Connection,
    terms: list[str],
    counts: list[int],
    chosen: list[str],
    rows: list[Any],
    floor: float | None,
) -> dict[str, float]:
    """Relevance by record id. With a ``floor``, when the query's bounds (every row matches at
    least one searched term, at most all of them) settle every row at once, the lookups are skipped
    and each value is that bound: on the right side of the floor, not exact."""
    total = int(conn.execute(retrieval.RECORD_TOTAL_SQL).fetchone()[0])
    weights, denominator = retrieval.relevance_weights(terms, counts, chosen, total)
    ids = [row["id"] for row in rows]
    if len(chosen) == 1:  # every candidate matched the one searched term
        return dict.fromkeys(ids, retrieval.relevance(chosen, weights, denominator))
    if floor is not None:
        lowest = retrieval.relevance([min(chosen, key=weights.__getitem__)], weights, denominator)
        if lowest >= floor:  # a lower bound that passes already
            return dict.fromkeys(ids, lowest)
        highest = retrieval.relevance(chosen, weights, denominator)
        if highest < floor:  # an upper bound that still fails
            return dict.fromkeys(ids, highest)
    sql, params = retrieval.term_hits_sql(chosen, ids)
    found = retrieval.matched_terms(chosen, conn.execute(sql, params).fetchall())
    return {i: retrieval.relevance(found.get(i, ()), weights, denominator) for i in ids}


def render(rows: list[Any]) -> tuple[str, list[str]]:
    """Up to three record blocks that fit both caps together, and their ids."""
    used = estimate_tokens(HEADER) + 2
    chars = len(HEADER) + 2
    blocks: list[str] = []
    ids: list[str] = []
    for row in rows:
        if len(blocks) == TOP_K:
            break
        block = format_record(row)
        cost, size = estimate_tokens(block) + 2, len(block) + 2
        if used + cost > MAX_TOKENS or chars + size > MAX_CHARS:
            continue
        used += cost
        chars += size
        blocks.append(block)
        ids.append(row["id"])
    if not blocks:
        return "", []
    return "\n\n".join([HEADER, *blocks]), ids


def format_record(row: Any) -> str:
    """One record as injected: a heading line with type, title, age and id, then the body."""
    age = clock.age_days(row["valid_from"])
    when = "today" if age < 1 else f"{int(age)}d ago"
    notes = [row["type"], when, f"id {row['id']}"]
    if row["confidence"] == "inferred":
        notes.append("inferred, unconfirmed")
    if row["scope"] == "global":
        notes.append("all projects")
    body = truncate_to_tokens(row["body"], 450, RECORD_BODY_CHARS)
    if len(body) < len(row["body"]):
        body += " […]"
    return f"### {row['title']} ({', '.join(notes)})\n{body}"


def _subagent(ctx: HookContext) -> str | None:
    conn = open_db(ctx.log)
    if conn is None:
        return None
    try:
        rows = conn.execute(
            "SELECT id, type, title, body, confidence FROM records "
            "WHERE project_id = ? AND type IN ('decision', 'convention') AND superseded_at IS NULL "
            "ORDER BY pinned DESC, confidence = 'inferred', score DESC, valid_from DESC LIMIT 40",
            (ctx.project.project_id,),
        ).fetchall()
    finally:
        conn.close()
    if not rows:
        return None
    lines = ["Project decisions and conventions (agentctx):"]
    for row in rows:
        flag = " (inferred, unconfirmed)" if row["confidence"] == "inferred" else ""
        lines.append(f"- [{row['type']}] {row['title']}: {' '.join(row['body'].split())}{flag}")
    text = truncate_to_tokens("\n".join(lines), SUBAGENT_MAX_TOKENS, SUBAGENT_MAX_CHARS)
    if text and ctx.session_id:  # counted in the session's tax, but no dedup: a new context
        with Ledger(ctx.session_id) as ledger:
            ledger.append({"event": ctx.event, "ids": [], "tokens": estimate_tokens(text)})
    return text or None
