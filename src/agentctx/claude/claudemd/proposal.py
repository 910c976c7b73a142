"""The proposed change to CLAUDE.md: our block, the new text, its diff, and writing it.

:func:`report` judges the project's records against the files
(:func:`~agentctx.claude.claudemd.semantic.evaluate`) and returns a :class:`SyncReport`. The proposal
never removes the user's text: it appends one block between ``SYNC_BEGIN`` and ``SYNC_END``, or
replaces that block in place, so a second :func:`apply` with no store change leaves the file
byte-identical. :func:`apply` writes atomically and refuses a file that changed since it was read.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio

from agentctx.claude.claudemd.assessment import (
    METHOD,
    Assessment,
    StaleText,
    load_records,
    method,
    one_line,
)
from agentctx.claude.claudemd.files import (
    CLAUDE_MD_MAX_BYTES,
    SYNC_BEGIN,
    SYNC_END,
    ClaudeMd,
    block_span,
    is_inside,
    read_sync,
    user_views,
)
from agentctx.claude.claudemd.semantic import LIST_MARK, evaluate
from agentctx.core import files as core_files
from agentctx.core.errors import ValidationError
from agentctx.core.text import for_model

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agentctx.embeddings.models import Embedder
    from agentctx.records import Record, RecordType
    from agentctx.store import Store

SYNC_MAX = 50
HEADING = "## Decisions and conventions recorded in agentctx"
_GROUPS: tuple[tuple[str, str], ...] = (("decision", "Decisions"), ("convention", "Conventions"))


@dataclass(frozen=True, slots=True)
class MissingRecord:
    """A checked record that neither its title's keywords nor its meaning find in CLAUDE.md."""

    id: str
    type: RecordType
    title: str
    coverage: float
    missing_words: list[str]


@dataclass(frozen=True, slots=True)
class SyncReport:
    """The drift between the store and CLAUDE.md, and the change that would fix it."""

    files: list[str]
    target: str
    label: str
    checked: int
    missing: list[MissingRecord]
    missing_total: int
    contradictions: list[StaleText]
    #: The target's text now (None when it does not exist) and the text proposed for it.
    current: str | None
    proposed: str
    diff: str
    method: str = METHOD
    exact: bool = field(default=True, repr=False)
    #: Every checked record, as :func:`evaluate` judged it.
    assessments: list[Assessment] = field(default_factory=list, repr=False)
    #: The project folder: a target inside it is written without following any symlink there.
    root: str | None = field(default=None, repr=False)

    @property
    def changed(self) -> bool:
        """Whether applying would change (or create) the target."""
        return self.proposed != (self.current or "")

    @property
    def candidates(self) -> int:
        """Missing or contradicted records: what consolidation's drift scores count."""
        return sum(a.candidate for a in self.assessments)


def render_block(missing: Sequence[Record], stale: Sequence[StaleText], root: str) -> str:
    """Our marked block (ending with a newline), or "" when there is nothing to say."""
    if not missing and not stale:
        return ""
    lines = [SYNC_BEGIN, HEADING]
    for type_, heading in _GROUPS:
        group = [r for r in missing if r.type == type_]
        if not group:
            continue
        lines += ["", f"### {heading}", ""]
        lines += [
            f"- **{_flat(r.title)}**: {_flat(r.body, 200)} ({r.type} `{_flat(r.id)}`)"
            for r in group
        ]
    if stale:
        lines += ["", "### Superseded text to review (your text above is left as it is)", ""]
        for s in stale:
            where = os.path.relpath(s.file, root) if os.path.isabs(s.file) else s.file
            lines.append(
                f"- ~~{LIST_MARK.sub('', one_line(s.text, 200))}~~ ({where} line {s.line}: `{s.id}` is superseded "
                f"by `{s.superseded_by}`, **{_flat(s.current_title)}**)"
            )
    lines.append(SYNC_END)
    return "\n".join(lines) + "\n"


