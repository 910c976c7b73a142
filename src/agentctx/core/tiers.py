"""Meaning beside keywords, and tiers instead of all or nothing: what a prompt gets (issue 25).

One copy of the rules for the UserPromptSubmit hook and ``agentctx search --explain``. Standard
library only.

Candidates: the keyword search's (:func:`agentctx.core.search.for_prompt`: the records that pass
the relevance floor) and the prompt's nearest records by meaning (the session's MCP server lends
its model: :mod:`agentctx.core.meaning`). A record the server names is read again here with the
search's own filters (:func:`agentctx.core.search.filters`: the project's and the global records,
current only, not shown yet in the session), so the server can never bring in a record the rules
keep out. The two lists are fused by reciprocal rank (:func:`agentctx.core.search.rrf`).

Tiers (:func:`tier`), with the record's cosine to the prompt when the server gave one:

* **whole** -- injected in full, as before: a keyword match whose meaning agrees (cosine at least
  :data:`AGREE_COSINE`), one that holds every distinctive word of the prompt
  (relevance ≥ :data:`WHOLE_RELEVANCE`), or a record close in meaning (:data:`STRONG_COSINE`);
* **line** -- a possible match, one line: type, title, age and a handle (:func:`handle`) that
  ``ctx_get``, ``agentctx show`` and the dashboard accept: a keyword match far in meaning, or a
  record fairly close in meaning (:data:`POSSIBLE_COSINE`) that no keyword found;
* nothing below that.

Without meaning (no server, a server still loading, an answer past the deadline) every keyword
match is whole: the keyword path of before, unchanged. A prompt with too little to search on
(:func:`agentctx.core.search.content`) gets nothing in either case.

The ledger: a whole record is shown, and never again in the session; a line only mentions it, so
it may still come whole later when a prompt matches it strongly (it is not offered as a line twice).
The thresholds are MiniLM's cosines (the default model), chosen on the precision eval's tuning part
(docs/retrieval.md, "Tiers").
"""

from __future__ import annotations

from agentctx.core import plan, search
from agentctx.core.schema import RECORD_COLUMNS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from typing import Any

    from agentctx.core.plan import Plan

WHOLE = "whole"
LINE = "line"
NONE = "none"
#: A keyword match is injected whole when its meaning agrees at least this much.
AGREE_COSINE = 0.5
#: A keyword match below :data:`AGREE_COSINE` is a possible match (a line) from this cosine.
KEYWORD_LINE_COSINE = 0.4
#: A keyword match holding this share of the prompt's weight is whole whatever its cosine.
WHOLE_RELEVANCE = 0.99
#: A record found by meaning alone is whole from this cosine, a possible match (a line) from the
#: next (the same value: the tuning part found no cosine band worth a line for meaning alone).
STRONG_COSINE = 0.55
POSSIBLE_COSINE = 0.55
#: A meaning-only candidate must be within this of the best cosine of the prompt (1.0: off; the
#: tuning sweep found no band that helped, docs/retrieval.md).
COSINE_BAND = 1.0
#: At most this many entries (whole and lines together) per prompt.
MAX_ENTRIES = 3
#: Characters of a record id a line shows as its handle (the id's random end).
HANDLE_CHARS = 8
MIN_HANDLE = 6
_COLUMNS_SQL = ", ".join(f"r.{name}" for name in RECORD_COLUMNS)


class Candidate:
    """One candidate of a prompt: the record row, its keyword relevance and rank (None: keywords
    did not keep it), its cosine (None: no meaning for it), the fused score, its tier and why."""

    __slots__ = ("cosine", "fused", "keyword_rank", "relevance", "row", "tier", "why")

    def __init__(self, row: Any) -> None:
        self.row = row
        self.relevance: float | None = None
        self.keyword_rank: int | None = None
        self.cosine: float | None = None
        self.fused = 0.0
        self.tier = NONE
        self.why = ""

    @property
    def id(self) -> str:
        return str(self.row["id"])


