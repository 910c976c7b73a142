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

    ``os.makedirs`` gives only the last folder its mode, so the home is made on its own: a hook
    that runs before ``agentctx init`` must not leave a world-readable home behind.
    """
    home = home_dir()
    os.makedirs(home, mode=0o700, exist_ok=True)
    path = os.path.join(home, name)
    os.makedirs(path, mode=0o700, exist_ok=True)
    return path


def ensure_home() -> str:
    """Create the home and its sub-folders (owner-only permissions) and return the home path."""
    home = home_dir()
    os.makedirs(home, mode=0o700, exist_ok=True)
    for name in SUBDIRS:
        os.makedirs(os.path.join(home, name), mode=0o700, exist_ok=True)
    return home