def _flat(text: str, limit: int = 10_000) -> str:
    """Record text for CLAUDE.md, which Claude reads as instructions: on one line (every line
    boundary a space) and without invisible characters (issue 24)."""
    return one_line(for_model(text), limit)


def propose(current: str | None, block: str) -> str:
    """The target's new text: our block replaced in place, else appended after the user's text
    (one blank line between); the user's text is never changed."""
    before = current or ""
    span = block_span(before)
    if span is not None:
        start, end = span
        return before[:start] + block + before[end:]
    if not block:
        return before
    lead = "" if not before else ("\n" if before.endswith("\n") else "\n\n")
    return before + lead + block


def unified_diff(current: str | None, proposed: str, label: str) -> str:
    """A unified diff from ``current`` (None: the file does not exist) to ``proposed``."""
    if current is not None and proposed == current:
        return ""
    if current is None and not proposed:
        return ""
    lines = difflib.unified_diff(
        (current or "").splitlines(keepends=True),
        proposed.splitlines(keepends=True),
        fromfile="/dev/null" if current is None else f"a/{label}",
        tofile=f"b/{label}",
    )
    return "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
    )


def _label(target: str, root: str) -> str:
    """``target`` relative to the root, or as it is when it lies outside."""
    label = os.path.relpath(target, root)
    return target if label.startswith("..") else label


async def report(
    store: Store,
    project_id: str,
    *,
    files: Sequence[ClaudeMd],
    target: str,
    root: str,
    embedder: Embedder | None = None,
) -> SyncReport:
    """Compare the project's records with ``files`` and propose the change to ``target``.

    ``target`` is one of ``files`` or a path that does not exist yet. With an ``embedder`` a
    record is also covered by meaning (as consolidation judges it). Nothing is written.
    """
    records = await load_records(store, project_id)
    judged = await evaluate(records, user_views(files), embedder)
    assert judged is not None  # no time limit here
    assessments, stale = judged
    missing = [a for a in assessments if a.missing]
    shown = missing[:SYNC_MAX]
    target_file = next((f for f in files if f.path == target), None)
    current = target_file.text if target_file is not None else None
    proposed = propose(current, render_block([a.record for a in shown], stale, root))
    label = _label(target, root)
    return SyncReport(
        root=root,
        files=[f.path for f in files],
        target=target,
        label=label,
        checked=len(assessments),
        missing=[
            MissingRecord(
                id=a.record.id,
                type=a.record.type,
                title=a.record.title,
                coverage=round(a.coverage, 2),
                missing_words=a.missing_words,
            )
            for a in shown
        ],
        missing_total=len(missing),
        contradictions=stale,
        current=current,
        proposed=proposed,
        diff=unified_diff(current, proposed, label),
        method=method(embedder.name if embedder is not None else None),
        exact=target_file is None or target_file.exact,
        assessments=assessments,
    )


def _write(sync: SyncReport) -> None:
    path = sync.target
    root = sync.root if sync.root and is_inside(sync.root, path) else None
    if root is not None:
        core_files.check_inside(root, path)  # a link is refused as such, before the re-read
    now = read_sync(path, root)  # read as the report read it: inside the repository, no link out
    if (now.text if now is not None else None) != sync.current:
        raise ValidationError(f"{path} changed while agentctx read it: run `agentctx sync` again")
    core_files.write_atomic(
        path, sync.proposed.encode("utf-8"), mode=None, keep_mode=True, root=root
    )


async def apply(sync: SyncReport) -> bool:
    """Write the proposed text to the target (atomically); False when nothing would change.

    Refuses a target that is not UTF-8 or larger than 1,000,000 bytes, or that changed since it
    was read.
    """
    if not sync.changed:
        return False
    if not sync.exact:
        raise ValidationError(
            f"{sync.target} is not UTF-8 or is larger than {CLAUDE_MD_MAX_BYTES:,} bytes: "
            "agentctx will not rewrite it; copy the proposed block by hand"
        )
    await anyio.to_thread.run_sync(_write, sync)
    return True
