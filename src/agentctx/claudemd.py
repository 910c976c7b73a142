"""CLAUDE.md drift: compare a project's current decisions and conventions with its CLAUDE.md.

One concept, three surfaces: the MCP tool ``ctx_sync_claudemd`` (read-only), ``agentctx sync``
(which may write, with consent) and consolidation, which stores each record's drift score for the
digest's note (:mod:`agentctx.consolidate.drift`). All three judge a record by :func:`evaluate`, so
"missing" means the same everywhere: a current explicit or reinforced decision or convention is
*missing* when neither signal says CLAUDE.md reflects it --

- **keywords:** CLAUDE.md holds at least :data:`COVERED` (75 %) of its title's keywords;
- **meaning** (when an embedder is given): the record's ``title — body`` has a cosine at least the
  model's bound (:data:`SIMILAR_BOUNDS`, 0.6 for all-MiniLM-L6-v2) with some chunk of CLAUDE.md (a
  sentence, list item, heading, table row or code block, :func:`chunks`).

:func:`drift_score` puts both on one scale and maps it so that missing records score 0.5 or more (the
digest's bound) and covered ones at most 0.4. A record whose superseded predecessor's text CLAUDE.md
still contains is *contradicted* and scores 1.0. Embeddings measure the topic, not agreement: a line
that contradicts a decision is as close to it as a paraphrase (measured in docs/consolidation.md),
so only the superseded-text check finds contradictions.

:func:`report` returns a :class:`SyncReport`: the missing records, the superseded text still
present, the proposed file and a unified diff. The proposal never removes the user's text: it only
appends one block between :data:`SYNC_BEGIN` and :data:`SYNC_END`, or replaces that block in place
when it is already there, so a second :func:`apply` with no store change leaves the file
byte-identical. Text inside the block is ignored when coverage and superseded text are computed
(the block is regenerated from the store).

Plain dataclasses, no pydantic, numpy imported only when embeddings run: the command line imports
this module.
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio

from agentctx import retrieval
from agentctx.digest import DRIFT_THRESHOLD
from agentctx.errors import ValidationError
from agentctx.store import HISTORY_MAX_DEPTH

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from agentctx.embed import Embedder
    from agentctx.records import Record, RecordType
    from agentctx.store import Store

#: Share of a title's keywords CLAUDE.md must contain for the record to count as covered.
COVERED = 0.75
#: Per model, ``(floor, covered)`` cosines between a record's ``title — body`` and a CLAUDE.md
#: chunk: from ``covered`` up the record counts as covered, at ``floor`` or below the meaning signal
#: gives no credit. Measured for all-MiniLM-L6-v2 (docs/consolidation.md): paraphrases 0.29-0.81,
#: the best unrelated chunk of a 1,000-chunk document at most 0.47.
SIMILAR_BOUNDS: dict[str, tuple[float, float]] = {
    "sentence-transformers/all-MiniLM-L6-v2": (0.30, 0.60),
}
#: Models not measured here (the default bge-small-en-v1.5 among them, whose cosines run higher):
#: strict bounds, after the bge authors' advice to filter similar pairs at 0.8 or above.
SIMILAR_DEFAULT = (0.50, 0.80)
#: The highest drift score of a covered record; missing ones score :data:`DRIFT_THRESHOLD` or more.
COVERED_SCORE_MAX = 0.4
#: The drift score of a record whose predecessor's text CLAUDE.md still contains.
CONTRADICTED = 1.0
CLAUDE_MD_MAX_BYTES = 1_000_000
#: Chunks (and record texts) longer than this are cut: the model's cost grows with the length, and
#: a decision is stated in a sentence. Files beyond :data:`CHUNKS_MAX` chunks are embedded in part.
CHUNK_CHARS = 300
CHUNKS_MAX = 1000
EMBED_BATCH = 64
SYNC_MAX = 50
SYNC_BEGIN = "<!-- agentctx:begin proposed by ctx_sync_claudemd: review before applying -->"
SYNC_END = "<!-- agentctx:end -->"
_BEGIN_PREFIX = "<!-- agentctx:begin"
_LIST_MARK = re.compile(r"^(?:[-*+]|\d+[.)])\s+")
_HEADING = re.compile(r"^#{1,6}\s+")
_FENCE = re.compile(r"^(`{3,}|~{3,})")
_TABLE_RULE = re.compile(r"^\|?[\s:|-]+\|?$")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9`*_(\"'])")
HEADING = "## Decisions and conventions recorded in agentctx"
_GROUPS: tuple[tuple[str, str], ...] = (("decision", "Decisions"), ("convention", "Conventions"))
_CHECKED_CONFIDENCE = ("explicit", "reinforced")
METHOD = (
    "keyword coverage: a record counts as covered when CLAUDE.md contains at least "
    f"{int(COVERED * 100)}% of its title's keywords; superseded text is matched line by "
    "line. Phrasing differences give false positives: review before applying."
)
METHOD_SEMANTIC = (
    "keyword coverage and embedding similarity: a record counts as covered when CLAUDE.md "
    f"contains at least {int(COVERED * 100)}% of its title's keywords or a passage whose cosine "
    "similarity with the record's title and body is at least {bound} ({model}); superseded text "
    "is matched line by line. Similarity measures the topic, not agreement: a passage that "
    "contradicts a record can count as covering it. Review before applying."
)


@dataclass(frozen=True, slots=True)
class MissingRecord:
    """A checked record that neither its title's keywords nor its meaning find in CLAUDE.md."""

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
class Assessment:
    """How far one checked record is from being reflected in CLAUDE.md (see :func:`drift_score`).

    ``similarity`` is the best cosine with a chunk, None when it was not measured (no embedder, no
    chunk, or the keywords already cover the record), and ``meaning`` that cosine on the coverage
    scale (:func:`meaning`); ``contradicted`` names the superseded record whose text CLAUDE.md
    still contains.
    """

    record: Record
    coverage: float
    missing_words: list[str]
    similarity: float | None
    meaning: float
    contradicted: str | None
    score: float

    @property
    def missing(self) -> bool:
        """Neither keywords nor meaning say CLAUDE.md reflects the record."""
        return drift_score(self.coverage, self.meaning) >= DRIFT_THRESHOLD

    @property
    def candidate(self) -> bool:
        """Counted by the digest's drift note: missing or contradicted."""
        return self.score >= DRIFT_THRESHOLD


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
    #: Every checked record, as :func:`evaluate` judged it.
    assessments: list[Assessment] = field(default_factory=list, repr=False)

    @property
    def changed(self) -> bool:
        """Whether applying would change (or create) the target."""
        return self.proposed != (self.current or "")

    @property
    def candidates(self) -> int:
        """Missing or contradicted records: what consolidation's drift scores count."""
        return sum(a.candidate for a in self.assessments)


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