class Selection:
    """What a prompt gets: the candidates in order (``entries`` the ones injected), whether
    meaning took part, and why the keyword search degraded, if it did."""

    __slots__ = ("candidates", "degraded", "entries", "meaning", "thin")

    def __init__(self) -> None:
        self.candidates: list[Candidate] = []
        self.entries: list[Candidate] = []
        self.meaning = False
        self.degraded: str | None = None
        self.thin = False


def tier(candidate: Candidate, *, meaning: bool, best_cosine: float | None) -> tuple[str, str]:
    """The tier of one candidate and why (one phrase)."""
    cos = candidate.cosine
    relevance = candidate.relevance
    if candidate.keyword_rank is not None:
        if not meaning:
            return WHOLE, "keyword match (no meaning available: keywords alone)"
        if relevance is not None and relevance >= WHOLE_RELEVANCE:
            return WHOLE, f"every distinctive word of the prompt (relevance {relevance:.2f})"
        if cos is not None and cos >= AGREE_COSINE:
            return WHOLE, f"keyword match, meaning agrees (cosine {cos:.2f} ≥ {AGREE_COSINE:g})"
        shown = "not among the nearest" if cos is None else f"cosine {cos:.2f} < {AGREE_COSINE:g}"
        if cos is None or cos < KEYWORD_LINE_COSINE:
            return NONE, f"keyword match, far in meaning ({shown})"
        return LINE, f"keyword match, not close in meaning ({shown})"
    if cos is None:
        return NONE, "no signal"
    if best_cosine is not None and cos < best_cosine - COSINE_BAND:
        return (
            NONE,
            f"cosine {cos:.2f} is more than {COSINE_BAND:g} below the best ({best_cosine:.2f})",
        )
    if cos >= STRONG_COSINE:
        return WHOLE, f"close in meaning (cosine {cos:.2f} ≥ {STRONG_COSINE:g})"
    if cos >= POSSIBLE_COSINE:
        return LINE, f"possible match by meaning (cosine {cos:.2f} ≥ {POSSIBLE_COSINE:g})"
    return NONE, f"cosine {cos:.2f} is below {POSSIBLE_COSINE:g}"


def meaning_rows(
    ids: Sequence[str], project_id: str | None, exclude_ids: Iterable[str]
) -> Plan[list[Any]]:
    """The rows of the records the server named that the prompt's rules allow: the project's and
    the global records, current, not excluded (the keyword search's own filters)."""
    if not ids:
        return []
    where, params = search.filters(
        search.scope_projects(project_id, "all"), (), None, False, exclude_ids
    )
    marks = ", ".join("?" * len(ids))
    # The ids first, by the primary key (materialized: otherwise the planner walks the project's
    # index instead, every record of the project: 40 ms at 20K records), then the filters.
    found: list[Any] = yield plan.rows(
        f"WITH named AS MATERIALIZED (SELECT * FROM records WHERE id IN ({marks})) "
        f"SELECT {_COLUMNS_SQL}, 0.0 AS rank FROM named AS r WHERE {where}",
        [*ids, *params],
    )
    return found


