"""The ``sessions`` table, owned here: every write to a session's row goes through this module.

A session's row is created or refreshed by the hooks (:func:`upsert`), asks for an extraction when the
conversation grew (:func:`requested_size`, :func:`request_extraction`), moves its extraction offset
forward with each run (:func:`advance`) and, at SessionEnd, takes the totals of its hook ledger
(:mod:`agentctx.core.ledger`) and the ids it was shown (``session_injections``) (:func:`end`). The
rules are plans (:mod:`agentctx.core.plan`): the hooks run them on a sync connection, extraction inside
a :class:`agentctx.store.Transaction`. :func:`end` and :func:`change_cwd` also touch the ledger files,
so they take a sync connection.
"""

from __future__ import annotations

import os
import time

from agentctx.core import clock, home, ledger
from agentctx.core.plan import execute, execute_many, one, rows

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlean

    from agentctx.core.plan import Plan
    from agentctx.core.shapes import LedgerEntry, SessionSummary

#: A ledger untouched this long belongs to a session that never saw SessionEnd (a crash).
STALE_LEDGER_S = 24 * 3600
#: A transcript nobody wrote for this long belongs to a session that is over or paused: the idle
#: sweep extracts its unextracted tail (:func:`idle_tails`).
IDLE_S = 20 * 60.0
#: Sessions started within this many days are swept.
SWEEP_DAYS = 7


def upsert(
    session_id: str, project_id: str, cwd: str, transcript_path: str, started_at: str
) -> Plan[None]:
    """Create or refresh a session's row (project, cwd, transcript path); it is open again."""
    yield execute(
        "INSERT INTO sessions(session_id, project_id, cwd, transcript_path, started_at) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT(session_id) DO UPDATE SET "
        "project_id = excluded.project_id, cwd = excluded.cwd, ended_at = NULL, "
        "transcript_path = coalesce(nullif(excluded.transcript_path, ''), transcript_path)",
        (session_id, project_id, cwd, transcript_path, started_at),
    )


def started_at(session_id: str) -> str:
    """When a session started: its ledger's first entry, else now."""
    entries = ledger.read_entries(session_id)
    if entries and isinstance(entries[0].get("t"), int | float):
        from datetime import UTC, datetime

        return clock.format_time(datetime.fromtimestamp(float(entries[0]["t"]), UTC))
    return clock.now()


def refresh(
    conn: sqlean.Connection, session_id: str, project_id: str, cwd: str, transcript_path: str
) -> None:
    """:func:`upsert` with the start time read from the session's ledger."""
    from agentctx.core.plan import run

    run(conn, upsert(session_id, project_id, cwd, transcript_path, started_at(session_id)))


def requested_size(session_id: str) -> Plan[int]:
    """The transcript size when an extraction was last requested (0: never)."""
    row = yield one(
        "SELECT extract_requested_size FROM sessions WHERE session_id = ?", (session_id,)
    )
    return int(row[0]) if row else 0


def request_extraction(session_id: str, size: int) -> Plan[None]:
    """Note that an extraction was requested at this transcript size."""
    yield execute(
        "UPDATE sessions SET extract_requested_size = ? WHERE session_id = ?", (size, session_id)
    )


def advance(
    session_id: str,
    project_id: str,
    transcript: str | None,
    last_uuid: str | None,
    written: int,
    cost: float,
    error: str | None = None,
    *,
    backend: str | None = None,
    size: int = 0,
) -> Plan[None]:
    """Count one extraction run: its new offset (``last_uuid``, None: unchanged), records, cost,
    the backend that ran it and, once the run covered the transcript up to byte ``size``, that size
    (so that the idle sweep, :func:`idle_unextracted`, leaves it alone until it grows)."""
    yield execute(
        "INSERT INTO sessions(session_id, project_id, transcript_path, started_at) "
        "VALUES (?, ?, ?, ?) ON CONFLICT(session_id) DO NOTHING",
        (session_id, project_id, transcript, clock.now()),
    )
    yield execute(
        "UPDATE sessions SET extracted_uuid = coalesce(?, extracted_uuid), "
        "extractions = extractions + 1, records_extracted = records_extracted + ?, "
        "extraction_cost_usd = extraction_cost_usd + ?, extraction_error = ?, "
        "extraction_backend = coalesce(?, extraction_backend), "
        "extracted_size = max(extracted_size, ?) "
        "WHERE session_id = ?",
        (last_uuid, written, cost, error, backend, size, session_id),
    )


