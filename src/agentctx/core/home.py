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

Trust (docs/security.md, "A home another account controls"): like ssh's ``StrictModes`` and gpg's
"unsafe permissions" check, :func:`distrust` refuses a home that another account owns or can write
to, and :func:`require` turns that into :class:`~agentctx.core.errors.UnsafeHomeError`. Every way
into the home passes it: :func:`ensure_home` and :func:`ensure_sub` (every write), the database
connection (``core.db.connect``), the config reader, the hook runner (before anything is read), and
the CLI (every command but ``doctor``, which reports it as a failed check).
"""

from __future__ import annotations

import os

HOME_ENV = "AGENTCTX_HOME"
DB_NAME = "agentctx.db"
CONFIG_NAME = "config.json"
SUBDIRS = ("logs", "digests", "models", "profile", "sessions", "spool", "locks")
#: What :func:`distrust` checks inside the home: the store, its WAL files, the config, each folder.
CHECKED_NAMES = (
    DB_NAME,
    DB_NAME + "-wal",
    DB_NAME + "-shm",
    CONFIG_NAME,
    *SUBDIRS,
    "state",
)
#: Folders of the home that may be a symlink (the model cache, kept on a bigger disk).
MAY_BE_LINKED = frozenset({"models"})


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
    home = _trusted_home()
    path = os.path.join(home, name)
    _private_dir(path)
    return path


def ensure_home() -> str:
    """Create the home and its sub-folders (owner-only permissions) and return the home path.

    Raises :class:`~agentctx.core.errors.UnsafeHomeError` (nothing created inside it) when another
    account owns the home or can write to it (:func:`distrust`).
    """
    home = _trusted_home()
    for name in SUBDIRS:
        _private_dir(os.path.join(home, name))
    return home


def _trusted_home() -> str:
    """The home, created owner-only when missing; refused before anything is made inside it."""
    home = home_dir()
    existed = os.path.isdir(home)
    require(home)  # the folders above, before anything is made (skipped once a hook checked)
    if not existed:
        _private_dir(home)
        require(home)  # ours now, or made by whoever raced us to it
    return home


def distrust(folder: str | None = None, names: tuple[str, ...] = CHECKED_NAMES) -> str | None:
    """Why the home (or ``folder``) must not be used, as one line saying what to run; None if fine.

    As ssh checks ``~/.ssh``: every folder above it (the path as given and as resolved) must belong
    to this account or root, and be writable by no one else unless sticky (``/tmp``), or another
    account could swap the home itself; the home and each of ``names`` that exists in it must
    belong to this account, be writable by no one else, and not be a symlink (the model cache
    excepted: its target is checked). Group or world *read* is not refused here: ``doctor`` fails
    it and ``init`` takes it away (:func:`loose`, :func:`tighten`). Nothing is created or changed.
    """
    if not hasattr(os, "getuid"):  # pragma: no cover - Windows: no owner or mode bits to check
        return None
    import stat

    uid = os.getuid()
    home = os.path.abspath(folder or home_dir())
    real = os.path.realpath(home)
    for parent in _ancestors(home, real):
        try:
            info = os.stat(parent)
        except OSError:
            continue  # missing (made owner-only with the home) or not ours to enter
        if info.st_uid not in (0, uid):
            return _refusal(
                home,
                f"{parent} belongs to another account (uid {info.st_uid}), which can replace the "
                "home",
                "move AGENTCTX_HOME under a folder you own",
            )
        if info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX:
            return _refusal(
                home,
                f"{parent} is writable by other accounts (mode {_mode(info)}), which can replace "
                "the home",
                f"run `chmod go-w {parent}` (or move AGENTCTX_HOME under a folder only you write)",
            )
    for path in (real, *(os.path.join(real, name) for name in names)):
        try:
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                if os.path.basename(path) not in MAY_BE_LINKED:
                    return _refusal(
                        home,
                        f"{path} is a symlink",
                        f"put the {'folder' if os.path.isdir(path) else 'file'} itself there "
                        f"(or move the link aside: mv {path} {path}.link)",
                    )
                info = os.stat(path)
        except FileNotFoundError:
            continue
        except OSError as exc:
            return _refusal(home, f"cannot check {path} ({exc.strerror})", "fix its permissions")
        if info.st_uid != uid:
            return _refusal(
                home,
                f"{path} belongs to another account (uid {info.st_uid}, you are {uid})",
                f"move the home aside (mv {real} {real}.foreign) and run `agentctx init` for a new "
                f"one, or if it is yours: sudo chown -R $(id -un) {real}",
            )
        if info.st_mode & 0o022:
            wanted = "700" if stat.S_ISDIR(info.st_mode) else "600"
            return _refusal(
                home,
                f"{path} is writable by other accounts (mode {_mode(info)})",
                f"run `chmod {wanted} {path}` (and check nobody changed what is in it)",
            )
    return None


#: The home a short-lived process (a hook) checked once at its start: not checked again per write.
_remembered: str | None = None


def require(
    folder: str | None = None, names: tuple[str, ...] = CHECKED_NAMES, *, remember: bool = False
) -> None:
    """Raise :class:`~agentctx.core.errors.UnsafeHomeError` when :func:`distrust` finds a reason.

    ``remember``: a process that lives a moment (a hook) checks once, at its start; later
    :func:`ensure_sub` calls skip the check (a few hundred microseconds each). Long-lived
    processes (the MCP server, the dashboard) check at every :func:`ensure_sub`.
    """
    global _remembered
    where = os.path.abspath(folder or home_dir())
    if not remember and where == _remembered and names == CHECKED_NAMES:
        return
    problem = distrust(where, names)
    if problem is not None:
        from agentctx.core.errors import UnsafeHomeError

        raise UnsafeHomeError(problem)
    if remember and os.path.isdir(where):  # a home made later is made owner-only, by us
        _remembered = where


def require_store(path: str) -> None:
    """:func:`require` for the folder of a database file (the home's, or one a caller names)."""
    if path == ":memory:" or path.startswith("file:"):
        return
    folder, name = os.path.split(os.path.abspath(path))
    if folder == home_dir():
        require(folder)
    else:
        require(folder, (name, name + "-wal", name + "-shm"))


def _ancestors(*paths: str) -> list[str]:
    """Every folder above each of ``paths``, from the root down, each once."""
    found: list[str] = []
    for path in paths:
        chain = []
        here = os.path.dirname(path)
        while True:
            chain.append(here)
            up = os.path.dirname(here)
            if up == here:
                break
            here = up
        found.extend(p for p in reversed(chain) if p not in found)
    return found


def _mode(info: os.stat_result) -> str:
    return oct(info.st_mode & 0o7777)[2:].rjust(4, "0")


def _refusal(home: str, problem: str, fix: str) -> str:
    return f"refusing the agentctx home {home}: {problem}; {fix}"


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