def user_views(files: Sequence[ClaudeMd]) -> list[tuple[str, str]]:
    """``(path, text)`` of each file with our block blanked: the text the user wrote."""
    return [(f.path, _user_view(f.text)) for f in files]


def _stale(records: Sequence[Record], files: list[tuple[str, str]]) -> list[tuple[StaleText, str]]:
    """Superseded text still in ``files``, each with the id of the chain's current record."""
    by_id = {r.id: r for r in records}
    stale: list[tuple[StaleText, str]] = []
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
            found = StaleText(
                id=record.id,
                title=record.title,
                superseded_by=record.superseded_by,
                current_title=current.title,
                file=path,
                line=line,
                text=one_line(text, 200),
            )
            stale.append((found, current.id))
    return stale


def checked(records: Sequence[Record]) -> list[Record]:
    """The records drift is judged for: current explicit or reinforced decisions and conventions
    whose title has search terms."""
    return [
        r
        for r in records
        if r.is_current
        and r.type in ("decision", "convention")
        and r.confidence in _CHECKED_CONFIDENCE
        and retrieval.query_terms(r.title)
    ]


def assess(
    records: Sequence[Record],
    files: list[tuple[str, str]],
    similarity: Mapping[str, float] | None = None,
    *,
    model: str = "",
) -> tuple[list[Assessment], list[StaleText]]:
    """Each checked record's assessment, and the superseded text ``files`` still contain.

    ``records`` is the project's history (superseded ones included, to find contradictions);
    ``files`` are ``(path, text)`` pairs (:func:`user_views`); ``similarity`` maps record ids to
    their best cosine with a chunk (:func:`similarities`) by the embedding ``model``.
    """
    bounds = similarity_bounds(model)
    words = {
        _stem(word)
        for _, text in files
        for line in text.splitlines()  # query_terms reads a bounded prefix of its text
        for word in retrieval.query_terms(line, 1 << 30)
    }
    stale = _stale(records, files)
    contradicted = {current: s.id for s, current in reversed(stale)}  # the first one wins
    found: list[Assessment] = []
    for record in checked(records):
        terms = retrieval.query_terms(record.title)
        absent = [t for t in terms if _stem(t) not in words]
        coverage = 1 - len(absent) / len(terms)
        cosine = None if similarity is None else similarity.get(record.id)
        credit = 0.0 if cosine is None else meaning(cosine, bounds)
        old = contradicted.get(record.id)
        found.append(
            Assessment(
                record=record,
                coverage=coverage,
                missing_words=absent,
                similarity=cosine,
                meaning=credit,
                contradicted=old,
                score=CONTRADICTED if old else drift_score(coverage, credit),
            )
        )
    return found, [s for s, _ in stale]