def spend(
    session_id: str,
    project_id: str | None,
    backend: str,
    status: str,
    counts: dict[str, int],
    cost: float,
    error: str | None = None,
) -> Plan[None]:
    """One row of the extraction ledger: a run's backend, outcome, calls, tokens and cost.

    ``counts``: ``calls``, ``input_tokens``, ``output_tokens``, ``cache_creation_tokens``,
    ``cache_read_tokens`` (missing ones are 0).
    """
    now = clock.now()
    names = ("calls", "input_tokens", "output_tokens", "cache_creation_tokens", "cache_read_tokens")
    yield execute(
        "INSERT INTO extraction_ledger(at, day, session_id, project_id, backend, status, calls, "
        "input_tokens, output_tokens, cache_creation_tokens, cache_read_tokens, cost_usd, error) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (now, now[:10], session_id, project_id, backend, status,
         *(int(counts.get(name, 0)) for name in names), cost, error),
    )  # fmt: skip


def spent_today(backend: str, session_id: str) -> Plan[tuple[int, int, int]]:
    """Today's (UTC) spend through ``backend``: (calls, tokens, calls for ``session_id``)."""
    row = yield one(
        "SELECT coalesce(sum(calls), 0), coalesce(sum(input_tokens + output_tokens "
        "+ cache_creation_tokens + cache_read_tokens), 0), "
        "coalesce(sum(CASE WHEN session_id = ? THEN calls ELSE 0 END), 0) "
        "FROM extraction_ledger WHERE day = ? AND backend = ?",
        (session_id, clock.now()[:10], backend),
    )
    return (int(row[0]), int(row[1]), int(row[2])) if row else (0, 0, 0)


def idle_tails(
    found: list[tuple[str, str, int]], now: float, idle: float = IDLE_S
) -> list[tuple[str, str]]:
    """Of :func:`idle_unextracted`'s sessions, those whose transcript grew past what the last
    extraction covered and that nobody wrote for ``idle`` seconds: (id, transcript path)."""
    tails = []
    for session_id, path, covered in found:
        try:
            info = os.stat(path)
        except (OSError, ValueError):
            continue
        if info.st_size > covered and now - info.st_mtime >= idle:
            tails.append((session_id, path))
    return tails


def idle_unextracted(since: str, limit: int) -> Plan[list[tuple[str, str, int]]]:
    """Sessions started after ``since`` with a transcript: (id, transcript path, the size the
    last extraction covered), the least recently extracted first. The caller compares the file's
    size and age (whether it has an unextracted tail and is idle)."""
    found = yield rows(
        "SELECT session_id, transcript_path, extracted_size FROM sessions "
        "WHERE transcript_path IS NOT NULL AND transcript_path != '' AND started_at >= ? "
        "ORDER BY started_at LIMIT ?",
        (since, limit),
    )
    return [(str(r[0]), str(r[1]), int(r[2] or 0)) for r in found]


def fold(session_id: str, entries: list[LedgerEntry], *, ended: bool) -> Plan[None]:
    """Add ledger entries' totals and shown ids to a session's row; mark it ended if asked."""
    tokens, count = ledger.totals(entries)
    # A resumed session keeps its dedup: UserPromptSubmit also reads these.
    yield execute_many(
        "INSERT OR IGNORE INTO session_injections(session_id, record_id) VALUES (?, ?)",
        [(session_id, record_id) for record_id in sorted(ledger.injected_ids(entries))],
    )
    # each prompt's injections, for their verdicts (issue 25): the ledger file goes after this
    from agentctx.core import learning

    yield from learning.record(session_id, learning.from_entries(entries))
    now = clock.now()
    yield execute(
        "INSERT INTO sessions(session_id, started_at) VALUES (?, ?) ON CONFLICT DO NOTHING",
        (session_id, now),
    )
    yield execute(
        "UPDATE sessions SET tokens_injected = tokens_injected + ?, injections = injections + ?, "
        "ended_at = CASE WHEN ? THEN ? ELSE ended_at END WHERE session_id = ?",
        (tokens, count, int(ended), now, session_id),
    )


