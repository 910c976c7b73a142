"""UserPromptSubmit and SubagentStart: inject the records that matter for what is asked now.

UserPromptSubmit runs the core's keyword search (:func:`agentctx.core.search.for_prompt`: BM25 over
the project's and global current records, the rerank, the relevance floor
``retrieval.min_relevance``) without the records this session was shown already, and injects the
top three that fit together within 2,000 tokens and 8,000 characters (a record that does not fit is
skipped for the next one). Trivial prompts and prompts with no new relevant match print nothing.
Inferred records are marked unconfirmed.

SubagentStart gives a subagent the project's active decisions and conventions, fenced and
labelled (:func:`agentctx.core.inject.render_rules`, 800 tokens).
"""

from __future__ import annotations

import os

from agentctx.core import home, plan, search
from agentctx.core.connect import open_db, release
from agentctx.core.inject import render, render_rules
from agentctx.core.ledger import Ledger
from agentctx.core.tokens import estimate_tokens

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    import sqlean

    from agentctx.hooks.runner import HookContext

#: Set (to anything) to log the explanation of every prompt's injection (:func:`_explain`).
DEBUG_ENV = "AGENTCTX_DEBUG"


def handle(ctx: HookContext) -> str | None:
    """Dispatch on the event."""
    if ctx.event == "SubagentStart":
        return _subagent(ctx)
    return _prompt(ctx)


def _prompt(ctx: HookContext) -> str | None:
    terms = search.query_terms(ctx.text("prompt"))
    if not terms:
        return None
    conn = open_db(ctx.log)
    try:
        if not ctx.session_id:
            return _inject(ctx, conn, terms, set())[0] or None
        with Ledger(ctx.session_id) as ledger:
            from agentctx.core.ledger import injected_ids

            text, ids = _inject(ctx, conn, terms, injected_ids(ledger.entries))
            if not text:
                return None
            ledger.append({"event": ctx.event, "ids": ids, "tokens": estimate_tokens(text)})
            return text
    finally:
        if conn is not None:
            release(conn)


def _inject(
    ctx: HookContext, conn: sqlean.Connection | None, terms: list[str], shown: set[str]
) -> tuple[str, list[str]]:
    """The text to inject and its record ids. When the store cannot be searched (no connection,
    or the search itself fails), the last rung: the pinned records not shown yet
    (:mod:`agentctx.core.pinned`), under a note that says so."""
    if conn is None:
        if not os.path.exists(home.db_path()):
            return "", []  # no store yet (open_db said so): nothing can be pinned
        why = "the store could not be opened"
    else:
        try:
            if ctx.session_id:
                shown = shown | plan.run(conn, search.shown_before(ctx.session_id))
            text, ids = render(_search(ctx, conn, terms, shown))
        except Exception as exc:
            why = f"{type(exc).__name__}: {exc}"
        else:
            if os.environ.get(DEBUG_ENV):
                _explain(ctx, conn, shown)
            return text, ids
    from agentctx.core import pinned  # the last rung: loaded only when it is reached

    ctx.log(f"search unavailable ({why}); pinned records only")
    text, ids = render(pinned.fallback(conn, ctx.project.project_id, shown, ctx.log))
    return (f"{pinned.NOTE}\n{text}" if text else ""), ids


def _search(
    ctx: HookContext,
    conn: sqlean.Connection,
    terms: list[str],
    exclude: set[str] | tuple[()],
    *,
    floor: float | None = None,
) -> list[Any]:
    """The prompt's candidates, best first (:func:`agentctx.core.search.for_prompt`).

    ``floor`` None reads ``retrieval.min_relevance`` (only when there are candidates to judge).
    """
    level = (lambda: min_relevance(ctx, conn)) if floor is None else floor
    found = plan.run(
        conn, search.for_prompt(terms, ctx.project.project_id, exclude_ids=exclude, floor=level)
    )
    if found.degraded:
        ctx.log(found.degraded)
    return [row for row, _score in found.hits]


def _explain(ctx: HookContext, conn: sqlean.Connection, shown: set[str]) -> None:
    """With ``AGENTCTX_DEBUG`` set: why each candidate was injected or left out, in the log.

    The same report as ``agentctx search --explain`` (:func:`agentctx.core.inject.explain`), one
    line: it searches again, so it costs a second search and is off by default.
    """
    from agentctx.core.inject import explain

    try:
        report = plan.run(
            conn,
            explain(ctx.text("prompt"), ctx.project.project_id, min_relevance(ctx, conn), shown),
        )
    except Exception as exc:  # a debugging aid never costs the prompt its context
        ctx.log(f"explain failed: {type(exc).__name__}: {exc}")
        return
    terms = " ".join(f"{t['term']}:{t['records']}/{t['specificity']:g}" for t in report["terms"])
    verdicts = "; ".join(
        f"{c['id']} rel {c['relevance']:g}: {c['verdict']}" for c in report["candidates"]
    )
    ctx.log(
        f"explain: terms {terms}; content {report.get('content', 0):g}; floor "
        f"{report['floor']:g}; {verdicts or 'no candidate'}"[:4000]
    )


def min_relevance(ctx: HookContext, conn: sqlean.Connection | None = None) -> float:
    """The configured relevance floor, or (issue 25) the one consolidation calibrated from the
    injection verdicts while it is on (:func:`agentctx.core.learning.effective_on`); the default
    when the config file cannot be read."""
    from agentctx import config
    from agentctx.core.errors import ConfigError

    key = "retrieval.min_relevance"
    try:
        settings = config.load()
    except ConfigError as exc:
        ctx.log(f"config unreadable ({exc}); default relevance floor")
        return search.MIN_RELEVANCE
    configured = float(settings[key])
    if conn is None:
        return configured
    from agentctx.core import learning

    auto = bool(settings[learning.AUTO_SETTING])
    return learning.effective_on(conn, key, configured, float(config.SETTINGS[key][1]), auto)


def _subagent(ctx: HookContext) -> str | None:
    conn = open_db(ctx.log)
    if conn is None:
        return None
    try:
        rows = plan.run(conn, search.standing_rules(ctx.project.project_id))
    finally:
        release(conn)
    if not rows:
        return None
    text = render_rules(rows)
    if text and ctx.session_id:  # counted in the session's tax, but no dedup: a new context
        with Ledger(ctx.session_id) as ledger:
            ledger.append({"event": ctx.event, "ids": [], "tokens": estimate_tokens(text)})
    return text or None