def drift_score(coverage: float, meaning: float = 0.0) -> float:
    """How far a record is from being reflected in CLAUDE.md: 0 (there) to 1 (absent).

    ``reflected`` is the larger of the keyword ``coverage`` and the ``meaning`` credit (both in
    [0, 1], :data:`COVERED` meaning covered). Below :data:`COVERED` the record is missing and
    scores ``1 − reflected / (2 × COVERED)``, in [0.5, 1]; from it up it is covered and scores
    ``COVERED_SCORE_MAX × (1 − reflected) / (1 − COVERED)``, in [0, 0.4]. Rounded to 3 decimals.
    """
    reflected = min(max(coverage, meaning), 1.0)
    if reflected < COVERED:
        return round(1 - reflected / (2 * COVERED), 3)
    return round(COVERED_SCORE_MAX * (1 - reflected) / (1 - COVERED), 3)


def similarity_bounds(model: str) -> tuple[float, float]:
    """``(floor, covered)`` cosines for an embedding model (:data:`SIMILAR_BOUNDS`)."""
    return SIMILAR_BOUNDS.get(model, SIMILAR_DEFAULT)


def meaning(cosine: float, bounds: tuple[float, float]) -> float:
    """A cosine on the keyword-coverage scale: piecewise linear through ``(floor, 0)``,
    ``(covered, COVERED)`` and ``(1, 1)``."""
    floor, covered = bounds
    if cosine <= floor:
        return 0.0
    if cosine < covered:
        return COVERED * (cosine - floor) / (covered - floor)
    return min(COVERED + (1 - COVERED) * (cosine - covered) / (1 - covered), 1.0)


# -- meaning ----------------------------------------------------------------------------------------


def semantic_text(record: Record) -> str:
    """The text of a record compared with CLAUDE.md chunks: ``title — body``.

    :func:`agentctx.embed.record_text` without its ``[type] [date] [project]`` labels, which no
    CLAUDE.md line carries (they lower a paraphrase's cosine by about 0.05), cut like a chunk.
    """
    return f"{record.title} — {' '.join(record.body.split())}"[:CHUNK_CHARS]


def _plain(text: str) -> str:
    """One line: list mark and heading hashes dropped, emphasis and code marks removed."""
    text = _HEADING.sub("", _LIST_MARK.sub("", text.strip()))
    return " ".join(text.translate(str.maketrans("", "", "*`")).split())


