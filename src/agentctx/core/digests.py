"""The SessionStart digest's file: where it lives, reading, writing it safely, and invalidation.

The digest is pre-computed into ``digests/<project_id>.json`` so that the SessionStart hook reads a
file and imports no SQLite at all; :func:`assemble` picks the session's checkout's handover from the
parts the file holds. Any write that changes a project's records removes that file
(:func:`invalidate`, called after the commit by the hooks and the store); the next SessionStart, or
consolidation, rebuilds it with :func:`agentctx.retrieval.digest.build`. Standard library only.
"""

from __future__ import annotations

import os

from agentctx.core import home, nofollow
from agentctx.core.project import GLOBAL_PROJECT_ID

TYPE_CHECKING = False  # typing costs milliseconds on the hook path; mypy reads this name as True
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

    from agentctx.core.shapes import Digest, DigestParts

#: The digest's caps, which every assembled text (each checkout's) is within.
MAX_TOKENS = 1500
MAX_CHARS = 10_000
#: The file format; a file of another version is ignored (rebuilt). 3: record text escaped on
#: every line boundary, invisible characters removed (issue 24).
FORMAT_VERSION = 3


def assemble(parts: DigestParts, checkout: str | None) -> tuple[str, list[str]]:
    """The digest text a session in ``checkout`` is given, and the ids of the records it shows.

    Its own checkout's handover, else the legacy one (key ""), else none; ``checkout`` None picks
    the newest handover. Hook path: plain dict and string work only.
    """
    sections = parts.get("handovers")
    chosen: Any = None
    if isinstance(sections, dict) and sections:
        if checkout is None:
            chosen = next(iter(sections.values()))
        else:
            chosen = sections.get(checkout) or sections.get("")
    head, tail = str(parts.get("head") or ""), str(parts.get("tail") or "")
    ids = [i for i in parts.get("ids") or () if isinstance(i, str)]
    if not (isinstance(chosen, list) and len(chosen) == 2 and chosen[0]):
        if parts.get("empty"):
            return "", []
        return "\n\n".join(p for p in (head, tail) if p), ids
    from agentctx.core.handles import handle  # only with a handover: the heading names it

    section, record_id = str(chosen[0]), str(chosen[1])
    text = "\n\n".join(p for p in (head, section, tail) if p)
    if handle(record_id) in section and record_id not in ids:
        at = parts.get("head_ids")
        ids.insert(at if isinstance(at, int) else len(ids), record_id)
    return text, ids


def path_for(project_id: str) -> str:
    """The digest file of a project."""
    return os.path.join(home.sub("digests"), f"{project_id}.json")


def write(digest: Digest, generated_at: str, read_started_ns: int) -> str | None:
    """Write a digest file atomically unless the project changed since ``read_started_ns``.

    ``read_started_ns`` is ``time.time_ns()`` taken before the store was read. Writers mark a change
    (:func:`invalidate`) after they commit, so a digest built from older data is never installed.
    """
    from agentctx.core import files, jsonio  # files: on a write only (SessionStart reads)

    project_id = str(digest["project_id"])
    path = path_for(project_id)
    home.ensure_sub("digests")
    saved = {k: v for k, v in digest.items() if k != "pinned"}
    payload = jsonio.dumps({**saved, "generated_at": generated_at}).encode("utf-8")
    if not files.write_atomic(
        path, payload, before_replace=lambda: not _changed_since(project_id, read_started_ns)
    ):
        return None
    if _changed_since(project_id, read_started_ns):  # a writer slipped in between: drop it again
        with _quiet():
            os.unlink(path)
        return None
    if "pinned" in digest:  # the last rung's list (:mod:`agentctx.core.pinned`)
        from agentctx.core import pinned

        pinned.save(project_id, digest["pinned"])
    return path


class _quiet:
    """``contextlib.suppress(OSError)`` without importing contextlib on the hook path."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: object, tb: object) -> bool:
        return isinstance(exc, OSError)


def _changed_since(project_id: str, started_ns: int) -> bool:
    # The marker holds the writer's time.time_ns(): file mtimes come from a coarser kernel clock.
    for name in (project_id, GLOBAL_PROJECT_ID):
        try:
            changed_ns = int(nofollow.read_bytes(_marker(name), 64).strip() or 0)
        except FileNotFoundError:
            continue
        except (OSError, ValueError):
            return True  # unreadable: assume the worst, the next build tries again
        if changed_ns >= started_ns:
            return True
    return False


def _marker(project_id: str) -> str:
    return os.path.join(home.sub("digests"), f"{project_id}.changed")


def read(project_id: str) -> Digest | None:
    """A valid pre-computed digest, or None when it is missing, stale-marked or corrupt."""
    from agentctx.core import jsonio

    try:
        data: Digest = jsonio.loads(nofollow.read_text(path_for(project_id)))  # checked below
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if (
        not isinstance(data, dict)
        or data.get("version") != FORMAT_VERSION
        or not isinstance(data.get("text"), str)
        or not isinstance(data.get("ids"), list)
        or not isinstance(data.get("parts"), dict)
    ):
        return None
    return data


def invalidate(project_ids: Iterable[str]) -> None:
    """Mark these projects changed and drop their digests (a global change stales them all).

    Called after a write commits: first the change marker (so a concurrent builder that read older
    data will not install its digest), then the digest file itself.
    """
    folder = home.sub("digests")
    targets = set(project_ids)
    if not targets:
        return
    import time

    from agentctx.core import files

    stamp = str(time.time_ns())
    for project_id in targets:
        try:
            home.ensure_sub("digests")
            files.write_atomic(_marker(project_id), stamp.encode("ascii"))
        except OSError:
            pass
    try:
        names = (
            os.listdir(folder) if GLOBAL_PROJECT_ID in targets else [f"{p}.json" for p in targets]
        )
    except OSError:
        return
    for name in names:
        if name.endswith(".json"):
            try:
                os.unlink(os.path.join(folder, name))
            except OSError:
                pass
