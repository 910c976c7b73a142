"""Cross-process locks that a killed process cannot leave held.

An exclusive, non-blocking ``flock`` on ``locks/<name>.lock`` in the home: the kernel releases it when
the holder's file descriptor closes, including on ``kill -9``, so no stale lock files need clearing.
Used for one extraction per session and one consolidation per project at a time.
"""

from __future__ import annotations

import os

from agentctx import home


class ProcessLock:
    """``with ProcessLock(name) as held:`` — ``held`` is False when another process has it."""

    def __init__(self, name: str) -> None:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:200]
        self.path = os.path.join(home.ensure_sub("locks"), f"{safe}.lock")
        self._fd = -1

    def __enter__(self) -> bool:
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
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
