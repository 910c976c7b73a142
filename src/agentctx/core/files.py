"""Every file agentctx writes goes through here: one atomic, symlink-safe write, and bounded reads.

Standard library only: the hook fast path imports this module.

:func:`write_atomic` creates an unpredictable temporary file exclusively in the target's folder
(``O_CREAT | O_EXCL | O_NOFOLLOW``, mode 0600), writes and fsyncs it, gives it its intended mode and
renames it over the target, then fsyncs the folder. The folder is opened once and every later step
names files relative to that descriptor, so a folder swapped for a symlink half-way cannot redirect
the write. Three kinds of target (docs/security.md, "Writes"):

- ``root=<repository>``: a file inside a repository (the team file, CLAUDE.md). Refused with
  :class:`~agentctx.core.errors.UnsafePathError` when the target or any folder between the root and
  the target is a symlink, or when the path leaves the root; missing folders are created one by one.
- ``follow_link=True``: a user config file that people keep as a symlink into a dotfiles repository
  (``~/.claude/settings.json``, ``~/.claude.json``): the link's target is written, the link is kept.
- neither: a file of the agentctx home; a symlink in its place is replaced, never followed.

:func:`open_regular` opens a file for reading only when it is a regular file (non-blocking open, then
``fstat``), so a FIFO, a device or a directory handed over as a path cannot block or flood a reader.

:func:`read_inside` is the one way to read a file of a repository (CLAUDE.md, manifests, a project
``.mcp.json``): reads obey the rule writes do, a regular file inside the repository. The path is
resolved and must stay inside the resolved root (a symlink to another file *of the repository*, as
``CLAUDE.md -> AGENTS.md``, is fine; one that leaves it is refused), then the resolved path is
walked from the root with ``O_NOFOLLOW`` at every step (a link swapped in meanwhile is refused
too), opened non-blocking and kept only when ``fstat`` says it is a regular file.
"""

from __future__ import annotations

import errno
import os
import stat

from agentctx.core.nofollow import NotRegularFileError as NotRegularFileError
from agentctx.core.nofollow import open_regular as open_regular
from agentctx.core.nofollow import read_bounded as read_bounded

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from agentctx.core.errors import UnsafePathError

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_umask: int | None = None


def umask() -> int:
    """The process umask, read without changing it where the platform allows."""
    global _umask
    if _umask is None:
        try:
            with open("/proc/self/status", encoding="ascii") as fh:
                for line in fh:
                    if line.startswith("Umask:"):
                        _umask = int(line.split()[1], 8)
                        break
        except (OSError, ValueError):
            pass
        if _umask is None:
            _umask = os.umask(0o022)
            os.umask(_umask)
    return _umask


def write_atomic(
    path: str | os.PathLike[str],
    data: bytes,
    *,
    mode: int | None = 0o600,
    keep_mode: bool = False,
    root: str | os.PathLike[str] | None = None,
    follow_link: bool = False,
    before_replace: Callable[[], bool] | None = None,
) -> bool:
    """Replace ``path`` with ``data`` atomically; False when ``before_replace`` said no.

    ``mode``: the file's mode (``None``: what a plain ``open()`` would give, 0666 less the umask);
    ``keep_mode``: an existing file keeps its mode. ``before_replace`` runs after the data is on disk
    and before the rename; returning False drops the temporary file and leaves the target as it was.
    """
    target = os.fspath(path)
    if follow_link:
        target = os.path.realpath(target)
    if root is not None:
        folder_fd, name = _open_inside(os.fspath(root), target)
    else:
        folder = os.path.dirname(os.path.abspath(target))
        os.makedirs(folder, mode=0o700, exist_ok=True)
        folder_fd = os.open(folder, _DIR_FLAGS)
        name = os.path.basename(target)
    try:
        return _write_in(folder_fd, name, data, mode, keep_mode, before_replace)
    finally:
        os.close(folder_fd)


def _write_in(
    folder_fd: int,
    name: str,
    data: bytes,
    mode: int | None,
    keep_mode: bool,
    before_replace: Callable[[], bool] | None,
) -> bool:
    final = 0o666 & ~umask() if mode is None else mode
    if keep_mode:
        try:
            final = stat.S_IMODE(os.stat(name, dir_fd=folder_fd, follow_symlinks=False).st_mode)
        except FileNotFoundError:
            pass
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | os.O_CLOEXEC
    for _ in range(8):
        tmp = f".{name[:80]}.{os.urandom(8).hex()}.tmp"
        try:
            fd = os.open(tmp, flags, 0o600, dir_fd=folder_fd)
            break
        except FileExistsError:
            continue
    else:  # pragma: no cover - 64 random bits colliding eight times
        raise FileExistsError(f"cannot create a temporary file next to {name}")
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fchmod(fd, final)  # the umask does not decide: the mode asked for does
            os.fsync(fd)
        finally:
            os.close(fd)
        if before_replace is not None and not before_replace():
            os.unlink(tmp, dir_fd=folder_fd)
            return False
        os.replace(tmp, name, src_dir_fd=folder_fd, dst_dir_fd=folder_fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=folder_fd)
        except OSError:
            pass
        raise
    try:
        os.fsync(folder_fd)
    except OSError:
        pass
    return True


