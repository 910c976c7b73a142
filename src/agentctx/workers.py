"""The background workers the Stop and SessionEnd hooks start, detached.

``agentctx worker session-end`` runs the final extraction of a session (unless ``--no-extract``)
and then consolidation. Consolidation arrives with its own issue; until then the worker says so in
``logs/workers.log`` and ends. Each step opens the store itself, so a killed worker loses nothing
that was not committed, and the next run picks the work up (extraction is incremental).
"""

from __future__ import annotations

import sys

from agentctx import clock
from agentctx.extract import Report, extract_session
from agentctx.store import Store


def log(message: str) -> None:
    """One line to the worker's stderr (the hooks point it at ``logs/workers.log``)."""
    sys.stderr.write(f"{clock.now()} {message}\n")
    sys.stderr.flush()


async def session_end(
    session_id: str | None, transcript: str | None, project_id: str, *, extract: bool
) -> Report | None:
    """Final extraction of a session, then consolidation of its project."""
    report: Report | None = None
    async with await Store.open() as store:
        if extract and session_id:
            report = await extract_session(store, session_id, transcript=transcript, log=log)
            log(f"extract {session_id}: {report.status} {report.written or ''}".rstrip())
    log(f"consolidation of {project_id[:12]}: not available in this version")
    return report
