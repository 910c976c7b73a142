"""How hooks reach the store: short busy timeouts, never creating or migrating the database.

The CLI and the background workers create and migrate the database; a hook that finds it missing, or
of another schema version, logs that and does without (reads print nothing; writes are spooled, see
:mod:`agentctx.core.spool`).
"""

from __future__ import annotations

import os

from agentctx.core import db, home, schema
from agentctx.core.errors import UPGRADE_ADVICE, AgentctxError, SchemaVersionError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    import sqlean

READ_BUSY_MS = 200
WRITE_BUSY_MS = 400
_left_open: list[object] = []


def open_db(log: Callable[[str], None], *, write: bool = False) -> sqlean.Connection | None:
    """A connection to the current-schema store, or None (and ``log(why)``) when there is none."""
    path = home.db_path()
    if not os.path.exists(path):
        log("no database yet: run `agentctx init`")
        return None
    try:
        # The version is checked before the write policy switches the file to WAL: a database of
        # another version is left byte-for-byte as it was.
        conn, _caps = db.connect(
            path,
            busy_timeout_ms=WRITE_BUSY_MS if write else READ_BUSY_MS,
            load_vec=False,
            create=False,
            readonly=not write,
            check_version=_require_current,
        )
    except SchemaVersionError as exc:
        log(str(exc))
        return None
    except AgentctxError as exc:
        conn = None if write else _read_only_media(path)
        if conn is None:
            log(str(exc))
            return None
    if not write:  # reads straight from the page cache of the OS, without copying pages
        try:
            conn.execute("PRAGMA mmap_size = 268435456")
        except Exception as exc:
            conn.close()
            log(f"database unreadable ({exc}); see `agentctx doctor`")
            return None
    return conn


def release(conn: sqlean.Connection) -> None:
    """Done with a read connection: close it, or in a hook process leave it to the process's end.

    Closing unmaps the file and frees the page cache SQLite built: work that grows with the store
    and that ``os._exit`` makes pointless (:data:`agentctx.core.ENDS_WITH_HANDLER`).
    """
    import agentctx.core

    if agentctx.core.ENDS_WITH_HANDLER:
        _left_open.append(conn)  # referenced, so it is not closed when the caller drops it
    else:
        conn.close()


def _read_only_media(path: str) -> sqlean.Connection | None:
    """A read connection to a store on a read-only mount, a full disk or past ``ulimit -f``, or None.

    SQLite needs to create (and size) the WAL index even to read; where it cannot, an immutable
    open still reads the file (nothing can commit there either), so prompts keep their context.
    """
    if db.unwritable_reason(path) is None:
        return None
    try:
        conn, _caps = db.connect(
            path,
            busy_timeout_ms=READ_BUSY_MS,
            load_vec=False,
            create=False,
            immutable=True,
            check_version=_require_current,
        )
    except AgentctxError:
        return None
    return conn


def _require_current(version: int) -> None:
    if version == schema.SCHEMA_VERSION:
        return
    if version > schema.SCHEMA_VERSION:
        raise SchemaVersionError(
            f"database schema {version} is newer than this agentctx's ({schema.SCHEMA_VERSION}); "
            f"hooks leave it alone: {UPGRADE_ADVICE}"
        )
    raise SchemaVersionError(
        f"database schema {version} is older than this agentctx's ({schema.SCHEMA_VERSION}); "
        "skipped until an agentctx command or the SessionEnd worker migrates it"
    )


def busy_or(exc: BaseException) -> str:
    """A log phrase for a write that did not happen: a busy store said plainly, else the error."""
    text = str(exc)
    if "locked" in text or "busy" in text:  # SQLite's SQLITE_BUSY text is "database is locked"
        return f"the store stayed busy over {WRITE_BUSY_MS} ms (other sessions writing)"
    return f"the store refused the write ({text})"
