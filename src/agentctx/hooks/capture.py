"""PostToolUse / PostToolUseFailure and PreCompact: run the capture rules, write what they saw.

The rules are :mod:`agentctx.core.capture`; the observations are written in one transaction
(:func:`agentctx.core.observe.apply`), or spooled when the store cannot take them now, not lost.
"""

from __future__ import annotations

from agentctx.core import spool
from agentctx.core.capture import pre_compact, tool_use
from agentctx.core.connect import busy_or, open_db
from agentctx.core.observe import apply

TYPE_CHECKING = False
if TYPE_CHECKING:
    from agentctx.core.shapes import Observation
    from agentctx.hooks.runner import HookContext


def handle(ctx: HookContext) -> None:
    """Record what the event shows; prints nothing."""
    observations = pre_compact(ctx) if ctx.event == "PreCompact" else tool_use(ctx)
    if observations:
        store(ctx, observations)


def store(ctx: HookContext, observations: list[Observation]) -> None:
    """Write observations now, or spool them when the store cannot take them."""
    from agentctx.core.driver import sqlite

    conn = open_db(ctx.log, write=True)
    if conn is not None:
        try:
            spool.drain(conn, ctx.log)
            apply(conn, observations)
            return
        except sqlite.DatabaseError as exc:  # busy, or a write the store refused: keep it
            ctx.log(f"{busy_or(exc)}; observations spooled for the next hook")
        finally:
            conn.close()
    spool.save(observations)
