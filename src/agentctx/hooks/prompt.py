"""UserPromptSubmit: inject the records that matter for what is asked now.

UserPromptSubmit first sends the prompt to a live ``agentctx mcp`` that lends its warm embedding
model (:mod:`agentctx.core.meaning`; none: keywords alone), then runs the core's keyword search
(:func:`agentctx.core.search.for_prompt`: BM25 over the project's and global current records, the
rerank, the relevance floor ``retrieval.min_relevance``) without the records this session was shown
already, reads the server's nearest records by the deadline, and fuses and tiers both
(:func:`agentctx.core.tiers.select`): at most three entries, strong matches whole, possible ones as
one line with a handle, within 2,000 tokens and 8,000 characters. Trivial prompts and prompts with
no new relevant match print nothing. Inferred records are marked unconfirmed.

SubagentStart (:mod:`agentctx.hooks.subagent`) runs the same injection on the subagent's task.
"""

from __future__ import annotations

import os

# only what the request to the embedding server needs: the rest loads after it is sent, while
# the server embeds (ADR-017)
from agentctx.core import home, meaning, plan, search

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    import sqlean

    from agentctx.core.shapes import LedgerEntry
    from agentctx.hooks.runner import HookContext

#: Set (to anything) to log the explanation of every prompt's injection (:func:`_explain`).
DEBUG_ENV = "AGENTCTX_DEBUG"


def handle(ctx: HookContext) -> str | None:
    """The prompt's injection."""
    return _prompt(ctx)


def _prompt(ctx: HookContext) -> str | None:
    prompt = ctx.text("prompt")
    terms = search.query_terms(prompt)
    if not terms:
        return None
    # Meaning first: the server embeds the prompt while the keyword search runs here.
    pending = None
    _MARKS.clear()
    if search.content(terms) >= search.MIN_CONTENT:
        pending = meaning.ask(prompt, ctx.project.project_id, ctx.log)
        _mark("ask")
    # the store's driver and the rest of the prompt's modules load after the request is sent:
    # the server embeds meanwhile
    from agentctx.core.connect import open_db, release
    from agentctx.core.ledger import Ledger
    from agentctx.core.tokens import estimate_tokens

    conn = open_db(ctx.log)
    try:
        if not ctx.session_id:
            return inject(ctx, conn, terms, set(), set(), pending)[0] or None
        with Ledger(ctx.session_id) as ledger:
            from agentctx.core.ledger import injected_ids

            mentioned = injected_ids(ledger.entries, "lines")  # offered as a line before
            text, ids, lines = inject(
                ctx, conn, terms, injected_ids(ledger.entries), mentioned, pending
            )
            if not text:
                return None
            entry: LedgerEntry = {"event": ctx.event, "ids": ids, "tokens": estimate_tokens(text)}
            if lines:
                entry["lines"] = (
                    lines  # mentioned, not shown: a later prompt may still show them whole
                )
            ledger.append(entry)
            return text
    finally:
        if conn is not None:
            release(conn)


def inject(
    ctx: HookContext,
    conn: sqlean.Connection | None,
    terms: list[str],
    shown: set[str],
    mentioned: set[str],
    pending: meaning.Pending | None,
) -> tuple[str, list[str], list[str]]:
    """The text to inject, the record ids injected whole and those offered as a line. When the
    store cannot be searched (no connection, or the search itself fails), the last rung: the pinned
    records not shown yet (:mod:`agentctx.core.pinned`), under a note that says so."""
    from agentctx.core import tiers
    from agentctx.core.inject import FENCE_NOTE, PROMPT_NOTE, render, render_tiers

    # a subagent sees no SessionStart digest: its fence carries the full note (the sources' legend)
    note = FENCE_NOTE if ctx.event == "SubagentStart" else PROMPT_NOTE

    if conn is None:
        if not os.path.exists(home.db_path()):
            return "", [], []  # no store yet (open_db said so): nothing can be pinned
        why = "the store could not be opened"
    else:
        try:
            if ctx.session_id and ctx.event != "SubagentStart":  # a subagent: a new context
                shown = shown | plan.run(conn, search.shown_before(ctx.session_id))
            found = _keywords(ctx, conn, terms, shown)
            _mark("keywords")
            neighbours = None
            if pending is not None and not found.thin:
                neighbours = pending.hits(pending.sent_at + meaning.deadline())
                _mark("answer")
                if neighbours is None and os.environ.get(DEBUG_ENV):
                    ctx.log(f"meaning: keywords alone ({pending.why})")
            chosen = plan.run(
                conn,
                tiers.select(
                    terms,
                    ctx.project.project_id,
                    exclude_ids=shown,
                    mentioned=mentioned,
                    neighbours=neighbours,
                    found=found,
                ),
            )
            text, ids, lines = render_tiers(chosen.entries, note)
            _mark("fused")
        except Exception as exc:
            why = f"{type(exc).__name__}: {exc}"
        else:
            if os.environ.get(DEBUG_ENV):
                _timings(ctx)
                _explain(ctx, conn, shown, neighbours)
            return text, ids, lines
    from agentctx.core import pinned  # the last rung: loaded only when it is reached

    ctx.log(f"search unavailable ({why}); pinned records only")
    text, ids = render(pinned.fallback(conn, ctx.project.project_id, shown, ctx.log), note)
    return (f"{pinned.NOTE}\n{text}" if text else ""), ids, []


