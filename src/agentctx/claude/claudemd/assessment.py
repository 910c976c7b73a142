"""Judging each record against CLAUDE.md: keyword coverage, meaning credit, the drift score.

A current explicit or reinforced decision or convention (:func:`checked`) is *missing* when
CLAUDE.md holds less than :data:`COVERED` of its title's keywords and the meaning credit
(:func:`meaning`, from a cosine :mod:`agentctx.claude.claudemd.semantic` measures) does not make up for
it; it is *contradicted* when CLAUDE.md still contains text of a superseded predecessor.
:func:`drift_score` puts both signals on one scale. Keywords and superseded text need no model:
:func:`assess` is synchronous and cheap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentctx.core import search
from agentctx.embeddings import thresholds
from agentctx.retrieval.digest import DRIFT_THRESHOLD
from agentctx.store import HISTORY_MAX_DEPTH

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from agentctx.records import Record
    from agentctx.store import Store

#: Share of a title's keywords CLAUDE.md must contain for the record to count as covered.
COVERED = 0.75
#: The highest drift score of a covered record; missing ones score :data:`DRIFT_THRESHOLD` or more.
COVERED_SCORE_MAX = 0.4
#: The drift score of a record whose predecessor's text CLAUDE.md still contains.
CONTRADICTED = 1.0
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
        and search.query_terms(r.title)
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
    ``files`` are ``(path, text)`` pairs (:func:`~agentctx.claude.claudemd.files.user_views`);
    ``similarity`` maps record ids to their best cosine with a chunk
    (:func:`~agentctx.claude.claudemd.semantic.similarities`) by the embedding ``model``.
    """
    bounds = similarity_bounds(model)
    words = {
        _stem(word)
        for _, text in files
        for line in text.splitlines()  # query_terms reads a bounded prefix of its text
        for word in search.query_terms(line, 1 << 30)
    }
    stale = _stale(records, files)
    contradicted = {current: s.id for s, current in reversed(stale)}  # the first one wins
    found: list[Assessment] = []
    for record in checked(records):
        terms = search.query_terms(record.title)
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
    """``(floor, covered)`` cosines between a record's ``title — body`` and a CLAUDE.md chunk for
    an embedding model: from ``covered`` up the record counts as covered, at ``floor`` or below the
    meaning signal gives no credit. Measured, else calibrated, else strict
    (:func:`agentctx.embeddings.thresholds.drift_bounds`)."""
    return thresholds.drift_bounds(model or None)


def meaning(cosine: float, bounds: tuple[float, float]) -> float:
    """A cosine on the keyword-coverage scale: piecewise linear through ``(floor, 0)``,
    ``(covered, COVERED)`` and ``(1, 1)``."""
    floor, covered = bounds
    if cosine <= floor:
        return 0.0
    if cosine < covered:
        return COVERED * (cosine - floor) / (covered - floor)
    return min(COVERED + (1 - COVERED) * (cosine - covered) / (1 - covered), 1.0)


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
    return METHOD_SEMANTIC.format(bound=round(similarity_bounds(model)[1], 2), model=model)
