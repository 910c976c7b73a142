"""The background workers the Stop and SessionEnd hooks start, detached.

``agentctx worker session-end`` runs the final extraction of a session (unless ``--no-extract``)
and then the consolidation of its project (:mod:`agentctx.consolidate`, time-boxed). Each unit of
work commits on its own, so a killed worker loses nothing that was committed and the next run picks
the rest up (extraction is incremental, consolidation resumes from the flags it left). Lines go to
the worker's stderr, which the hooks point at ``logs/workers.log``. An extraction the Stop hook
started may still be running when the session ends: the final one waits for it (up to
:data:`EXTRACT_WAIT_S`) rather than skip the last turns, and consolidation then sees its records.

Every worker a hook starts has a deadline (:func:`give_up_after`, :data:`WORKER_DEADLINE_S`): past
it the process logs one line and exits, whatever it was doing (a blocked read, a slow API), so the
kernel releases its locks and SQLite rolls back the one unit of work not yet committed.
"""

from __future__ import annotations

import os
import sys
import threading
import time

from agentctx.consolidate import DEFAULT_TIME_BOX, consolidate
from agentctx.consolidate import Report as ConsolidationReport
from agentctx.core import clock
from agentctx.extract import Report, extract_session
from agentctx.store import Store

#: Longest wait for a running extraction of the session (the SDK's retries included).
EXTRACT_WAIT_S = 300.0
#: A worker started by a hook finishes or gives up within this many seconds (docs/security.md).
WORKER_DEADLINE_S = 30.0
#: Exit status of a worker that gave up at its deadline.
GAVE_UP = 3


def give_up_after(seconds: float, what: str) -> float:
    """Exit this process ``seconds`` from now unless it ended before; return the deadline.

    A timer thread, not a cancel scope: it also ends a worker blocked in a read or in C code.
    ``os._exit`` skips cleanup on purpose; locks are ``flock`` (released by the kernel) and
    every unit of work is its own transaction.
    """

    def fire() -> None:
        log(f"{what}: gave up after {seconds:g} s (worker deadline); committed work is kept")
        os._exit(GAVE_UP)

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()
    return time.monotonic() + seconds


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
    deadline: float | None = None,
) -> tuple[Report | None, list[ConsolidationReport]]:
    """Final extraction of a session, then consolidation of its project.

    ``deadline`` (``time.monotonic()``): the waits and the consolidation's time box fit before it.
    """
    report: Report | None = None
    wait = EXTRACT_WAIT_S
    if deadline is not None:
        wait = max(0.0, min(wait, (deadline - time.monotonic()) / 2))
    async with await Store.open() as store:
        if extract and session_id:
            report = await extract_session(
                store, session_id, transcript=transcript, log=log, wait=wait
            )
            log(f"extract {session_id}: {report.status} {report.written or ''}".rstrip())
        if deadline is not None:
            left = deadline - time.monotonic() - 1.0
            time_box = max(0.1, min(time_box, left))
        consolidated = await consolidate(store, project_id, time_box=time_box, log=log)
    return report, consolidated
