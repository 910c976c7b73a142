"""How hooks reach the store: short busy timeouts, never creating or migrating the database.

The CLI and the background workers create and migrate the database; a hook that finds it missing, or
of another schema version, logs that and does without (reads print nothing; writes are spooled, see
:mod:`agentctx.hooks.spool`).
"""

from __future__ import annotations

import os

from agentctx import db, home, schema
from agentctx.errors import AgentctxError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlean

    from agentctx.hooks.runner import HookContext

READ_BUSY_MS = 200
WRITE_BUSY_MS = 400


def open_db(ctx: HookContext, *, write: bool = False) -> sqlean.Connection | None:
    """A connection to the current-schema store, or None (and a log line) when there is none."""
    path = home.db_path()
    if not os.path.exists(path):
        ctx.log("no database yet: run `agentctx init`")
        return None
    try:
        conn, _caps = db.connect(
            path,
            busy_timeout_ms=WRITE_BUSY_MS if write else READ_BUSY_MS,
            load_vec=False,
            create=False,
            readonly=not write,
        )
    except AgentctxError as exc:
        ctx.log(str(exc))
        return None
    try:
        if not write:  # reads straight from the page cache of the OS: ~1 ms less per prompt
            conn.execute("PRAGMA mmap_size = 268435456")
        version = schema.schema_version(conn)
    except Exception as exc:
        conn.close()
        ctx.log(f"database unreadable ({exc}); see `agentctx doctor`")
        return None
    if version != schema.SCHEMA_VERSION:
        conn.close()
        relation = "newer" if version > schema.SCHEMA_VERSION else "older"
        ctx.log(
            f"database schema {version} is {relation} than this agentctx's "
            f"({schema.SCHEMA_VERSION}); skipped (run any agentctx command to migrate an older one)"
        )
        return None
    return conn
