"""The background workers the Stop and SessionEnd hooks start, detached.

``agentctx worker sweep`` (started by SessionStart, at most every
:data:`agentctx.hooks.session_start.SWEEP_EVERY_S`, when there is something to sweep) extracts the sessions that never got to: a terminal
closed or a crash skips SessionEnd, Stop waits for 32 KiB of new conversation, and a run deferred by
the claude-code caps or failed is tried again. A session is swept when its transcript grew past
what its last extraction covered (``sessions.extracted_size``) and nobody wrote it for
:data:`agentctx.core.sessions.IDLE_S`; the extraction lock and that mark make it happen once.

``agentctx worker session-end`` runs the final extraction of a session (unless ``--no-extract``)
and then the consolidation of its project (:mod:`agentctx.consolidate`, time-boxed). Each unit of
work commits on its own, so a killed worker loses nothing that was committed and the next run picks
the rest up (extraction is incremental, consolidation resumes from the flags it left). Lines go to
the worker's stderr, which the hooks point at ``logs/workers.log``. An extraction the Stop hook
started may still be running when the session ends: the final one waits for it (up to
:data:`EXTRACT_WAIT_S`) rather than skip the last turns, and consolidation then sees its records.

Every worker a hook starts has a deadline (:func:`give_up_after`, :data:`WORKER_DEADLINE_S`, or
:data:`EXTRACTION_DEADLINE_S` when it extracts): past
it the process logs one line and exits, whatever it was doing (a blocked read, a slow API), so the
kernel releases its locks and SQLite rolls back the one unit of work not yet committed.
"""

from __future__ import annotations

import os
import sys
import threading
import time

import anyio

from agentctx.consolidate import DEFAULT_TIME_BOX, consolidate
from agentctx.consolidate import Report as ConsolidationReport
from agentctx.core import clock, sessions
from agentctx.core.locks import extraction_running
from agentctx.extract import Report, extract_session
from agentctx.store import Store

#: Longest wait for a running extraction of the session (the SDK's retries included).
EXTRACT_WAIT_S = 300.0
#: Most sessions one sweep extracts (the rest wait for the next).
SWEEP_MAX = 5
#: A worker started by a hook finishes or gives up within this many seconds (docs/security.md)...
WORKER_DEADLINE_S = 30.0
#: ... unless it extracts: model calls over a long session take minutes, and an extraction killed
#: at 30 s would be paid for again and never land (its records commit at the end of the run).
EXTRACTION_DEADLINE_S = 300.0
#: Exit status of a worker that gave up at its deadline.
GAVE_UP = 3
#: Extraction outcomes after which no verdict call is tried: no backend, a cap, another run.
NOT_JUDGED_AFTER = frozenset({
    "deferred", "locked", "no_transcript", "no_backend", "no_api_key", "backend_off", "llm_off",
})  # fmt: skip


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
            if report.status not in NOT_JUDGED_AFTER:
                await judge(store, session_id, transcript)
        if deadline is not None:
            left = deadline - time.monotonic() - 1.0
            time_box = max(0.1, min(time_box, left))
        consolidated = await consolidate(store, project_id, time_box=time_box, log=log)
        await team_sync(store, [project_id], deadline=deadline)
    return report, consolidated


async def judge(store: Store, session_id: str, transcript: str | None) -> None:
    """The session's injection verdicts (:mod:`agentctx.extract.verdicts`), after its extraction:
    one call at most; a failure is a log line, never the worker's end."""
    from agentctx.extract.verdicts import judge_session

    try:
        report = await judge_session(store, session_id, transcript=transcript, log=log)
    except Exception as exc:  # verdicts are a bonus: the worker's other work goes on
        log(f"verdicts {session_id}: {type(exc).__name__}: {exc}"[:400])
        return
    if report.status != "nothing":
        log(
            f"verdicts {session_id}: {report.status}, {report.judged} judged, "
            f"{report.waiting} waiting"
        )


