"""The team file: a project's shareable records as ``.agentctx/context.md``, for git and teammates.

Opt-in (``team_export``, ``agentctx init --team``); consolidation rewrites the file for each project it
runs on. What is shared is project knowledge: the project's decisions, conventions, preferences,
discoveries, bugfixes and profile facts, current and superseded (history travels with them). What is
not: handovers (the state of one person's session), global records (the developer's own profile), and
the raw PostToolUse stubs that extraction never explained (one session's failing command, with its
local output). A superseded record whose successor is not shared is left out too, so the file never
names a record it does not hold.

The file is :func:`agentctx.store.transfer.to_team_markdown`: stable ids, a fixed order (type, then
``recorded_at``, ``id``) and only the fields of the fact, never counters, scores, embeddings flags or
session ids. An unchanged store re-exports byte-identical text (and the file is not rewritten), and a
change touches only its own lines. ``agentctx import .agentctx/context.md`` merges it by id, into the
project of the working directory, so a teammate whose clone computes another project id (no git
remote) still gets the records in their project.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import anyio

from agentctx import config
from agentctx.core import files
from agentctx.core.schema import GLOBAL_PROJECT_ID
from agentctx.store import transfer

if TYPE_CHECKING:
    from collections.abc import Mapping

    from agentctx.core.shapes import EdgeRow, RecordRow
    from agentctx.store import Store

TEAM_DIR = ".agentctx"
TEAM_FILE = "context.md"
#: The record types a team file shares (handovers are one session's state, not shared knowledge).
SHARED_TYPES = ("decision", "convention", "preference", "discovery", "bugfix", "profile")
#: The separator extraction puts between its explanation and a stub's own text (extract/apply.py).
_EXPLAINED = "\n\nObserved: "


def team_path(project_root: str) -> str:
    """Where a project's team file lives."""
    return os.path.join(project_root, TEAM_DIR, TEAM_FILE)


async def shared(store: Store, project_id: str) -> tuple[list[RecordRow], list[EdgeRow]]:
    """The project's shareable records and the ``supersedes`` edges among them, in file order."""
    data = await transfer.export_data(store, project_id)
    records = [r for r in data["records"] if r["type"] in SHARED_TYPES and r["scope"] == "project"]
    records = [r for r in records if not raw_stub(r)]
    ids = {r["id"] for r in records}
    while True:  # a superseded record whose successor is not shared would dangle: drop it too
        orphans = {r["id"] for r in records if r["superseded_by"] and r["superseded_by"] not in ids}
        if not orphans:
            break
        records = [r for r in records if r["id"] not in orphans]
        ids -= orphans
    edges = [
        e
        for e in data["edges"]
        if e["rel_type"] == "supersedes" and e["from_id"] in ids and e["to_id"] in ids
    ]
    return records, edges


def raw_stub(record: Mapping[str, Any]) -> bool:
    """A PostToolUse stub that extraction has not explained (still only the captured failure)."""
    return record["source"] == "hook_observation" and _EXPLAINED not in record["body"]


async def render(store: Store, project_id: str) -> str:
    """The team file's text for a project."""
    records, edges = await shared(store, project_id)
    return transfer.to_team_markdown(records, edges)


async def export_team(
    store: Store,
    project_id: str,
    project_root: str | None,
    *,
    settings: Mapping[str, Any] | None = None,
) -> str | None:
    """Write ``<root>/.agentctx/context.md`` when ``team_export`` is on; return its path or None.

    None when the setting is off, the project has no root folder on this machine, or the project has
    nothing to share and no team file yet (turning the setting on does not litter every project).
    """
    values = settings if settings is not None else config.load()
    if not values.get("team_export", False) or project_id == GLOBAL_PROJECT_ID:
        return None
    if not project_root or not await anyio.Path(project_root).is_dir():
        return None
    records, edges = await shared(store, project_id)
    path = team_path(project_root)
    if not records and not await anyio.Path(path).exists():
        return None
    text = transfer.to_team_markdown(records, edges)
    await anyio.to_thread.run_sync(
        lambda: write_if_changed(path, text.encode("utf-8"), root=project_root)
    )
    return path


def write_if_changed(
    path: str, payload: bytes, *, private: bool = False, root: str | None = None
) -> None:
    """Replace the file atomically, and only when its bytes change (no mtime churn for git).

    ``private``: the file is made 0600; otherwise it takes the umask's mode, as a file in a repo
    should. ``root``: the repository the file belongs to; a symlink at the file or on the way to it
    from the root, or a path leaving it, is refused (:class:`~agentctx.core.errors.UnsafePathError`).
    """
    if root is not None:
        files.check_inside(root, path)  # before reading: a planted link is refused, not read
    try:
        if root is None:  # a file of the home: never read through a link planted at its name
            from agentctx.core import nofollow

            current = nofollow.read_bytes(path, len(payload) + 1)
        else:
            with files.open_regular(path) as fh:
                current = fh.read(len(payload) + 1)
        if current == payload:
            return
    except OSError:  # missing, or not a regular file: the write below replaces or refuses it
        pass
    files.write_atomic(path, payload, mode=0o600 if private else None, root=root)
