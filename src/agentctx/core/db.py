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

from agentctx.core import home
from agentctx.core.driver import sqlite
from agentctx.core.errors import DatabaseError

TYPE_CHECKING = False  # typing costs milliseconds on the hook path; mypy reads this name as True
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any

    import aiosqlite

    from agentctx.core.shapes import CapabilitiesData

BUSY_TIMEOUT_MS = 5000


class Capabilities:
    """What this connection's SQLite can do; recorded, reported by ``doctor``, never fatal."""

    __slots__ = ("fts5", "sqlite_version", "vec_error", "vec_version")

    def __init__(self) -> None:
        self.sqlite_version: str = sqlite.sqlite_version
        self.fts5: bool = False
        self.vec_version: str | None = None
        self.vec_error: str | None = None

    def as_dict(self) -> CapabilitiesData:
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
    immutable: bool = False,
    check_same_thread: bool = True,
    check_version: Callable[[int], object] | None = None,
) -> tuple[sqlite.Connection, Capabilities]:
    """Open ``path`` with the connection policy; raise :class:`DatabaseError` when it cannot be used.

    ``check_version`` is called with the file's ``user_version`` before anything is written to it
    (the switch to WAL rewrites the header), so a refused database is left byte-for-byte untouched.
    ``immutable`` (read-only) opens a file on read-only media, where SQLite cannot create the WAL
    index it otherwise needs even to read: nothing may write the file meanwhile.
    """
    home.require_store(path)  # another account's (or a world-writable) store is never opened
    if not create and not os.path.exists(path):
        raise DatabaseError(
            f"no database at {path}: run `agentctx init` (or any write) to create it"
        )
    _regular_files(path, create=create and not readonly)
    caps = Capabilities()
    readonly = readonly or immutable
    uri = (
        f"file:{_uri_path(path)}?{'immutable=1' if immutable else 'mode=ro'}" if readonly else path
    )
    try:
        conn = sqlite.connect(
            uri,
            timeout=busy_timeout_ms / 1000,
            isolation_level=None,
            check_same_thread=check_same_thread,
            uri=readonly,
        )
    except sqlite.Error as exc:
        raise DatabaseError(explain(exc, path)) from exc
    try:
        conn.row_factory = sqlite.Row
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
    except sqlite.DatabaseError as exc:
        conn.close()
        raise DatabaseError(explain(exc, path)) from exc
    except BaseException:
        conn.close()
        raise
    if load_vec:
        _load_vec(conn, caps)
    return conn, caps


def _regular_files(path: str, *, create: bool) -> None:
    """Refuse a database (or its -wal, -shm) that is not a regular file; create a new one 0600.

    A FIFO or a device in its place would block or flood SQLite's open (docs/security.md). SQLite
    gives the -wal and -shm files the database file's mode, so a private database keeps them
    private too, whatever the umask.
    """
    import stat

    for name in (path, path + "-wal", path + "-shm"):
        try:
            info = os.stat(name)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise DatabaseError(f"cannot use the database at {path}: {exc}") from exc
        if not stat.S_ISREG(info.st_mode):
            raise DatabaseError(
                f"cannot use the database at {path}: {name} is not a regular file; move it aside"
            )
    if not create or os.path.exists(path):
        return
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, 0o600)
    except FileExistsError:
        return
    except OSError:
        return  # SQLite's own open says what is wrong, in its words (see explain)
    try:
        os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


def _uri_path(path: str) -> str:
    """``path`` for a ``file:`` URI: the characters a URI gives a meaning to, escaped."""
    return path.replace("%", "%25").replace("?", "%3f").replace("#", "%23")


#: Below this many free bytes on its disk, SQLite cannot even open the store (the WAL index).
LOW_DISK_BYTES = 1024 * 1024


def free_bytes(path: str) -> int | None:
    """Free bytes (for unprivileged users) on the disk holding ``path``, or None if unknown."""
    folder = path
    while folder and not os.path.exists(folder):
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    try:
        stat = os.statvfs(folder or ".")
    except (OSError, AttributeError):  # AttributeError: no statvfs (Windows)
        return None
    return int(stat.f_bavail * stat.f_frsize)


def writable(folder: str) -> bool:
    """Whether this process may create files in ``folder`` (read-only mounts included)."""
    return os.access(folder, os.W_OK | os.X_OK)


def file_size_limit() -> int | None:
    """This process's file size limit (``ulimit -f``) in bytes, or None when there is none."""
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        return None
    soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    return None if soft == resource.RLIM_INFINITY else int(soft)


def unwritable_reason(path: str) -> str | None:
    """Why nothing can be written beside the store at ``path``: ``readonly``, ``full``, ``limit``.

    None when writing there looks possible. SQLite cannot even read a WAL store in such a place
    (it must create the WAL index), so readers fall back to an immutable open.
    """
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(folder) and not writable(folder):
        return "readonly"
    if os.path.exists(path) and not os.access(path, os.W_OK):
        return "readonly"
    free = free_bytes(folder)
    if free is not None and free < LOW_DISK_BYTES:
        return "full"
    limit = file_size_limit()
    if limit is not None:
        try:
            size = os.path.getsize(path)
        except OSError:
            size = 0
        if limit < size + LOW_DISK_BYTES:
            return "limit"
    return None


