"""Relevance floors under test: the candidates both evals rank, with what each floor rule needs.

Used by ``benchmarks/eval.py`` (DevBench) and ``benchmarks/own_eval/run.py``. Each question is
ranked once without a floor; the rules then keep or drop each candidate from its features, so one
run gives the whole calibration table (answerable questions still answered against negatives
answered, per rule and threshold).

Hook candidates (keywords only, the UserPromptSubmit ranking: its best 12, no floor) carry the
relevance the hook uses (:func:`agentctx.core.search.relevance`, the prompt's ten heaviest terms as
denominator), the same share over all the prompt's terms, the number of distinct terms matched, the
matched weight in units of the store's rarest term, and the BM25 relevance. ``ctx_search``
candidates (the hybrid ranking, no floor) carry their cosine similarity to the query, their
keyword relevance and the query's *background*: its cosine similarity to every stored vector.

Two kinds of cosine rule are tried for ``ctx_search``: an absolute floor (what ``hybrid`` applies:
a threshold measured per model) and a relative one, meant for a model without a measured floor:
a hit stands out from the query's background when its similarity is at least ``k`` standard
deviations above the background's mean (no floor for a store of fewer than
:data:`BACKGROUND_MIN` vectors). A relative rule is invariant to an affine rescaling of a
model's cosines; each rule is also tried on cosines squeezed into a bge-like range
(:func:`squeezed`: ``0.55 + 0.45·s``), where an absolute threshold no longer means what it did.
Rule names are the ones the reports print.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from agentctx.core import search
from agentctx.embeddings import models, vecstore
from agentctx.hooks import prompt
from agentctx.retrieval import hybrid

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    import sqlean

    from agentctx.hooks.runner import HookContext
    from agentctx.store import SearchQuery, Store


@dataclass(frozen=True, slots=True)
class HookCandidate:
    """One record of the hook's ranking and the features the floor rules read."""

    id: str
    relevance: float  #: the hook's measure: share of the ten heaviest terms' weight
    relevance_all: float  #: the same share over all of the prompt's terms
    terms: int  #: distinct prompt terms matched
    rare_terms: float  #: matched weight in units of the weight of a term found once
    bm25: float  #: -bm25(), higher is better


@dataclass(frozen=True, slots=True)
class SearchCandidate:
    """One hit of ``ctx_search``'s hybrid ranking: cosine similarity, keyword relevance and the
    query's background (one tuple shared by the query's candidates)."""

    id: str
    similarity: float | None  #: None when the record is outside the vector ranking
    relevance: float
    background: tuple[float, ...] = ()  #: the query's cosine similarity to every stored vector


HookRule = tuple[str, "Callable[[HookCandidate], bool]"]


def _at_least(feature: str, threshold: float) -> Callable[[HookCandidate], bool]:
    return lambda candidate: float(getattr(candidate, feature)) >= threshold


#: The chosen rule's thresholds (``retrieval.min_relevance``) first, then the alternatives tried.
HOOK_RULES: list[HookRule] = [
    ("no floor", lambda candidate: True),
    *[
        (f"relevance ≥ {t:g}", _at_least("relevance", t))
        for t in (0.05, 0.1, 0.12, 0.15, 0.18, 0.2, 0.25, 0.3)
    ],
    *[(f"share of all terms ≥ {t:g}", _at_least("relevance_all", t)) for t in (0.1, 0.15, 0.2)],
    ("≥ 2 distinct terms matched", _at_least("terms", 2)),
    *[(f"matched weight ≥ {t:g} rarest term", _at_least("rare_terms", t)) for t in (0.8, 1.0)],
    *[(f"BM25 ≥ {t:g}", _at_least("bm25", t)) for t in (3.0, 5.0)],
]

#: Fewer stored vectors than this make no background: the relative rule keeps every hit.
BACKGROUND_MIN = 20
#: The affine squeeze that mimics a bge-like cosine range: ``s -> SQUEEZE[0] + SQUEEZE[1]·s``.
SQUEEZE = (0.55, 0.45)


@dataclass(frozen=True, slots=True)
class SearchRule:
    """A ``ctx_search`` floor under test: a hit is kept when its cosine similarity passes the
    ``kind`` test at ``threshold`` or its keyword relevance reaches ``keyword``.

    ``cosine``: similarity ≥ threshold; ``background``: similarity ≥ the background's mean plus
    ``threshold`` standard deviations; ``none``: every hit. ``squeeze``: judged on squeezed cosines.
    """

    kind: Literal["none", "cosine", "background"]
    threshold: float = 0.0
    keyword: float = 0.0
    squeeze: bool = False

    @property
    def name(self) -> str:
        """How the reports name the rule."""
        if self.kind == "none":
            return "no floor"
        test = f"cosine ≥ {self.threshold:g}"
        if self.kind == "background":
            test = f"background z ≥ {self.threshold:g}"
        squeezed = f", cosines squeezed ({SQUEEZE[0]:g} + {SQUEEZE[1]:g}·s)" if self.squeeze else ""
        return f"{test} or relevance ≥ {self.keyword:g}{squeezed}"


