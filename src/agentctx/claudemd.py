"""CLAUDE.md drift: compare a project's current decisions and conventions with its CLAUDE.md.

One concept, two surfaces: the MCP tool ``ctx_sync_claudemd`` (read-only) and ``agentctx sync``
(which may write, with consent). :func:`report` reads the files and the store and returns a
:class:`SyncReport`: the records CLAUDE.md does not mention (keyword coverage of their titles),
the text of superseded records it still contains, the proposed file and a unified diff. The
proposal never removes the user's text: it only appends one block between :data:`SYNC_BEGIN` and
:data:`SYNC_END`, or replaces that block in place when it is already there, so a second
:func:`apply` with no store change leaves the file byte-identical. Text inside the block is ignored
when coverage and superseded text are computed (the block is regenerated from the store).

Plain dataclasses, no pydantic: the command line imports this module.
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio

from agentctx import retrieval
from agentctx.errors import ValidationError
from agentctx.store import HISTORY_MAX_DEPTH

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agentctx.records import Record, RecordType
    from agentctx.store import Store

#: Share of a title's keywords CLAUDE.md must contain for the record to count as covered.
COVERED = 0.75
CLAUDE_MD_MAX_BYTES = 1_000_000
SYNC_MAX = 50
SYNC_BEGIN = "<!-- agentctx:begin proposed by ctx_sync_claudemd: review before applying -->"
SYNC_END = "<!-- agentctx:end -->"
_BEGIN_PREFIX = "<!-- agentctx:begin"
_LIST_MARK = re.compile(r"^(?:[-*+]|\d+[.)])\s+")
HEADING = "## Decisions and conventions recorded in agentctx"
_GROUPS: tuple[tuple[str, str], ...] = (("decision", "Decisions"), ("convention", "Conventions"))
METHOD = (
    "keyword coverage: a record counts as covered when CLAUDE.md contains at least "
    f"{int(COVERED * 100)}% of its title's keywords; superseded text is matched line by "
    "line. Phrasing differences give false positives: review before applying."
)


@dataclass(frozen=True, slots=True)
class MissingRecord:
    """A current decision or convention whose title words CLAUDE.md does not contain."""

    id: str
    type: RecordType
    title: str
    coverage: float
    missing_words: list[str]


@dataclass(frozen=True, slots=True)
class StaleText:
    """Text of a superseded record that CLAUDE.md still contains (``line`` counts from 1)."""

    id: str
    title: str
    superseded_by: str
    current_title: str
    file: str
    line: int
    text: str


@dataclass(frozen=True, slots=True)
class ClaudeMd:
    """A CLAUDE.md as read: its path and text (UTF-8, invalid bytes replaced); ``exact`` says
    whether the text is the whole file decoded without replacement (a file that may be written)."""

    path: str
    text: str
    exact: bool = True


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

    @property
    def changed(self) -> bool:
        """Whether applying would change (or create) the target."""
        return self.proposed != (self.current or "")


# -- files ------------------------------------------------------------------------------------------


def _read_one(path: str) -> ClaudeMd | None:
    if not os.path.isfile(path):
        return None
    try:
        with open(path, "rb") as f:
            raw = f.read(CLAUDE_MD_MAX_BYTES + 1)
    except OSError:
        return None
    exact = len(raw) <= CLAUDE_MD_MAX_BYTES
    raw = raw[:CLAUDE_MD_MAX_BYTES]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return ClaudeMd(path, raw.decode("utf-8", "replace"), exact=False)
    return ClaudeMd(path, text, exact=exact)


async def read(path: str) -> ClaudeMd | None:
    """The file at ``path``, or None when it is missing or unreadable (read in a worker thread)."""
    return await anyio.to_thread.run_sync(_read_one, path)


def _discover(folders: Sequence[str]) -> list[ClaudeMd]:
    found: list[ClaudeMd] = []
    seen: set[str] = set()
    for base in dict.fromkeys(folders):
        for name in ("CLAUDE.md", os.path.join(".claude", "CLAUDE.md")):
            path = os.path.join(base, name)
            real = os.path.realpath(path)
            if real in seen:
                continue
            item = _read_one(path)
            if item is not None:
                seen.add(real)
                found.append(item)
    return found


async def discover(project_dir: str, root: str) -> list[ClaudeMd]:
    """Each CLAUDE.md (and ``.claude/CLAUDE.md``) of the project folder and the root, once each."""
    return await anyio.to_thread.run_sync(_discover, (project_dir, root))


# -- the comparison ---------------------------------------------------------------------------------


def _stem(word: str) -> str:
    """A crude suffix strip, so that "tests" in a title finds "test" in CLAUDE.md."""
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def _norm(text: str) -> str:
    """Lower case, Markdown emphasis and code marks dropped, whitespace collapsed."""
    return " ".join(text.lower().translate(str.maketrans("", "", "*_`")).split())


def one_line(text: str, limit: int) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


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


def _stale_snippets(old: Record, current: Record) -> list[str]:
    """Text of a superseded record that its current version no longer says."""
    snippets: list[str] = []
    if _norm(old.title) != _norm(current.title) and len(_norm(old.title)) >= 12:
        snippets.append(old.title)
    first = old.body.strip().splitlines()[0] if old.body.strip() else ""
    if len(_norm(first)) >= 24 and _norm(first) not in _norm(current.body):
        snippets.append(first)
    return snippets


def _first_line_with(
    files: list[tuple[str, str]], snippets: list[str]
) -> tuple[str, int, str] | None:
    wanted = [_norm(s) for s in snippets]
    for path, text in files:
        for number, line in enumerate(text.splitlines(), start=1):
            if any(w in _norm(line) for w in wanted):
                return path, number, line
    return None


def drift(
    records: Sequence[Record], files: list[tuple[str, str]]
) -> tuple[list[Record], list[MissingRecord], list[StaleText]]:
    """(checked records, missing ones, superseded text still present) for ``(path, text)`` files."""
    words = {
        _stem(word)
        for _, text in files
        for line in text.splitlines()  # query_terms reads a bounded prefix of its text
        for word in retrieval.query_terms(line, 1 << 30)
    }
    checked: list[Record] = []
    missing: list[MissingRecord] = []
    for record in records:
        if not record.is_current or record.confidence not in ("explicit", "reinforced"):
            continue
        terms = retrieval.query_terms(record.title)
        if not terms:
            continue
        checked.append(record)
        absent = [t for t in terms if _stem(t) not in words]
        coverage = 1 - len(absent) / len(terms)
        if coverage < COVERED:
            missing.append(
                MissingRecord(
                    id=record.id,
                    type=record.type,
                    title=record.title,
                    coverage=round(coverage, 2),
                    missing_words=absent,
                )
            )
    by_id = {r.id: r for r in records}
    stale: list[StaleText] = []
    for record in records:
        if record.superseded_by is None:
            continue
        current = record
        for _ in range(HISTORY_MAX_DEPTH):
            successor = by_id.get(current.superseded_by or "")
            if successor is None:
                break
            current = successor
        hit = _first_line_with(files, _stale_snippets(record, current))
        if hit is not None:
            path, line, text = hit
            stale.append(
                StaleText(
                    id=record.id,
                    title=record.title,
                    superseded_by=record.superseded_by,
                    current_title=current.title,
                    file=path,
                    line=line,
                    text=one_line(text, 200),
                )
            )
    return checked, missing, stale


# -- the proposal -----------------------------------------------------------------------------------


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
        lines += [f"- **{r.title}**: {one_line(r.body, 200)} ({r.type} `{r.id}`)" for r in group]
    if stale:
        lines += ["", "### Superseded text to review (your text above is left as it is)", ""]
        for s in stale:
            where = os.path.relpath(s.file, root) if os.path.isabs(s.file) else s.file
            lines.append(
                f"- ~~{_LIST_MARK.sub('', one_line(s.text, 200))}~~ ({where} line {s.line}: `{s.id}` is superseded "
                f"by `{s.superseded_by}`, **{s.current_title}**)"
            )
    lines.append(SYNC_END)
    return "\n".join(lines) + "\n"


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
) -> SyncReport:
    """Compare the project's records with ``files`` and propose the change to ``target``.

    ``target`` is one of ``files`` or a path that does not exist yet. Only the store's public
    methods are used; nothing is written.
    """
    records = await store.list_records(
        project_id, types=("decision", "convention"), include_superseded=True
    )
    views = [(f.path, _user_view(f.text)) for f in files]
    checked, missing, stale = drift(records, views)
    by_id = {r.id: r for r in checked}
    shown = missing[:SYNC_MAX]
    target_file = next((f for f in files if f.path == target), None)
    current = target_file.text if target_file is not None else None
    proposed = propose(current, render_block([by_id[m.id] for m in shown], stale, root))
    label = _label(target, root)
    return SyncReport(
        files=[f.path for f in files],
        target=target,
        label=label,
        checked=len(checked),
        missing=shown,
        missing_total=len(missing),
        contradictions=stale,
        current=current,
        proposed=proposed,
        diff=unified_diff(current, proposed, label),
        exact=target_file is None or target_file.exact,
    )


def _write(sync: SyncReport) -> None:
    path = sync.target
    now = _read_one(path)
    if (now.text if now is not None else None) != sync.current:
        raise ValidationError(f"{path} changed while agentctx read it: run `agentctx sync` again")
    folder = os.path.dirname(path) or "."
    tmp = os.path.join(folder, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(sync.proposed.encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())
        if now is not None:
            os.chmod(tmp, os.stat(path).st_mode & 0o7777)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


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