def select(
    terms: Sequence[str],
    project_id: str | None,
    *,
    exclude_ids: Iterable[str] = (),
    mentioned: Iterable[str] = (),
    floor: float | Callable[[], float] = 0.0,
    neighbours: Sequence[tuple[str, float]] | None = None,
    found: search.Found | None = None,
) -> Plan[Selection]:
    """The prompt's candidates fused and tiered, and the entries to inject (at most
    :data:`MAX_ENTRIES`, whole ones first). ``neighbours``: the server's ``(id, cosine)`` pairs, or
    None without meaning; ``mentioned``: records offered as a line earlier in the session (not
    offered as a line again); ``found``: the keyword search already run (else it runs here)."""
    excluded = set(exclude_ids)
    if found is None:
        found = yield from search.for_prompt(terms, project_id, exclude_ids=excluded, floor=floor)
    result = Selection()
    result.degraded = found.degraded
    result.thin = found.thin
    if found.thin:
        return result
    result.meaning = neighbours is not None
    by_id: dict[str, Candidate] = {}
    for rank, (row, _score) in enumerate(found.hits, start=1):
        candidate = Candidate(row)
        candidate.keyword_rank = rank
        if found.relevance is not None:
            candidate.relevance = found.relevance.get(candidate.id)
        by_id[candidate.id] = candidate
    cosines = {rid: cos for rid, cos in neighbours or () if rid not in excluded}
    new = [rid for rid in cosines if rid not in by_id]
    if new:
        for row in (yield from meaning_rows(new, project_id, excluded)):
            by_id[str(row["id"])] = Candidate(row)
    for rid, candidate in by_id.items():
        candidate.cosine = cosines.get(rid)
    keyword_order = [c.id for c in sorted(
        (c for c in by_id.values() if c.keyword_rank is not None), key=lambda c: c.keyword_rank or 0
    )]  # fmt: skip
    meaning_order = [rid for rid, _cos in sorted(cosines.items(), key=lambda p: (-p[1], p[0]))
                     if rid in by_id]  # fmt: skip
    fused = dict(search.rrf([keyword_order, meaning_order]))
    best = max((by_id[rid].cosine or 0.0 for rid in meaning_order), default=None)
    for candidate in by_id.values():
        candidate.fused = fused.get(candidate.id, 0.0)
        candidate.tier, candidate.why = tier(candidate, meaning=result.meaning, best_cosine=best)
    order = {WHOLE: 0, LINE: 1, NONE: 2}
    result.candidates = sorted(by_id.values(), key=lambda c: (order[c.tier], -c.fused, c.id))
    seen_lines = set(mentioned)
    for candidate in result.candidates:
        if len(result.entries) >= MAX_ENTRIES or candidate.tier == NONE:
            break
        if candidate.tier == LINE and candidate.id in seen_lines:
            candidate.why += "; offered as a line earlier in the session"
            continue
        result.entries.append(candidate)
    return result


def handle(record_id: str) -> str:
    """A record's short handle: the last :data:`HANDLE_CHARS` characters of its id, lower case
    (ULIDs end in 80 random bits; lower case costs Claude fewer tokens, and handles match
    case-insensitively)."""
    return record_id[-HANDLE_CHARS:].lower()


def resolve(handle_text: str) -> Plan[str]:
    """The full id of a record named by its id or by a unique prefix or suffix of it (at least
    :data:`MIN_HANDLE` characters, any case); a one-line error when none or several match."""
    from agentctx.core.errors import NotFoundError, ValidationError

    text = handle_text.strip()
    exact = yield plan.one(
        "SELECT id FROM records WHERE id = ? UNION ALL SELECT id FROM records_archive WHERE id = ?",
        (text, text),
    )
    if exact is not None:
        return str(exact[0])
    if len(text) < MIN_HANDLE or not text.isalnum():
        raise NotFoundError(
            f"no record with id {text!r} (a handle needs at least {MIN_HANDLE} letters or digits "
            "of the id)"
        )
    upper = text.upper()
    found = yield plan.rows(
        "SELECT id FROM records WHERE id LIKE ? OR id LIKE ? UNION "
        "SELECT id FROM records_archive WHERE id LIKE ? OR id LIKE ? LIMIT 4",
        (upper + "%", "%" + upper) * 2,
    )
    ids = sorted(str(row[0]) for row in found)
    if not ids:
        raise NotFoundError(f"no record id starts or ends with {text!r}")
    if len(ids) > 1:
        listed = ", ".join(ids[:3]) + (", ..." if len(ids) > 3 else "")
        raise ValidationError(
            f"the handle {text!r} matches several records ({listed}): give more characters or the full id"
        )
    return ids[0]