def check_inside(root: str | os.PathLike[str], target: str | os.PathLike[str]) -> str:
    """The target's path relative to ``root``, or :class:`UnsafePathError` when it is unsafe.

    Unsafe: outside the root (``..``, another absolute path), or a symlink at the target or at any
    folder between the root and the target. Folders that do not exist yet are fine.
    """
    parts = _parts(os.fspath(root), os.fspath(target))
    here = os.path.realpath(os.fspath(root))
    for part in parts:
        here = os.path.join(here, part)
        if os.path.islink(here):
            raise _unsafe(f"refusing to write {os.fspath(target)}: {here} is a symlink")
    return os.path.join(*parts)


def _parts(root: str, target: str) -> list[str]:
    real_root = os.path.realpath(root)
    absolute = os.path.abspath(target)
    # the target is given under the root as the caller knows it (root may itself be a link)
    for base in (os.path.abspath(root), real_root):
        relative = os.path.relpath(absolute, base)
        if relative != os.curdir and not relative.startswith(os.pardir):
            parts = relative.split(os.sep)
            if os.pardir not in parts:
                return parts
    raise _unsafe(f"refusing to write {target}: it is outside {root}")


def _open_inside(root: str, target: str) -> tuple[int, str]:
    """Open the target's folder walking down from ``root`` without following any symlink."""
    parts = _parts(root, target)
    fd = os.open(os.path.realpath(root), _DIR_FLAGS)
    here = os.path.realpath(root)
    try:
        for part in parts[:-1]:
            here = os.path.join(here, part)
            try:
                child = os.open(part, _DIR_FLAGS | _NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                os.mkdir(part, 0o777, dir_fd=fd)
                child = os.open(part, _DIR_FLAGS | _NOFOLLOW, dir_fd=fd)
            except OSError as exc:  # ELOOP / ENOTDIR: a symlink or a file where a folder should be
                raise _unsafe(
                    f"refusing to write {target}: {here} is a symlink or not a folder"
                ) from exc
            os.close(fd)
            fd = child
        name = parts[-1]
        try:
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return fd, name
        if stat.S_ISLNK(info.st_mode):
            raise _unsafe(f"refusing to write {target}: it is a symlink")
        if not stat.S_ISREG(info.st_mode):
            raise _unsafe(f"refusing to write {target}: it is not a regular file")
        return fd, name
    except BaseException:
        os.close(fd)
        raise


def is_regular_or_missing(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` does not exist or is a regular file (symlinks followed)."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except FileNotFoundError:
        return True
    except OSError:
        return False


def read_tail(path: str | os.PathLike[str], limit: int) -> tuple[bytes, bool]:
    """The last ``limit`` bytes of a regular file, whole lines only; and whether any were left out.

    A file over the limit is read from its end (what matters of a transcript is the newest part),
    without the line the window cuts at its start.
    """
    with open_regular(path) as fh:
        size = os.fstat(fh.fileno()).st_size
        cut = size > limit
        if cut:
            fh.seek(size - limit)
        data = fh.read(limit)
    if cut:
        data = data[data.find(b"\n") + 1 :] if b"\n" in data else b""
    return data, cut


def read_inside(root: str | os.PathLike[str], target: str | os.PathLike[str], limit: int) -> bytes:
    """At most ``limit`` bytes of the regular file ``target`` inside the repository ``root``.

    :class:`UnsafePathError` when the path, resolved, leaves the root (``..``, a symlink out of
    it) or a symlink appears on the way while it is opened; :class:`NotRegularFileError` for a
    FIFO, a device, a socket or a folder; ``FileNotFoundError`` when it is missing.
    """
    real_root = os.path.realpath(os.fspath(root))
    named = os.path.join(os.fspath(root), os.fspath(target))  # a relative target is the root's
    resolved = os.path.realpath(named)
    relative = os.path.relpath(resolved, real_root)
    parts = relative.split(os.sep)
    if relative == os.curdir or os.pardir in parts or os.path.isabs(relative):
        raise _unsafe(f"refusing to read {named}: it resolves to {resolved}, outside {real_root}")
    fd = os.open(real_root, _DIR_FLAGS)
    try:
        for part in parts[:-1]:
            try:
                child = os.open(part, _DIR_FLAGS | _NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                raise _unsafe(f"refusing to read {named}: {part} changed on the way") from exc
            os.close(fd)
            fd = child
        flags = os.O_RDONLY | _NOFOLLOW | _NONBLOCK | os.O_CLOEXEC
        try:
            file_fd = os.open(parts[-1], flags, dir_fd=fd)
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
            raise _unsafe(f"refusing to read {named}: it became a symlink") from exc
    finally:
        os.close(fd)
    try:
        if not stat.S_ISREG(os.fstat(file_fd).st_mode):
            raise NotRegularFileError(f"{named} is not a regular file")
        if _NONBLOCK:
            os.set_blocking(file_fd, True)
    except BaseException:
        os.close(file_fd)
        raise
    with os.fdopen(file_fd, "rb") as fh:
        return fh.read(limit)


def _unsafe(message: str) -> UnsafePathError:
    """The refusal (its module imported here: every hook reads files, few ever write one)."""
    from agentctx.core.errors import UnsafePathError

    return UnsafePathError(message)
