"""SubagentStart: what a subagent should know before it starts.

The subagent's task (Claude Code does not send it: :mod:`agentctx.core.subagents` reads it from the
parent's transcript) is searched like a prompt (:func:`agentctx.hooks.prompt.inject`: the tiers and
budgets), without the session's dedup (a subagent's context is new); with no task found or nothing
relevant to it, the project's active decisions and conventions, fenced and labelled
(:func:`agentctx.core.inject.render_rules`, 800 tokens). A handler of its own: a prompt does not
load it.
"""

from __future__ import annotations

import os

from agentctx.core import meaning, plan, search
from agentctx.hooks import prompt

TYPE_CHECKING = False
if TYPE_CHECKING:
    from agentctx.core.shapes import LedgerEntry
    from agentctx.hooks.runner import HookContext


def handle(ctx: HookContext) -> str | None:
    """The subagent's task searched like a prompt, else the project's standing rules.

    Claude Code does not send the task; :func:`agentctx.core.subagents.task_of` reads it from the
    parent's transcript. A subagent starts with a context of its own: what the parent session was
    shown is not excluded, and what the subagent is shown is noted in the ledger apart from the
    session's ``ids`` (the parent may still be shown it, docs/spec.md).
    """
    from agentctx.core.ledger import Ledger
    from agentctx.core.subagents import WAIT_S, task_of
    from agentctx.core.tokens import estimate_tokens

    path = ctx.text("transcript_path")
    # The file may not exist before Claude Code's first flush; no folder for it: nothing to wait for.
    wait = WAIT_S if path and os.path.isdir(os.path.dirname(path)) else 0.0
    task = task_of(path, ctx.text("agent_id"), ctx.text("agent_type"), wait)
    text, ids = _for_task(ctx, task) if task else ("", [])
    if text:
        if ctx.session_id:
            with Ledger(ctx.session_id) as ledger:
                entry: LedgerEntry = {
                    "event": ctx.event,
                    "ids": [],
                    "tokens": estimate_tokens(text),
                }
                entry["subagent_ids"] = ids
                ledger.append(entry)
        return text
    return _standing_rules(ctx)


def _for_task(ctx: HookContext, task: str) -> tuple[str, list[str]]:
    """What :func:`agentctx.hooks.prompt.inject` gives the task (the prompt's tiers and
    budgets), without the session's dedup."""
    terms = search.query_terms(task)
    if not terms:
        return "", []
    from agentctx.core.connect import open_db, release

    pending = None
    if search.content(terms) >= search.MIN_CONTENT:
        pending = meaning.ask(task, ctx.project.project_id, ctx.log)
    conn = open_db(ctx.log)
    try:
        text, ids, lines = prompt.inject(ctx, conn, terms, set(), set(), pending)
    finally:
        if conn is not None:
            release(conn)
    return text, [*ids, *lines]


def _standing_rules(ctx: HookContext) -> str | None:
    """The project's active decisions and conventions (no task found, or nothing matched it)."""
    from agentctx.core.connect import open_db, release
    from agentctx.core.inject import render_rules
    from agentctx.core.ledger import Ledger
    from agentctx.core.tokens import estimate_tokens

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