async def team_sync(
    store: Store, project_ids: list[str] | None = None, *, deadline: float | None = None
) -> None:
    """Sync the linked projects (those given, or all) with their team hub, when any is linked.

    The SessionEnd worker's last step (after extraction and consolidation) and the whole of the
    ``worker team-sync`` that SessionStart starts. Never raises: a missing psycopg, a busy lock,
    an unreachable hub or a refusal is one log line; the next sync retries (after a backoff).
    """
    from agentctx.team.hub import MISSING, HubError, local

    try:
        links = await local.links(store)
        if not any(project_ids is None or link["project_id"] in project_ids for link in links):
            return
        try:
            from agentctx.team.hub import sync as hub_sync
        except ImportError:
            log(f"team sync: {MISSING}")
            return
        for report in await hub_sync.sync_all(
            store, project_ids, deadline=deadline, log=None, background=True
        ):
            log(report.line())
    except HubError as exc:
        log(f"team sync: {exc}")


async def sweep(*, idle: float = sessions.IDLE_S, limit: int = SWEEP_MAX) -> list[Report]:
    """Extract the idle sessions with an unextracted tail (module docstring); their reports."""
    done: list[Report] = []
    async with await Store.open() as store:
        found = await store.run(
            sessions.idle_unextracted(clock.days_ago(sessions.SWEEP_DAYS), 1000)
        )
        for session_id, path in sessions.idle_tails(found, time.time(), idle):
            if len(done) >= limit:
                break
            if extraction_running(session_id):
                continue
            report = await extract_session(store, session_id, transcript=path, log=log)
            log(f"sweep {session_id}: {report.status} {report.written or ''}".rstrip())
            done.append(report)
            if report.status not in NOT_JUDGED_AFTER:
                await judge(store, session_id, path)
            if report.status in ("deferred", "no_backend", "no_api_key", "backend_off", "llm_off"):
                break  # the next sessions would meet the same cap or lack of a backend
    return done


async def profile(cwd: str) -> list[str]:
    """Detect the profile of the checkout at ``cwd`` and record the facts that changed; their keys.

    Started detached by SessionStart and CwdChanged when the manifests changed since the last
    detection (:mod:`agentctx.core.manifests`). The signature is taken before the files are read,
    so a change made meanwhile starts another detection. A fact is written (keyed: the new one
    supersedes the old) when the project has none for its key, or when detection now finds a
    different value than it found last time; a value the user corrected by hand stays while the
    manifests say the same thing. Manifests are read as regular files inside the checkout only,
    bounded, never through a symlink (:mod:`agentctx.detection.readers`).
    """
    from pathlib import Path

    from agentctx import detection
    from agentctx.core import manifests
    from agentctx.core.locks import ProcessLock
    from agentctx.core.project import identify

    identity = identify(cwd)
    root = identity.checkout
    with ProcessLock(f"profile-{identity.project_id}") as held:
        if not held:
            log(f"profile {identity.name}: another detection runs")
            return []
        signature = manifests.signature(root)
        facts = detection.detect(Path(root))
        previous = manifests.parse_facts(manifests.read(identity.project_id)[3])
        written: list[str] = []
        async with await Store.open() as store:
            current = {
                r.key: r.body
                for r in await store.list_records(
                    identity.project_id, types=("profile",), include_superseded=False
                )
                if r.key
            }
            if facts:
                await store.touch_project(identity)
            for fact in facts:
                body = fact.body.strip()
                had = current.get(fact.key)
                changed = previous is not None and previous.get(fact.key) != manifests.fact_hash(
                    body
                )
                if had is None or (had != body and changed):
                    await store.add(fact.record(identity.project_id))
                    written.append(fact.key)
        await anyio.to_thread.run_sync(
            manifests.record, identity.project_id, signature, {f.key: f.body for f in facts}
        )
    log(f"profile {identity.name}: {', '.join(written) or 'unchanged'}")
    return written