#: ``(step, time.monotonic())`` of the prompt's steps, logged with ``AGENTCTX_DEBUG``.
_MARKS: list[tuple[str, float]] = []


def _mark(step: str) -> None:
    import time

    _MARKS.append((step, time.monotonic()))


def _timings(ctx: HookContext) -> None:
    """With ``AGENTCTX_DEBUG``: the milliseconds of each step of this prompt, in the log."""
    last = ctx.started
    steps = []
    for step, at in _MARKS:
        steps.append(f"{step} {1000 * (at - last):.1f}")
        last = at
    ctx.log(f"timing ms: {', '.join(steps)} (from the handler's start)")


def _search(
    ctx: HookContext,
    conn: sqlean.Connection,
    terms: list[str],
    exclude: set[str] | tuple[()],
    *,
    floor: float | None = None,
) -> list[Any]:
    """The prompt's keyword candidates' rows, best first (the benchmarks' keyword-only hook)."""
    return [row for row, _score in _keywords(ctx, conn, terms, exclude, floor=floor).hits]


def _keywords(
    ctx: HookContext,
    conn: sqlean.Connection,
    terms: list[str],
    exclude: set[str] | tuple[()],
    *,
    floor: float | None = None,
) -> search.Found:
    """The prompt's keyword candidates, best first (:func:`agentctx.core.search.for_prompt`).

    ``floor`` None reads ``retrieval.min_relevance`` (only when there are candidates to judge).
    """
    level = (lambda: min_relevance(ctx, conn)) if floor is None else floor
    found = plan.run(
        conn, search.for_prompt(terms, ctx.project.project_id, exclude_ids=exclude, floor=level)
    )
    if found.degraded:
        ctx.log(found.degraded)
    return found


def _explain(
    ctx: HookContext,
    conn: sqlean.Connection,
    shown: set[str],
    neighbours: list[tuple[str, float]] | None = None,
) -> None:
    """With ``AGENTCTX_DEBUG`` set: why each candidate was injected or left out, in the log.

    The same report as ``agentctx search --explain`` (:func:`agentctx.core.explain.explain`), one
    line: it searches again, so it costs a second search and is off by default.
    """
    from agentctx.core.explain import explain

    try:
        report = plan.run(
            conn,
            explain(
                ctx.text("prompt"),
                ctx.project.project_id,
                min_relevance(ctx, conn),
                shown,
                neighbours,
            ),
        )
    except Exception as exc:  # a debugging aid never costs the prompt its context
        ctx.log(f"explain failed: {type(exc).__name__}: {exc}")
        return
    terms = " ".join(f"{t['term']}:{t['records']}/{t['specificity']:g}" for t in report["terms"])
    verdicts = "; ".join(
        f"{c['id']} rel {c['relevance']:g} cos {c.get('cosine')}: {c['tier']}, {c['verdict']}"
        for c in report["candidates"]
    )
    ctx.log(
        f"explain: terms {terms}; content {report.get('content', 0):g}; floor "
        f"{report['floor']:g}; {verdicts or 'no candidate'}"[:4000]
    )


def min_relevance(ctx: HookContext, conn: sqlean.Connection | None = None) -> float:
    """The configured relevance floor, or (issue 25) the one consolidation calibrated from the
    injection verdicts while it is on (:func:`agentctx.core.learned.effective_on`); the default
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
    from agentctx.core import learned

    auto = bool(settings[learned.AUTO_SETTING])
    return learned.effective_on(conn, key, configured, float(config.SETTINGS[key][1]), auto)
