"""The team hub's stamp: when this home last tried a sync, read by the SessionStart hook.

SessionStart must not connect to the hub, nor import its client: it only looks at this file's
time (one ``stat``) and starts ``agentctx worker team-sync`` detached when the last try is older
than :data:`SYNC_EVERY_S`. The file exists only while a project of this home is linked to a hub
(``agentctx team link`` creates it, the last ``team unlink`` removes it), so a home without a hub
pays one failed ``stat``.
"""

from __future__ import annotations

import os
import time

from agentctx.core import home, nofollow

#: SessionStart starts a background sync when the last one was tried longer ago than this.
SYNC_EVERY_S = 5 * 60
STAMP = "hub-sync.stamp"


def path() -> str:
    """The stamp file."""
    return os.path.join(home.home_dir(), STAMP)


def due(now: float | None = None) -> bool:
    """True when a hub is linked and the last sync was tried :data:`SYNC_EVERY_S` ago or more."""
    try:
        stamped = os.stat(path()).st_mtime
    except OSError:
        return False  # no hub linked
    return (now if now is not None else time.time()) - stamped >= SYNC_EVERY_S


def touch() -> None:
    """Mark a sync as tried now (the file is created 0600, never through a symlink)."""
    home.ensure_home()
    fd = nofollow.open_fd(path(), os.O_WRONLY | os.O_CREAT)
    try:
        if os.utime in os.supports_fd:
            os.utime(fd)
        else:  # pragma: no cover - platforms without futimens
            os.utime(path(), follow_symlinks=False)
    finally:
        os.close(fd)


def remove() -> None:
    """No hub linked any more: SessionStart stops looking."""
    try:
        os.unlink(path())
    except FileNotFoundError:
        pass
