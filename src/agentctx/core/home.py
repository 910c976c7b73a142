"""Where agentctx keeps its data: one folder per user, ``~/.agentctx`` unless ``AGENTCTX_HOME`` is set.

Standard library only: the hook fast path imports this module.

Layout::

    agentctx.db     the store (SQLite, WAL)
    config.json     settings (see config.py)
    logs/           hooks.log, workers' logs
    digests/        pre-computed SessionStart digests, one file per project
    models/         embedding model cache
    profile/        a Markdown mirror of the global developer profile
    sessions/       per-session hook state (dedup ledgers), removed at SessionEnd
    spool/          observations waiting for the database (busy, missing), applied by the next hook
    locks/          lock files of the background workers
    state/          small state kept between runs (thresholds.json: calibrated cosine thresholds)
"""

from __future__ import annotations

import os

HOME_ENV = "AGENTCTX_HOME"
DB_NAME = "agentctx.db"
CONFIG_NAME = "config.json"
SUBDIRS = ("logs", "digests", "models", "profile", "sessions", "spool", "locks")


def home_dir() -> str:
    """The agentctx home folder (not created)."""
    env = os.environ.get(HOME_ENV, "").strip()
    if env:
        return os.path.abspath(os.path.expanduser(env))
    return os.path.join(os.path.expanduser("~"), ".agentctx")


def db_path() -> str:
    """Path of the SQLite store."""
    return os.path.join(home_dir(), DB_NAME)


def config_path() -> str:
    """Path of the settings file."""
    return os.path.join(home_dir(), CONFIG_NAME)


def sub(name: str) -> str:
    """Path of one of the home's sub-folders (``logs``, ``digests``, ...)."""
    return os.path.join(home_dir(), name)


def ensure_sub(name: str) -> str:
    """Create (if needed) and return one sub-folder, the home itself created owner-only first.

    Each folder is made on its own with mode 0700 set after creation, so neither ``os.makedirs``
    (which gives only the last folder its mode) nor the umask decides: a hook that runs before
    ``agentctx init`` must not leave a readable home behind.
    """
    home = home_dir()
    _private_dir(home)
    path = os.path.join(home, name)
    _private_dir(path)
    return path


def ensure_home() -> str:
    """Create the home and its sub-folders (owner-only permissions) and return the home path."""
    home = home_dir()
    _private_dir(home)
    for name in SUBDIRS:
        _private_dir(os.path.join(home, name))
    return home


def _private_dir(path: str) -> None:
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        return
    except FileNotFoundError:  # the home's parent is missing too: it is not ours to restrict
        os.makedirs(os.path.dirname(path), exist_ok=True)
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            return
    os.chmod(path, 0o700)  # the umask may have taken bits away; never more than the owner's


def loose() -> list[str]:
    """Paths under the home that another account may read, write or enter (group/world bits).

    Symlinks are not followed (their own mode means nothing); only what this account owns counts.
    """
    return [path for path, _mode in _walk() if _mode & 0o077]


def tighten(under: str | None = None) -> list[str]:
    """Take group and world bits off everything under the home (or ``under``); the paths changed.

    Folders become 0700 and files 0600 (an owner's execute bit is kept).
    """
    changed = []
    for path, mode in _walk(under):
        if not mode & 0o077:
            continue
        wanted = (mode & 0o700) | (0o700 if os.path.isdir(path) else 0o600)
        try:
            os.chmod(path, wanted)
        except OSError:
            continue
        changed.append(path)
    return changed


def _walk(under: str | None = None) -> list[tuple[str, int]]:
    import stat

    root = under or home_dir()
    found: list[tuple[str, int]] = []
    uid = os.getuid() if hasattr(os, "getuid") else None
    stack = [root]
    while stack:
        path = stack.pop()
        try:
            info = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISLNK(info.st_mode) or (uid is not None and info.st_uid != uid):
            continue
        found.append((path, stat.S_IMODE(info.st_mode)))
        if stat.S_ISDIR(info.st_mode):
            try:
                stack.extend(os.path.join(path, name) for name in os.listdir(path))
            except OSError:
                continue
    return found
