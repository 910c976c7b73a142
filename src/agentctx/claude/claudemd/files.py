"""Reading CLAUDE.md files, and finding agentctx's own block in them.

A CLAUDE.md is read whole up to :data:`CLAUDE_MD_MAX_BYTES` and decoded as UTF-8 (invalid bytes
replaced); :class:`ClaudeMd` says whether that text is exact, i.e. whether the file may be
rewritten. Our block is the lines from a :data:`SYNC_BEGIN` marker to :data:`SYNC_END`;
:func:`user_views` blanks it, so that only the text the user wrote is judged.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio

from agentctx.core import files as core_files
from agentctx.core.errors import AgentctxError, ValidationError

if TYPE_CHECKING:
    from collections.abc import Sequence

CLAUDE_MD_MAX_BYTES = 1_000_000
SYNC_BEGIN = "<!-- agentctx:begin proposed by ctx_sync_claudemd: review before applying -->"
SYNC_END = "<!-- agentctx:end -->"
_BEGIN_PREFIX = "<!-- agentctx:begin"


@dataclass(frozen=True, slots=True)
class ClaudeMd:
    """A CLAUDE.md as read: its path and text (UTF-8, invalid bytes replaced); ``exact`` says
    whether the text is the whole file decoded without replacement (a file that may be written)."""

    path: str
    text: str
    exact: bool = True


def read_sync(path: str, root: str | None = None) -> ClaudeMd | None:
    """The file at ``path``, or None when it is missing or unreadable (read now, in this thread).

    ``root``: the repository the file belongs to. Then only a regular file inside it is read
    (:func:`agentctx.core.files.read_inside`): a CLAUDE.md that is a symlink out of the repository
    (to ``/proc/self/environ``, a key file), a FIFO or a folder reads as missing. Without a root
    (a file the user named with ``sync --claude-md``) a regular file anywhere is read.
    """
    try:
        if root is not None:
            raw = core_files.read_inside(root, path, CLAUDE_MD_MAX_BYTES + 1)
        else:
            raw = core_files.read_bounded(path, CLAUDE_MD_MAX_BYTES + 1)
    except (OSError, AgentctxError):  # missing, unreadable, not regular, or outside the root
        return None
    exact = len(raw) <= CLAUDE_MD_MAX_BYTES
    raw = raw[:CLAUDE_MD_MAX_BYTES]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return ClaudeMd(path, raw.decode("utf-8", "replace"), exact=False)
    return ClaudeMd(path, text, exact=exact)


def is_inside(root: str, path: str) -> bool:
    """Whether ``path`` names a place under ``root`` (lexically: links are judged when read)."""
    root, path = os.path.abspath(root), os.path.abspath(path)
    return os.path.commonpath([root, path]) == root


async def read(path: str, root: str | None = None) -> ClaudeMd | None:
    """The file at ``path``, or None when it is missing or unreadable (read in a worker thread)."""
    return await anyio.to_thread.run_sync(read_sync, path, root)


def _discover(folders: Sequence[str], root: str) -> list[ClaudeMd]:
    found: list[ClaudeMd] = []
    seen: set[str] = set()
    for base in dict.fromkeys(folders):
        for name in ("CLAUDE.md", os.path.join(".claude", "CLAUDE.md")):
            path = os.path.join(base, name)
            real = os.path.realpath(path)
            if real in seen:
                continue
            item = read_sync(path, root)
            if item is not None:
                seen.add(real)
                found.append(item)
    return found


async def discover(project_dir: str, root: str) -> list[ClaudeMd]:
    """Each CLAUDE.md (and ``.claude/CLAUDE.md``) of the project folder and the root, once each."""
    return await anyio.to_thread.run_sync(_discover, (project_dir, root), root)


def block_span(text: str) -> tuple[int, int] | None:
    """(start, end) offsets of our marked block in ``text``, end-marker line and its newline
    included; None when there is none. A begin marker without an end marker is an error: the
    block cannot be replaced without risking the user's text."""
    offset = 0
    start: int | None = None
    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        if start is None and stripped.startswith(_BEGIN_PREFIX):
            start = offset
        elif start is not None and stripped == SYNC_END:
            return start, offset + len(line)
        offset += len(line)
    if start is not None:
        raise ValidationError(
            f"CLAUDE.md has an `{_BEGIN_PREFIX} …` marker without `{SYNC_END}`: "
            "remove or close the agentctx block by hand"
        )
    return None


def _user_view(text: str) -> str:
    """``text`` with the lines of our block blanked (line numbers kept)."""
    try:
        span = block_span(text)
    except ValidationError:
        return text
    if span is None:
        return text
    start, end = span
    lines = text[start:end].count("\n") + (0 if text[start:end].endswith("\n") else 1)
    return text[:start] + "\n" * lines + text[end:]


def user_views(files: Sequence[ClaudeMd]) -> list[tuple[str, str]]:
    """``(path, text)`` of each file with our block blanked: the text the user wrote."""
    return [(f.path, _user_view(f.text)) for f in files]
