"""SessionStart: inject the project's pre-computed digest (hard cap 1,500 tokens).

The fast path reads ``digests/<project>.json`` and imports neither SQLite nor ``json``. When the file
is missing or corrupt (first session, or a write made it stale) the digest is built from the store
within the same budget and saved for the next session. The file holds the digest in parts; this
session's checkout (worktree) picks its own handover, else the legacy one (:func:`digests.assemble`).
"""

from __future__ import annotations

import time

from agentctx.core import digests
from agentctx.core.ledger import Ledger
from agentctx.core.tokens import estimate_tokens, truncate_to_tokens

TYPE_CHECKING = False
if TYPE_CHECKING:
    from agentctx.core.shapes import Digest
    from agentctx.hooks.runner import HookContext


def handle(ctx: HookContext) -> str | None:
    """The digest text, or None when the store knows nothing of this project."""
    project = ctx.project
    data = digests.read(project.project_id) or _build(ctx)
    if data is None:
        return None
    whole, ids = digests.assemble(data["parts"], project.checkout)
    text = truncate_to_tokens(whole, digests.MAX_TOKENS, digests.MAX_CHARS)
    if not text.strip():
        return None
    if text != whole:  # cut again here (a hand-edited file): keep the ids still visible
        ids = [i for i in ids if i in text]
    if ctx.session_id:
        with Ledger(ctx.session_id) as ledger:
            ledger.append(
                {
                    "event": ctx.event,
                    "ids": ids,
                    "tokens": estimate_tokens(text),
                    "project_id": project.project_id,
                    "cwd": ctx.cwd,
                    "transcript_path": ctx.text("transcript_path"),
                    "source": ctx.text("source"),
                }
            )
    return text


def _build(ctx: HookContext) -> Digest | None:
    from agentctx.core import clock
    from agentctx.core.connect import open_db, release
    from agentctx.retrieval import digest

    started_ns = time.time_ns()
    conn = open_db(ctx.log)
    if conn is None:
        return None
    try:
        data = digest.build(conn, ctx.project.project_id, ctx.project.name, ctx.project.checkout)
    finally:
        release(conn)
    try:
        digests.write(data, clock.now(), started_ns)
    except OSError as exc:
        ctx.log(f"could not save the digest: {exc}")
    return data
