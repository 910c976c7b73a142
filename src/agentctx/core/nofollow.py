"""Opening the home's own files without following a symlink planted in their place (issue 16, #7).

``hooks.log``, the workers' log and the session ledgers are files agentctx creates in its home. A
symlink at one of those names (left by another account in a loose home, or by a hostile script)
would make a hook append to, or read, whatever file it points at. Every open here passes
``O_NOFOLLOW``: a symlink at the name fails with ``ELOOP`` (an :class:`OSError`), which the
callers already treat as "no log line" or "no ledger" -- fail-open, never follow.
"""

from __future__ import annotations

import os

#: ``O_NOFOLLOW`` where the platform has it (POSIX); 0 elsewhere.
NOFOLLOW: int = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC: int = getattr(os, "O_CLOEXEC", 0)


def open_fd(path: str, flags: int, mode: int = 0o600) -> int:
    """``os.open`` with ``O_NOFOLLOW`` (and ``O_CLOEXEC``): raises OSError on a symlink."""
    return os.open(path, flags | NOFOLLOW | _CLOEXEC, mode)


def append_fd(path: str) -> int:
    """A descriptor to append to ``path`` (created 0600), never through a symlink."""
    return open_fd(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)


def read_text(path: str) -> str:
    """The whole of ``path`` as UTF-8 text (bad bytes replaced), never through a symlink."""
    fd = open_fd(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8", "replace")