def end(
    conn: sqlean.Connection,
    session_id: str,
    project_id: str,
    cwd: str,
    transcript_path: str,
) -> list[str]:
    """SessionEnd's bookkeeping; the sessions whose ledgers were folded (stale ones included).

    One ``BEGIN IMMEDIATE`` transaction (one wait for the write lock, and a fold that happens whole
    or not at all) refreshes the session's row, folds its ledger and every stale one
    (:data:`STALE_LEDGER_S`); the ledger files are removed only once it committed. An empty
    ``session_id`` folds only the stale ledgers.
    """
    from agentctx.core.plan import run

    started = started_at(session_id) if session_id else ""
    folded: list[str] = []
    conn.execute("BEGIN IMMEDIATE")
    try:
        if session_id:
            run(conn, upsert(session_id, project_id, cwd, transcript_path, started))
            run(conn, fold(session_id, ledger.read_entries(session_id), ended=True))
            folded.append(session_id)
        for stale in _stale_ledgers():
            if stale != session_id:
                run(conn, fold(stale, ledger.read_entries(stale), ended=True))
                folded.append(stale)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    for folded_id in folded:
        try:
            os.unlink(ledger.path_for(folded_id))
        except FileNotFoundError:
            pass
    if session_id:  # an ended session stales its checkout's handover: the digest is rebuilt
        from agentctx.core import digests

        digests.invalidate([project_id])
    return folded


def _stale_ledgers() -> list[str]:
    """Sessions whose ledger nobody wrote for :data:`STALE_LEDGER_S` (their file names)."""
    folder = home.sub("sessions")
    try:
        names = [n for n in os.listdir(folder) if n.endswith(".jsonl")]
    except OSError:
        return []
    cutoff = time.time() - STALE_LEDGER_S
    stale = []
    for name in names:
        try:
            if os.path.getmtime(os.path.join(folder, name)) < cutoff:
                stale.append(name[: -len(".jsonl")])
        except OSError:
            continue
    return stale


def change_cwd(
    conn: sqlean.Connection,
    session_id: str,
    project_id: str,
    cwd: str,
    transcript_path: str,
    event: str = "CwdChanged",
) -> None:
    """Move a session to another directory (and maybe project); its ledger notes the move."""
    refresh(conn, session_id, project_id, cwd, transcript_path)
    with ledger.Ledger(session_id) as state:
        state.append({"event": event, "cwd": cwd, "project_id": project_id})


def with_open_ledgers(
    rows: list[SessionSummary], project_id: str | None = None
) -> list[SessionSummary]:
    """Session rows with the injections of still-open sessions (read from their ledgers) added.

    A session's injections are in its ledger until SessionEnd folds them into its row; a session
    with a ledger and no row yet is added (of ``project_id`` only, when given).
    """
    by_id = {row["session_id"]: row for row in rows}
    for session_id, entries in ledger.open_sessions().items():
        tokens, count = ledger.totals(entries)
        row = by_id.get(session_id)
        if row is None:
            first = entries[0] if entries else {}
            if project_id is not None and first.get("project_id") != project_id:
                continue
            row = {
                "session_id": session_id,
                "project_id": first.get("project_id"),
                "cwd": first.get("cwd"),
                "started_at": None,
                "ended_at": None,
                "tokens_injected": 0,
                "injections": 0,
                "extraction_cost_usd": 0.0,
                "extraction_backend": None,
            }
            rows.append(row)
            by_id[session_id] = row
        row["tokens_injected"] += tokens
        row["injections"] += count
    return rows