#: The chosen rule (MiniLM's measured floor) is ``MINILM_RULE``; the others were tried.
MINILM_RULE = SearchRule("cosine", 0.30, 0.2)
#: The relative rule the reports discuss (the best of its kind on both evals).
RELATIVE_RULE = SearchRule("background", 2.2, 0.4)
SEARCH_RULES: list[SearchRule] = [
    SearchRule("none"),
    *[
        SearchRule("cosine", s, k)
        for s in (0.25, 0.28, 0.3, 0.32, 0.35)
        for k in (0.2, 0.3, 0.4, 0.5, 0.6)
    ],
    *[SearchRule("background", z, 0.4) for z in (1.8, 2.0, 2.2, 2.4, 2.6, 3.0, 3.5, 4.0)],
    replace(MINILM_RULE, squeeze=True),
    replace(RELATIVE_RULE, squeeze=True),
]


def squeezed(candidate: SearchCandidate) -> SearchCandidate:
    """The candidate with its cosines (similarity and background) mapped by :data:`SQUEEZE`."""
    a, b = SQUEEZE
    sim = None if candidate.similarity is None else a + b * candidate.similarity
    return replace(
        candidate, similarity=sim, background=tuple(a + b * x for x in candidate.background)
    )


def background_floor(background: Sequence[float], z: float) -> float | None:
    """The cosine a hit must reach to stand ``z`` standard deviations above the background's mean;
    None (no floor) below :data:`BACKGROUND_MIN` vectors or for a background without spread."""
    if len(background) < BACKGROUND_MIN:
        return None
    spread = statistics.pstdev(background)
    if spread <= 0:
        return None
    return statistics.fmean(background) + z * spread


def hook_candidates(ctx: HookContext, conn: sqlean.Connection, text: str) -> list[HookCandidate]:
    """The hook's ranking for ``text`` without a floor, with each record's features."""
    terms = search.query_terms(text)
    if not terms:
        return []
    rows = prompt._search(ctx, conn, terms, (), floor=0.0)
    if not rows:
        return []
    sql, params = search.term_counts_sql(terms)
    counts = list(conn.execute(sql, params).fetchone())
    chosen = search.select_terms(terms, counts)
    total = int(conn.execute(search.RECORD_TOTAL_SQL).fetchone()[0])
    weights, denominator = search.relevance_weights(terms, counts, chosen, total)
    every = [w for t, c, w in zip(terms, counts, search.term_weights(counts, total), strict=True)
             if t in weights or c == 0]  # fmt: skip
    unit = search.term_weights([1], total)[0]
    sql, params = search.term_hits_sql(chosen, [row["id"] for row in rows])
    found = search.matched_terms(chosen, conn.execute(sql, params).fetchall())
    out = []
    for row in rows:
        matched = found.get(row["id"], set())
        mass = sum(weights[t] for t in matched)
        out.append(
            HookCandidate(
                id=row["id"],
                relevance=search.relevance(matched, weights, denominator),
                relevance_all=mass / sum(every) if every else 1.0,
                terms=len(matched),
                rare_terms=mass / unit,
                bm25=-float(row["rank"]),
            )
        )
    return out


def hook_kept(candidates: Sequence[HookCandidate], rule: HookRule) -> list[str]:
    """The ids a hook rule keeps, in rank order."""
    return [c.id for c in candidates if rule[1](c)]


async def search_candidates(
    store: Store, query: SearchQuery, embedder: models.Embedder
) -> list[SearchCandidate]:
    """``ctx_search``'s hybrid ranking without a floor (every fused hit), with its features."""
    ranked = await hybrid.hybrid_search(store, query, embedder, floor=None)
    assert ranked.mode == "hybrid", ranked
    wide = replace(query, limit=max(ranked.considered, query.limit))
    every = await hybrid.hybrid_search(store, wide, embedder, floor=None)
    vector = await embedder.embed_query(query.text)
    nearest = await hybrid.vector_ranking(store, vector, query, hybrid.VECTOR_MAX)
    similarity = {record.id: sim for record, sim in nearest}
    background = tuple(sim for _, sim in await vecstore.nearest(store, vector, hybrid.VECTOR_MAX))
    ids = [hit.record.id for hit in every.hits]
    relevance = await hybrid.KeywordJudge(store, query.text).relevance(ids)
    return [SearchCandidate(i, similarity.get(i), relevance.get(i, 0.0), background) for i in ids]


def search_kept(candidates: Sequence[SearchCandidate], rule: SearchRule) -> list[str]:
    """The ids a ``ctx_search`` rule keeps (the candidates of one query), in rank order."""
    if rule.kind == "none":
        return [c.id for c in candidates]
    judged = [squeezed(c) for c in candidates] if rule.squeeze else list(candidates)
    floor = rule.threshold
    if rule.kind == "background":
        relative = background_floor(judged[0].background, rule.threshold) if judged else None
        if relative is None:
            return [c.id for c in judged]
        floor = relative
    return [
        c.id
        for c in judged
        if (c.similarity is not None and c.similarity >= floor) or c.relevance >= rule.keyword
    ]
