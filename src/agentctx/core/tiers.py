"""Meaning beside keywords, and tiers instead of all or nothing: what a prompt gets (issue 25).

One copy of the rules for the UserPromptSubmit hook and ``agentctx search --explain``. Standard
library only.

Candidates: the keyword search's (:func:`agentctx.core.search.for_prompt`: the records that pass
the relevance floor) and the prompt's nearest records by meaning (the session's MCP server lends
its model: :mod:`agentctx.core.meaning`). A record the server names is read again here with the
search's own filters (:func:`agentctx.core.search.filters`: the project's and the global records,
current only, not shown yet in the session), so the server can never bring in a record the rules
keep out. The two lists are fused by reciprocal rank (:func:`agentctx.core.search.rrf`).

Tiers (:func:`tier`): with meaning, each candidate gets one **evidence score**
(:func:`evidence`), a weighted sum of signals that do not depend on one store's words:

* its cosine on the prompt's own scale: how many standard deviations it stands above the prompt's
  mean cosine to the store's records (the server sends that spread with its neighbours,
  :class:`agentctx.core.meaning.Neighbours`; :data:`DEFAULT_SPREAD` when it does not), and how
  many above the next candidate's; a keyword candidate that is not among the server's nearest
  counts at the lowest cosine the server gave (it is at most that close). No absolute cosine: a
  prompt worded far from the records' words lowers the answer's cosine and the others' alike;
* whether keywords found it, its keyword relevance, its relevance margin over the next keyword
  candidate, and its relevance times the prompt's content (capped): matching every word of a prompt
  that says a lot is stronger than matching the one word of a prompt that says little. A prompt
  with fewer than :data:`MIN_CONTENT_TERMS` content words ("ok flash it", "commit that") gives no
  keyword relevance at all: with one word, every record holding it matches "every word".

The weights (:data:`WEIGHTS`) are a logistic fit of "this candidate answers the prompt" on the
precision eval's tuning part (eleven projects, six of them written blind by authors who saw no
rule); :data:`WHOLE_SCORE` and :data:`LINE_SCORE` were chosen on it for the issue's goals, and
checked leaving one project out at a time, pooled over the blind-written projects apart from the
others (docs/retrieval.md, "Tiers, fourth round").

* **whole** -- injected in full, as before: evidence ≥ :data:`WHOLE_SCORE`;
* **line** -- a possible match, one line: type, title, age and a handle (:func:`handle`) that
  ``ctx_get``, ``agentctx show`` and the dashboard accept: evidence ≥ :data:`LINE_SCORE`;
* nothing below that.

Without meaning (no server, a server still loading, an answer past the deadline) every keyword
match is whole: the keyword path of before, unchanged. A prompt with too little to search on
(:func:`agentctx.core.search.content`) gets nothing in either case.

The ledger: a whole record is shown, and never again in the session; a line only mentions it, so
it may still come whole later when a prompt matches it strongly (it is not offered as a line twice).
"""

from __future__ import annotations

from agentctx.core import meaning, plan, search
from agentctx.core.schema import RECORD_COLUMNS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from typing import Any

    from agentctx.core.plan import Plan

WHOLE = "whole"
LINE = "line"
NONE = "none"
#: The prompt's cosine scale when the server sends none (a server of before): the mean and the
#: standard deviation of a prompt's cosines to a store's records, typical of all-MiniLM-L6-v2, the
#: default model (the precision eval's nine tuning stores: per project, the median over its prompts
#: of the mean 0.07-0.15 and of the deviation 0.07-0.13; docs/retrieval.md, "Tiers, third round").
DEFAULT_SPREAD = (0.10, 0.10)
#: A cosine's distance above the prompt's mean counts in units of this many deviations.
Z_UNIT = 4.0
#: A term at least this specific (:func:`agentctx.core.search.specificity`) is a content word.
CONTENT_TERM = 0.5
#: A prompt with fewer content words than this gives no keyword relevance (one word: every record
#: holding it matches "every word of the prompt").
MIN_CONTENT_TERMS = 2
#: The prompt's content (:func:`agentctx.core.search.content`) counts up to this much.
CONTENT_CAP = 4.0
#: The evidence's weights (docs/retrieval.md, "Tiers, fourth round"): a logistic fit on the tuning
#: part (eleven projects, six written blind; with and without cues), rounded. The fit moves little
#: from the third round's nine projects (each weight by 0-0.3) or from fold to fold leaving one
#: project out (by at most 0.3): what did not generalise was where the scores cut.
WEIGHTS = {
    "bias": -2.9,
    "keyword": 0.7,
    "relevance": 1.3,
    "cosine_z": 0.1,
    "margin_z": 1.2,
    "relevance_margin": 0.9,
    "relevance_content": 1.2,
}
#: Evidence from which a candidate is injected whole, and from which it is offered as one line
#: (fourth round: 0.25 and 0, were 0 and -0.25; a body on a hard negative costs about 300 tokens,
#: and the blind-written projects' hard negatives reach the third round's scores).
WHOLE_SCORE = 0.25
LINE_SCORE = 0.0
#: At most this many entries (whole and lines together) per prompt.
MAX_ENTRIES = 3
_COLUMNS_SQL = ", ".join(f"r.{name}" for name in RECORD_COLUMNS)


