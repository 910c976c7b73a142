"""Cross-process locks that a killed process cannot leave held.

An exclusive, non-blocking ``flock`` on ``locks/<name>.lock`` in the home: the kernel releases it when
the holder's file descriptor closes, including on ``kill -9``, so no stale lock files need clearing.
Used for one extraction per session (:func:`extraction_lock`) and one consolidation per project at a
time. The lock file is opened through :func:`agentctx.core.nofollow.open_fd`: a symlink planted at
its name is refused (an ``OSError`` from ``with``), never created or followed.
"""

from __future__ import annotations

import os

from agentctx.core import home, nofollow


def lock_path(name: str) -> str:
    """The lock file of ``name`` (not created)."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:200]
    return os.path.join(home.sub("locks"), f"{safe}.lock")


class ProcessLock:
    """``with ProcessLock(name) as held:`` — ``held`` is False when another process has it."""

    def __init__(self, name: str) -> None:
        home.ensure_sub("locks")
        self.path = lock_path(name)
        self._fd = -1

    def __enter__(self) -> bool:
        # a symlink (or a FIFO) planted at the lock's name is refused, never created or followed
        self._fd = nofollow.open_fd(self.path, os.O_RDWR | os.O_CREAT)
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows: no cross-process lock
            return True
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False
        return True

    def __exit__(self, *exc_info: object) -> None:
        os.close(self._fd)


def extraction_lock_name(session_id: str) -> str:
    """The name of the lock one extraction of a session holds."""
    from agentctx.core.ledger import safe_session_id

    return f"extract-{safe_session_id(session_id)}"


def extraction_lock(session_id: str) -> ProcessLock:
    """The lock of one extraction of a session: ``with extraction_lock(sid) as held: ...``."""
    return ProcessLock(extraction_lock_name(session_id))


def extraction_running(session_id: str) -> bool:
    """True while an extraction holds the session's lock (a shared, non-blocking probe)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        return False
    try:
        fd = nofollow.open_fd(lock_path(extraction_lock_name(session_id)), os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False
