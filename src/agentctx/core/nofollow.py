"""The one way to open a file of the home by its fixed name, never through a planted symlink.

Issue 16 (#7) and issue 24 (#8): ``hooks.log``, the workers' log, the session ledgers, but also
``sweep.stamp``, the lock files of extraction and consolidation, ``config.json``, the digests and
their markers, the pinned lists, the spool, ``state/`` (thresholds, drift seals) and
``installed.json`` are files agentctx names itself. A symlink at one of those names (left by a
hostile script or another account) would make agentctx append to, create, read or touch whatever
file it points at. Every open of such a file goes through :func:`open_fd`:

- below the home, each folder on the way is opened with ``O_NOFOLLOW`` relative to the one above
  (so ``locks/`` swapped for a link is refused as well as ``locks/x.lock``); the home itself may be
  a symlink the user made (``~/.agentctx`` -> another disk);
- the file is opened with ``O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK`` (a FIFO cannot block the open)
  and kept only when ``fstat`` says it is a regular file (a FIFO, a device, a socket or a folder
  raises :class:`NotRegularFileError`);
- a touch (:func:`touch`) sets the time on that descriptor (``futimens``), never by name.

A refusal is an :class:`OSError` (``ELOOP`` for a link), which every caller already treats as "no
log line", "no ledger", "no digest", "no lock": fail-open, never follow. Writes of whole files go
through :func:`agentctx.core.files.write_atomic`, which replaces a link rather than following it.
Standard library only: the hook fast path imports this module.
"""

from __future__ import annotations

import os
import stat

from agentctx.core import home

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import BinaryIO

#: ``O_NOFOLLOW`` where the platform has it (POSIX); 0 elsewhere.
NOFOLLOW: int = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC: int = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK: int = getattr(os, "O_NONBLOCK", 0)
_DIRECTORY: int = getattr(os, "O_DIRECTORY", 0)


class NotRegularFileError(OSError):
    """A path that names a FIFO, a device, a socket or a folder where a file was expected (a
    fixed name of the home, or a file read by :func:`open_regular`)."""


def open_fd(path: str, flags: int, mode: int = 0o600) -> int:
    """``os.open`` of a regular file, following no symlink at it or below the home; OSError else."""
    folder_fd, name = _folder_of(path)
    opened = flags | NOFOLLOW | _CLOEXEC | _NONBLOCK
    try:
        fd = os.open(name, opened, mode, dir_fd=folder_fd if folder_fd >= 0 else None)
    finally:
        if folder_fd >= 0:
            os.close(folder_fd)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            import errno  # here only: a module load on every hook otherwise (ADR-017)

            raise NotRegularFileError(errno.EINVAL, "not a regular file", path)
        if _NONBLOCK and not flags & _NONBLOCK:
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _folder_of(path: str) -> tuple[int, str]:
    """A descriptor of ``path``'s folder reached without a symlink below the home, and the name.

    Outside the home (a test's own folder) the folder is opened as named; only the file itself is
    then opened without following. ``-1`` with the full path where ``dir_fd`` is not supported.
    """
    if os.open not in os.supports_dir_fd:  # pragma: no cover - Windows
        return -1, path
    absolute = os.path.abspath(path)
    root = home.home_dir()
    relative = os.path.relpath(absolute, root)
    parts = relative.split(os.sep)
    if relative.startswith(os.pardir) or os.path.isabs(relative) or relative == os.curdir:
        return os.open(os.path.dirname(absolute), os.O_RDONLY | _DIRECTORY | _CLOEXEC), (
            os.path.basename(absolute)
        )
    fd = os.open(root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    try:
        for part in parts[:-1]:
            child = os.open(part, os.O_RDONLY | _DIRECTORY | NOFOLLOW | _CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd, parts[-1]


def append_fd(path: str) -> int:
    """A descriptor to append to ``path`` (created 0600), never through a symlink."""
    return open_fd(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)


def read_bytes(path: str, limit: int | None = None) -> bytes:
    """The bytes of ``path`` (at most ``limit``), never through a symlink."""
    fd = open_fd(path, os.O_RDONLY)
    try:
        chunks = []
        left = -1 if limit is None else limit
        while left:
            chunk = os.read(fd, 65536 if left < 0 else min(left, 65536))
            if not chunk:
                break
            chunks.append(chunk)
            if left > 0:
                left -= len(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


def read_text(path: str, limit: int | None = None) -> str:
    """``path`` as UTF-8 text (bad bytes replaced), never through a symlink."""
    return read_bytes(path, limit).decode("utf-8", "replace")


def touch(path: str) -> None:
    """Create ``path`` (0600) if missing and set its times to now, on the open descriptor."""
    fd = open_fd(path, os.O_WRONLY | os.O_CREAT)
    try:
        os.utime(fd)  # futimens: the file just opened, not whatever the name points at later
    finally:
        os.close(fd)


def mtime(path: str) -> float | None:
    """The modification time of the regular file at ``path`` (a symlink is not one), else None."""
    try:
        info = os.lstat(path)
    except (OSError, ValueError):
        return None
    return info.st_mtime if stat.S_ISREG(info.st_mode) else None


# -- reading any file only when it is a regular file ---------------------------------------------
# (named by agentctx.core.files too; here so that a hook, which reads the project's git files on
# every event and writes no file on its common path, does not load the atomic-write helpers:
# ADR-017, speed pass 4)


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """Open a file for binary reading only if it is a regular file; OSError otherwise.

    The open is non-blocking (a FIFO with no writer would block a plain open forever) and the type
    is checked on the open descriptor (``fstat``), so nothing can be swapped in between.
    """
    fd = os.open(os.fspath(path), os.O_RDONLY | _NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegularFileError(f"{os.fspath(path)} is not a regular file")
        if _NONBLOCK:
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bounded(path: str | os.PathLike[str], limit: int) -> bytes:
    """At most ``limit`` bytes of a regular file (see :func:`open_regular`)."""
    with open_regular(path) as fh:
        return fh.read(limit)
