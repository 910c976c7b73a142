"""The last rung of the degradation ladder: the pinned records only.

When the store cannot be searched — FTS5 missing or corrupt and the LIKE fallback failing too, a lock
that does not clear within the hook's busy timeout, a database that does not open — the prompt hook
injects the pinned current records (the project's and the global ones) that this session was not
shown yet, and SessionStart does the same when it has no digest file and cannot build one.

They are read from the database with a plain table read (no FTS) when it answers, else from
``digests/<project>.pinned.json``, which every digest build rewrites (:func:`save`, called by
:func:`agentctx.core.digests.write`). Invalidation leaves that file alone: on this rung a pinned list
at most one digest build old beats none, and it is said to be one (:data:`NOTE`).
"""

from __future__ import annotations

import os

from agentctx.core import files, home, nofollow, plan
from agentctx.core.project import GLOBAL_PROJECT_ID

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any

    import sqlean

    from agentctx.core.plan import Plan

#: The columns a pinned record is injected with (:func:`agentctx.core.inject.format_record`).
FIELDS = ("id", "type", "title", "body", "scope", "confidence", "source", "key", "valid_from")
#: At most this many pinned records are kept (the injection itself takes three).
LIMIT = 20
#: The file's size cap: twenty records of the schema's maximum size, with room to spare.
MAX_FILE_BYTES = 256 * 1024
#: Said above the records injected on this rung.
NOTE = "(agentctx search is unavailable right now: only pinned records are shown.)"

_SQL = (
    f"SELECT {', '.join(FIELDS)} FROM records WHERE pinned = 1 AND superseded_at IS NULL "
    "AND project_id IN (?, ?) "
    "ORDER BY type = 'decision' DESC, type = 'convention' DESC, valid_from DESC, id LIMIT ?"
)


def current(project_id: str) -> Plan[list[dict[str, Any]]]:
    """The pinned current records of a project and the global ones, decisions first."""
    found = yield plan.rows(_SQL, (project_id, GLOBAL_PROJECT_ID, LIMIT))
    return [dict(zip(FIELDS, row, strict=True)) for row in found]


def path_for(project_id: str) -> str:
    """The pinned-records file of a project (beside its digest)."""
    return os.path.join(home.sub("digests"), f"{project_id}.pinned.json")


def save(project_id: str, records: list[dict[str, Any]]) -> None:
    """Write a project's pinned list atomically (0600); an empty list removes the file."""
    path = path_for(project_id)
    if not records:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        return
    from agentctx.core import jsonio

    home.ensure_sub("digests")
    kept = [{k: str(r.get(k) or "") for k in FIELDS} for r in records[:LIMIT]]
    files.write_atomic(path, jsonio.dumps(kept).encode("utf-8"))


def load(project_id: str) -> list[dict[str, Any]]:
    """The saved pinned list; empty when there is none or it is not a list of records."""
    from agentctx.core import jsonio

    try:
        data = jsonio.loads(nofollow.read_bytes(path_for(project_id), MAX_FILE_BYTES).decode())
    except (OSError, ValueError, UnicodeDecodeError):
        return []
    if not isinstance(data, list):
        return []
    return [
        {k: str(r.get(k) or "") for k in FIELDS}
        for r in data
        if isinstance(r, dict) and r.get("id") and r.get("title")
    ]


def fallback(
    conn: sqlean.Connection | None,
    project_id: str,
    exclude: Iterable[str],
    log: Callable[[str], None],
) -> list[dict[str, Any]]:
    """The pinned records to inject on this rung, not in ``exclude``: from ``conn`` when it can be
    read, else from the saved list."""
    records: list[dict[str, Any]] | None = None
    if conn is not None:
        try:
            records = plan.run(conn, current(project_id))
        except Exception as exc:  # the database cannot even be scanned: the saved list
            log(f"pinned records unreadable in the database ({type(exc).__name__}: {exc})")
    if records is None:
        records = load(project_id)
    skip = set(exclude)
    return [r for r in records if r["id"] not in skip]
