"""The connection policy: the one place a connection to the store is opened.

Every connection, sync (hooks) or async (library), gets the same policy: WAL journal, a busy timeout,
foreign keys on, autocommit mode so that writers take the write lock up front with ``BEGIN IMMEDIATE``
(a deferred transaction that upgrades to a writer fails at once with SQLITE_BUSY instead of waiting), and
sqlite-vec loaded when it can be. The driver is sqlean.py: a bundled SQLite with FTS5 and extension
loading on every platform, where the stdlib ``sqlite3`` of many Pythons cannot load extensions.

Standard library plus the driver only at import time: the hook path uses :func:`connect`.
"""

from __future__ import annotations

import os
import time

import sqlean

from agentctx.errors import DatabaseError

TYPE_CHECKING = False  # typing costs milliseconds on the hook path; mypy reads this name as True
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any

    import aiosqlite

BUSY_TIMEOUT_MS = 5000


class Capabilities:
    """What this connection's SQLite can do; recorded, reported by ``doctor``, never fatal."""

    __slots__ = ("fts5", "sqlite_version", "vec_error", "vec_version")

    def __init__(self) -> None:
        self.sqlite_version: str = sqlean.sqlite_version
        self.fts5: bool = False
        self.vec_version: str | None = None
        self.vec_error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The capabilities as plain data."""
        return {
            "sqlite_version": self.sqlite_version,
            "fts5": self.fts5,
            "sqlite_vec": self.vec_version,
            "sqlite_vec_error": self.vec_error,
        }


def connect(
    path: str,
    *,
    busy_timeout_ms: int = BUSY_TIMEOUT_MS,
    load_vec: bool = True,
    create: bool = True,
    readonly: bool = False,
    check_same_thread: bool = True,
    check_version: Callable[[int], object] | None = None,
) -> tuple[sqlean.Connection, Capabilities]:
    """Open ``path`` with the connection policy; raise :class:`DatabaseError` when it cannot be used.

    ``check_version`` is called with the file's ``user_version`` before anything is written to it
    (the switch to WAL rewrites the header), so a refused database is left byte-for-byte untouched.
    """
    if not create and not os.path.exists(path):
        raise DatabaseError(
            f"no database at {path}: run `agentctx init` (or any write) to create it"
        )
    caps = Capabilities()
    uri = f"file:{path}?mode=ro" if readonly else path
    try:
        conn = sqlean.connect(
            uri,
            timeout=busy_timeout_ms / 1000,
            isolation_level=None,
            check_same_thread=check_same_thread,
            uri=readonly,
        )
    except sqlean.Error as exc:
        raise DatabaseError(f"cannot open the database at {path}: {exc}") from exc
    try:
        conn.row_factory = sqlean.Row
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        if check_version is not None:
            check_version(int(conn.execute("PRAGMA user_version").fetchone()[0]))
        if not readonly:
            mode = _enable_wal(conn, busy_timeout_ms)
            if str(mode).lower() != "wal":
                raise DatabaseError(f"cannot switch {path} to WAL journal mode (got {mode})")
            conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        caps.fts5 = _has_fts5(conn)
    except sqlean.DatabaseError as exc:
        conn.close()
        raise DatabaseError(
            f"the database at {path} is unreadable ({exc}); see `agentctx doctor` to repair or move it"
        ) from exc
    except BaseException:
        conn.close()
        raise
    if load_vec:
        _load_vec(conn, caps)
    return conn, caps


def _enable_wal(conn: sqlean.Connection, busy_timeout_ms: int) -> object:
    """``PRAGMA journal_mode = WAL``, retried within the busy timeout.

    Switching a new file to WAL needs an exclusive lock, and SQLite returns SQLITE_BUSY at once
    (without the busy handler) when another process holds a lock meanwhile, e.g. several processes
    creating the same store together. Already in WAL mode, the statement succeeds at once.
    """
    deadline = time.monotonic() + busy_timeout_ms / 1000
    delay = 0.001
    while True:
        try:
            return conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        except sqlean.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


def _has_fts5(conn: sqlean.Connection) -> bool:
    row = conn.execute("SELECT sqlite_compileoption_used('ENABLE_FTS5')").fetchone()
    if row and row[0]:
        return True
    try:  # FTS5 may also be present as a loaded extension
        conn.execute("CREATE VIRTUAL TABLE temp._fts5_probe USING fts5(x)")
        conn.execute("DROP TABLE temp._fts5_probe")
    except sqlean.Error:
        return False
    return True


def _load_vec(conn: sqlean.Connection, caps: Capabilities) -> None:
    try:
        import sqlite_vec

        conn.enable_load_extension(True)
        try:
            sqlite_vec.load(conn)
        finally:
            conn.enable_load_extension(False)
        caps.vec_version = conn.execute("SELECT vec_version()").fetchone()[0]
    except Exception as exc:  # any failure only disables vector search
        caps.vec_error = f"{type(exc).__name__}: {exc}"


async def connect_async(
    path: str, *, load_vec: bool = True, create: bool = True
) -> tuple[aiosqlite.Connection, Capabilities]:
    """Open ``path`` with the connection policy under aiosqlite (the library's async API)."""
    import aiosqlite

    holder: list[Capabilities] = []

    def connector() -> Any:
        conn, caps = connect(path, load_vec=load_vec, create=create, check_same_thread=False)
        holder.append(caps)
        return conn

    aconn = aiosqlite.Connection(connector, iter_chunk_size=256)
    try:
        await aconn
    except BaseException:
        await _close_quietly(aconn)
        raise
    aconn.row_factory = sqlean.Row
    return aconn, holder[0]


async def _close_quietly(aconn: aiosqlite.Connection) -> None:
    try:
        await aconn.close()
    except Exception:
        pass


def iter_sql_statements(script: str) -> Iterator[str]:
    """Split a migration script into statements (``sqlean.complete_statement`` knows trigger bodies)."""
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlean.complete_statement(buffer):
            statement = buffer.strip()
            buffer = ""
            if statement:
                yield statement
    if buffer.strip():
        yield buffer.strip()