def chunks(text: str) -> list[str]:
    """The passages of a CLAUDE.md compared with records, in order, each once.

    Headings, list items (with their continuation lines), paragraphs, table rows and fenced code
    blocks are one chunk each; a paragraph or item of several sentences adds its sentences. At
    most :data:`CHUNKS_MAX`, each at most :data:`CHUNK_CHARS` characters.
    """
    units: list[str] = []
    current: list[str] = []
    fence: list[str] | None = None
    marker = ""

    def flush() -> None:
        if current:
            units.append(" ".join(current))
            current.clear()

    for line in text.splitlines():
        stripped = line.strip()
        if fence is not None:
            if stripped.startswith(marker):
                units.append(" ".join(fence))
                fence = None
            else:
                fence.append(stripped)
            continue
        opening = _FENCE.match(stripped)
        if opening:
            flush()
            fence, marker = [], opening.group(1)
        elif not stripped or stripped.startswith("<!--") or stripped == "---":
            flush()
        elif _HEADING.match(stripped) or stripped.startswith("|"):
            flush()
            if not _TABLE_RULE.match(stripped):
                units.append(" ".join(stripped.replace("|", " ").split()))
        elif _LIST_MARK.match(stripped):
            flush()
            current.append(stripped)
        else:
            current.append(stripped)
    flush()
    if fence:
        units.append(" ".join(fence))
    found: dict[str, None] = {}
    for unit in units:
        for part in _SENTENCE_END.split(_plain(unit)):
            part = part.strip()[:CHUNK_CHARS]
            if sum(c.isalpha() for c in part) >= 3:
                found[part] = None
    return list(found)[:CHUNKS_MAX]


async def similarities(
    records: Sequence[Record],
    files: list[tuple[str, str]],
    embedder: Embedder,
    *,
    expired: Callable[[], bool] | None = None,
) -> dict[str, float] | None:
    """Each record's best cosine with a chunk of ``files`` (empty when there are no chunks).

    Embeds in batches of :data:`EMBED_BATCH` in a worker thread; returns None, leaving the rest
    undone, when ``expired()`` turns true between two batches.
    """
    import numpy as np

    passages = list(dict.fromkeys(c for _, text in files for c in chunks(text)))[:CHUNKS_MAX]
    if not records or not passages:
        return {}
    vectors = []
    for texts in (passages, [semantic_text(r) for r in records]):
        # Batches of similar lengths: the model pads each batch to its longest text.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        rows = np.zeros((len(texts), embedder.dims), dtype=np.float32)
        for start in range(0, len(order), EMBED_BATCH):
            if expired is not None and expired():
                return None
            batch = order[start : start + EMBED_BATCH]
            rows[batch] = await embedder.embed([texts[i] for i in batch])
        vectors.append(rows)
    best = (vectors[1] @ vectors[0].T).max(axis=1)  # unit vectors: the dot product is the cosine
    return {r.id: round(float(c), 4) for r, c in zip(records, best, strict=True)}


async def evaluate(
    records: Sequence[Record],
    files: list[tuple[str, str]],
    embedder: Embedder | None = None,
    *,
    expired: Callable[[], bool] | None = None,
) -> tuple[list[Assessment], list[StaleText]] | None:
    """:func:`assess` with the meaning signal for the records keywords leave missing.

    Contradicted records are not embedded: the stale text, on the same topic, would "cover"
    them. Without an embedder, keywords alone; None when ``expired()`` turned true meanwhile.
    """
    found, stale = assess(records, files)
    unsure = [a.record for a in found if a.missing and not a.contradicted]
    if embedder is None or not unsure:
        return found, stale
    similarity = await similarities(unsure, files, embedder, expired=expired)
    if similarity is None:
        return None
    return assess(records, files, similarity, model=embedder.name)


async def load_records(store: Store, project_id: str) -> list[Record]:
    """The project's decisions and conventions, superseded and archived ones included (their
    text lingering in CLAUDE.md is a contradiction however old)."""
    return await store.list_records(
        project_id, types=("decision", "convention"), include_superseded=True
    )


def method(model: str | None) -> str:
    """How records are judged: keywords alone (no ``model``), or keywords and meaning."""
    if model is None:
        return METHOD
    return METHOD_SEMANTIC.format(bound=similarity_bounds(model)[1], model=model)


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