def fault(exc: BaseException, path: str) -> str:
    """What kind of failure ``exc`` is for the database at ``path``.

    ``damaged`` (not SQLite, or corrupt), ``full`` (no space on its disk), ``limit`` (the file size
    limit), ``readonly`` (its folder or the file cannot be written), ``busy`` (another process held
    it past the busy timeout), ``io`` (another I/O error) or ``other``.
    """
    text = str(exc)
    name = str(getattr(exc, "sqlite_errorname", "") or "")
    if (
        name in ("SQLITE_NOTADB", "SQLITE_CORRUPT")
        or "not a database" in text
        or "malformed" in text
    ):
        return "damaged"
    if name == "SQLITE_FULL" or "is full" in text:
        return "full"
    reason = unwritable_reason(path)
    if reason is not None:
        return reason
    if name in ("SQLITE_BUSY", "SQLITE_LOCKED") or "locked" in text:
        return "busy"
    if name.startswith("SQLITE_IOERR") or "I/O error" in text:
        return "io"
    return "other"


def explain(exc: BaseException, path: str) -> str:
    """One line on why the database at ``path`` failed with ``exc``, and what to do about it."""
    text = str(exc) or type(exc).__name__
    folder = os.path.dirname(os.path.abspath(path))
    kind = fault(exc, path)
    if kind == "damaged":
        return (
            f"the database at {path} is damaged ({text}); see `agentctx doctor` to move it aside "
            "and restore"
        )
    if kind == "full":
        free = free_bytes(folder)
        shown = "" if free is None else f", {free // 1024} KB free"
        return f"the disk holding {path} is full ({text}{shown}); free some space on it, then retry"
    if kind == "limit":
        return (
            f"the file size limit (ulimit -f: {file_size_limit()} bytes) stops SQLite writing "
            f"{path} ({text}); raise it (ulimit -f unlimited where agentctx runs), then retry"
        )
    if kind == "readonly":
        return (
            f"cannot write the database at {path} ({text}): {folder} is read-only or not writable, "
            "and SQLite writes there (the store and its -wal and -shm files); make it writable "
            f"(chmod u+w {folder}, or remount it read-write), then retry"
        )
    if kind == "busy":
        return (
            f"the database at {path} stayed busy ({text}): another agentctx process holds it; "
            "retry in a moment"
        )
    if kind == "io":
        return (
            f"I/O error on the database at {path} ({text}); check the disk, then `agentctx doctor`"
        )
    return f"the database at {path} is unreadable ({text}); see `agentctx doctor`"


def _enable_wal(conn: sqlite.Connection, busy_timeout_ms: int) -> object:
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
        except sqlite.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


def _has_fts5(conn: sqlite.Connection) -> bool:
    row = conn.execute("SELECT sqlite_compileoption_used('ENABLE_FTS5')").fetchone()
    if row and row[0]:
        return True
    try:  # FTS5 may also be present as a loaded extension
        conn.execute("CREATE VIRTUAL TABLE temp._fts5_probe USING fts5(x)")
        conn.execute("DROP TABLE temp._fts5_probe")
    except sqlite.Error:
        return False
    return True


def _load_vec(conn: sqlite.Connection, caps: Capabilities) -> None:
    try:
        conn.enable_load_extension(True)
        try:
            conn.load_extension(_vec_path())
        finally:
            conn.enable_load_extension(False)
        caps.vec_version = conn.execute("SELECT vec_version()").fetchone()[0]
    except Exception as exc:  # any failure only disables vector search
        caps.vec_error = f"{type(exc).__name__}: {exc}"


def _vec_path() -> str:
    """The sqlite-vec extension's path, found without importing the package.

    ``import sqlite_vec`` imports numpy (for helpers we do not use), a large import on every
    command, worker and server start. The package keeps the library beside its ``__init__``.
    """
    import importlib.util

    spec = importlib.util.find_spec("sqlite_vec")
    folder = (
        next(iter(spec.submodule_search_locations), None)
        if spec is not None and spec.submodule_search_locations
        else None
    )
    if folder is None:
        import sqlite_vec  # an unusual install: let the package say where its library is

        return str(sqlite_vec.loadable_path())
    return os.path.normpath(os.path.join(folder, "vec0"))


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
    aconn.row_factory = sqlite.Row
    return aconn, holder[0]


async def _close_quietly(aconn: aiosqlite.Connection) -> None:
    try:
        await aconn.close()
    except Exception:
        pass


def iter_sql_statements(script: str) -> Iterator[str]:
    """Split a migration script into statements (``sqlite.complete_statement`` knows trigger bodies)."""
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite.complete_statement(buffer):
            statement = buffer.strip()
            buffer = ""
            if statement:
                yield statement
    if buffer.strip():
        yield buffer.strip()
