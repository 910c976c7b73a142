"""The background workers the Stop and SessionEnd hooks start, detached.

``agentctx worker session-end`` runs the final extraction of a session (unless ``--no-extract``)
and then the consolidation of its project (:mod:`agentctx.consolidate`, time-boxed). Each unit of
work commits on its own, so a killed worker loses nothing that was committed and the next run picks
the rest up (extraction is incremental, consolidation resumes from the flags it left). Lines go to
the worker's stderr, which the hooks point at ``logs/workers.log``. An extraction the Stop hook
started may still be running when the session ends: the final one waits for it (up to
:data:`EXTRACT_WAIT_S`) rather than skip the last turns, and consolidation then sees its records.
"""

from __future__ import annotations

import sys

from agentctx.consolidate import DEFAULT_TIME_BOX, consolidate
from agentctx.consolidate import Report as ConsolidationReport
from agentctx.core import clock
from agentctx.extract import Report, extract_session
from agentctx.store import Store

#: Longest wait for a running extraction of the session (the SDK's retries included).
EXTRACT_WAIT_S = 300.0


def log(message: str) -> None:
    """One line to the worker's stderr (the hooks point it at ``logs/workers.log``)."""
    sys.stderr.write(f"{clock.now()} {message}\n")
    sys.stderr.flush()


async def session_end(
    session_id: str | None,
    transcript: str | None,
    project_id: str,
    *,
    extract: bool,
    time_box: float = DEFAULT_TIME_BOX,
) -> tuple[Report | None, list[ConsolidationReport]]:
    """Final extraction of a session, then consolidation of its project."""
    report: Report | None = None
    async with await Store.open() as store:
        if extract and session_id:
            report = await extract_session(
                store, session_id, transcript=transcript, log=log, wait=EXTRACT_WAIT_S
            )
            log(f"extract {session_id}: {report.status} {report.written or ''}".rstrip())
        consolidated = await consolidate(store, project_id, time_box=time_box, log=log)
    return report, consolidated
