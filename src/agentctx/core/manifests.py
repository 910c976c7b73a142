"""Whether a project's profile must be detected again: its manifest files' sizes and times.

The profile (stack, package manager, test/lint/build commands: :mod:`agentctx.detection`) is read
from a few files at the checkout's top level. SessionStart and CwdChanged compare the
*signature* of those files (:func:`signature`, one listing of the folder: for :data:`CONTENT`
files their size and modification time, for :data:`PRESENCE` files that they are there) with the one recorded in
``profiles/<project_id>.stamp`` when the profile was last detected (:func:`due`); when they differ,
the hook starts ``agentctx worker profile`` detached, which detects and records the facts that
changed through the store (the one write path) and then records the signature
(:func:`record`). A project whose checkout has none of these files has nothing to detect.

The stamp is plain text (the hook imports no ``json``): the signature on the first line, then
``started <epoch>`` or ``done <epoch>``, then (the worker's) the facts as last detected, one JSON
object. ``started`` is written by the hook before it starts the worker, so that parallel hooks
start one; a worker that died leaves it, and a stamp ``started`` :data:`RETRY_S` ago is retried.
A symlink, a FIFO or a folder at a manifest's name counts as absent: detection reads regular files
inside the repository only. Standard library only.
"""

from __future__ import annotations

import os
import stat
import time

from agentctx.core import home, nofollow

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: The manifests whose content the detectors read (a change of size or time is a change).
CONTENT = (
    "GNUmakefile", "makefile", "Makefile", "pyproject.toml", "setup.py", "setup.cfg", "Pipfile",
    "noxfile.py", "tox.ini", "tox.toml", "pytest.ini", "package.json", "Cargo.toml", "go.mod",
)  # fmt: skip
#: The files whose presence alone the detectors read (lock files change at every install).
PRESENCE = (
    "uv.lock", "poetry.lock", "pdm.lock", "Pipfile.lock", "requirements.txt", "conftest.py",
    "ruff.toml", ".ruff.toml", "mypy.ini", ".mypy.ini", ".flake8", "pyrightconfig.json",
    "pnpm-lock.yaml", "yarn.lock", "bun.lock", "bun.lockb", "package-lock.json",
    "npm-shrinkwrap.json", "tsconfig.json", ".golangci.yml", ".golangci.yaml", "main.go",
)  # fmt: skip
#: Every name, in signature order.
_ORDER = {name: index for index, name in enumerate((*CONTENT, *PRESENCE))}
#: A folder listed entry by entry up to this many entries (more: one ``lstat`` per name).
SCAN_MAX = 4096
#: A ``started`` stamp older than this is a worker that died: detection is started again.
RETRY_S = 10 * 60
STAMP_MAX_BYTES = 64 * 1024


def signature(root: str) -> str:
    """The manifests of ``root`` as one line ('' when it has none).

    One listing of the folder (a stat only for the :data:`CONTENT` files found); a folder of more
    than :data:`SCAN_MAX` entries is asked name by name instead.
    """
    found: dict[str, str] = {}
    try:
        with os.scandir(root) as entries:
            for count, entry in enumerate(entries):
                if count >= SCAN_MAX:
                    return _by_name(root)
                if entry.name in _ORDER and entry.is_file(follow_symlinks=False):
                    found[entry.name] = _part(entry.name, entry.stat(follow_symlinks=False))
    except (OSError, ValueError):
        return ""
    return " ".join(found[name] for name in sorted(found, key=_ORDER.__getitem__))


def _by_name(root: str) -> str:
    parts: list[str] = []
    for name in _ORDER:
        try:
            info = os.lstat(os.path.join(root, name))
        except (OSError, ValueError):
            continue
        if stat.S_ISREG(info.st_mode):
            parts.append(_part(name, info))
    return " ".join(parts)


def _part(name: str, info: os.stat_result) -> str:
    if name in PRESENCE:
        return name
    return f"{name}:{info.st_size}:{info.st_mtime_ns}"


def stamp_path(project_id: str) -> str:
    """The project's profile stamp (not created)."""
    safe = "".join(c for c in project_id if c.isalnum())[:128] or "_"
    return os.path.join(home.sub("profiles"), f"{safe}.stamp")


def read(project_id: str) -> tuple[str, str, float, str]:
    """The stamp's signature, state ("started"/"done"), its time and the facts' JSON text.

    ``("", "", 0.0, "")`` when there is none or it cannot be read.
    """
    try:
        text = nofollow.read_text(stamp_path(project_id), STAMP_MAX_BYTES)
    except (OSError, ValueError):
        return "", "", 0.0, ""
    lines = text.split("\n", 2)
    if len(lines) < 2:
        return "", "", 0.0, ""
    state, _, at = lines[1].partition(" ")
    try:
        when = float(at)
    except ValueError:
        when = 0.0
    return lines[0], state, when, (lines[2] if len(lines) > 2 else "")


def due(project_id: str, root: str) -> str | None:
    """The signature to detect for when the profile must be detected again, else None."""
    current = signature(root)
    recorded, state, when, _facts = read(project_id)
    if not current and not recorded:
        return None  # nothing to detect, and nothing was ever detected
    if current != recorded:
        return current
    if state == "started" and time.time() - when > RETRY_S:
        return current  # the worker that took it died
    return None


def claim(project_id: str, sig: str) -> None:
    """Mark detection for ``sig`` started (before the worker is started), keeping the facts."""
    _write(project_id, sig, "started", read(project_id)[3])


def record(project_id: str, sig: str, facts: dict[str, str]) -> None:
    """Mark detection for ``sig`` done, with the facts as detected (key -> body).

    The stamp keeps a hash of each body, not the text (a manifest may hold a secret; the store's
    copy is redacted by the write path).
    """
    from agentctx.core import jsonio

    _write(project_id, sig, "done", jsonio.dumps({k: fact_hash(v) for k, v in facts.items()}))


def fact_hash(body: str) -> str:
    """What the stamp keeps of a fact's body."""
    import hashlib

    return hashlib.sha256(body.strip().encode("utf-8", "replace")).hexdigest()[:32]


def _write(project_id: str, sig: str, state: str, facts_json: str) -> None:
    from agentctx.core import files  # on a write only: SessionStart compares, mostly

    home.ensure_sub("profiles")
    text = f"{sig}\n{state} {time.time():.3f}\n{facts_json}"
    files.write_atomic(stamp_path(project_id), text.encode("utf-8"))


def parse_facts(text: str) -> dict[str, Any] | None:
    """The facts as last detected (key -> :func:`fact_hash`), or None when none were recorded."""
    if not text.strip():
        return None
    from agentctx.core import jsonio

    try:
        data = jsonio.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None