class Candidate:
    """One candidate of a prompt: the record row, its keyword relevance and rank (None: keywords
    did not keep it), its cosine (None: no meaning for it), the fused score, its evidence
    (:func:`evidence`; None without meaning), its tier and why."""

    __slots__ = ("cosine", "evidence", "fused", "keyword_rank", "relevance", "row", "tier", "why")

    def __init__(self, row: Any) -> None:
        self.row = row
        self.relevance: float | None = None
        self.keyword_rank: int | None = None
        self.cosine: float | None = None
        self.fused = 0.0
        self.evidence: float | None = None
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


def signals(
    candidates: Sequence[Candidate], terms: Sequence[str], neighbours: Sequence[tuple[str, float]]
) -> list[dict[str, float]]:
    """Each candidate's signals (the keys of :data:`WEIGHTS`, ``bias`` 1) from the prompt's
    ``terms`` and the server's ``neighbours`` (all it gave, nearest first: a full list bounds the
    cosine of a record it left out; its ``spread``, when sent, is the prompt's cosine scale, else
    :data:`DEFAULT_SPREAD`).

    Cosines count on the prompt's own scale, never as absolute values: how many deviations above
    the prompt's mean cosine to the store (``cosine_z``, over :data:`Z_UNIT`), and how many above
    the next candidate (``margin_z``). A prompt worded far from the records' words lowers every
    cosine, the answer's and the others' alike; the distance from the rest does not move as much
    (docs/retrieval.md, "Tiers, third round")."""
    mean, deviation = getattr(neighbours, "spread", None) or DEFAULT_SPREAD
    deviation = max(deviation, 0.01)
    full = len(neighbours) >= meaning.NEIGHBOURS
    unknown = min((cos for _rid, cos in neighbours), default=mean) if full else mean
    words = sum(1 for term in terms if search.specificity(term) >= CONTENT_TERM)
    content = min(search.content(terms), CONTENT_CAP) / CONTENT_CAP
    cosines = [unknown if c.cosine is None else c.cosine for c in candidates]
    keyword = [c.keyword_rank is not None for c in candidates]
    relevances = [
        (c.relevance or 0.0) if keyword[i] and words >= MIN_CONTENT_TERMS else 0.0
        for i, c in enumerate(candidates)
    ]
    found = []
    for i in range(len(candidates)):
        others = cosines[:i] + cosines[i + 1 :]
        other_rel = [r for j, r in enumerate(relevances) if j != i and keyword[j]]
        rel = relevances[i]
        found.append(
            {
                "bias": 1.0,
                "keyword": float(keyword[i]),
                "relevance": rel,
                "cosine_z": (cosines[i] - mean) / deviation / Z_UNIT,
                "margin_z": (cosines[i] - max(others, default=mean)) / deviation,
                "relevance_margin": rel - max(other_rel, default=0.0),
                "relevance_content": rel * content,
            }
        )
    return found


def evidence(
    candidates: Sequence[Candidate], terms: Sequence[str], neighbours: Sequence[tuple[str, float]]
) -> None:
    """Set each candidate's evidence score: its :func:`signals` weighed by :data:`WEIGHTS`."""
    for candidate, found in zip(candidates, signals(candidates, terms, neighbours), strict=True):
        candidate.evidence = sum(WEIGHTS[name] * value for name, value in found.items())


def tier(candidate: Candidate, *, meaning: bool) -> tuple[str, str]:
    """The tier of one candidate and why (one phrase); with meaning, from its evidence."""
    if not meaning or candidate.evidence is None:
        if candidate.keyword_rank is not None:
            return WHOLE, "keyword match (no meaning available: keywords alone)"
        return NONE, "no signal"
    cos = "not among the nearest" if candidate.cosine is None else f"cosine {candidate.cosine:.2f}"
    rel = "" if candidate.relevance is None else f", relevance {candidate.relevance:.2f}"
    signals = f"{cos}{rel}"
    score = candidate.evidence
    if score >= WHOLE_SCORE:
        return WHOLE, f"strong evidence {score:.2f} ≥ {WHOLE_SCORE:g} ({signals})"
    if score >= LINE_SCORE:
        return LINE, f"possible match, evidence {score:.2f} ≥ {LINE_SCORE:g} ({signals})"
    return NONE, f"weak evidence {score:.2f} < {LINE_SCORE:g} ({signals})"


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
    if neighbours is not None:
        evidence(list(by_id.values()), terms, neighbours)
    for candidate in by_id.values():
        candidate.fused = fused.get(candidate.id, 0.0)
        candidate.tier, candidate.why = tier(candidate, meaning=result.meaning)
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
