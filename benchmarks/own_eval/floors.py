"""Relevance floors under test: the candidates both evals rank, with what each floor rule needs.

Used by ``benchmarks/eval.py`` (DevBench) and ``benchmarks/own_eval/run.py``. Each question is
ranked once without a floor; the rules then keep or drop each candidate from its features, so one
run gives the whole calibration table (answerable questions still answered against negatives
answered, per rule and threshold).

Hook candidates (keywords only, the UserPromptSubmit ranking: its best 12, no floor) carry the
relevance the hook uses (:func:`agentctx.retrieval.relevance`, the prompt's ten heaviest terms as
denominator), the same share over all the prompt's terms, the number of distinct terms matched, the
matched weight in units of the store's rarest term, and the BM25 relevance. ``ctx_search``
candidates (the hybrid ranking, no floor) carry their cosine similarity to the query and their
keyword relevance. Rule names are the ones the reports print.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from agentctx import hybrid, retrieval
from agentctx.hooks import prompt

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    import sqlean

    from agentctx.embed import Embedder
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
    """One hit of ``ctx_search``'s hybrid ranking: cosine similarity and keyword relevance."""

    id: str
    similarity: float | None  #: None when the record is outside the vector ranking
    relevance: float


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

#: ``ctx_search`` floors tried: (cosine floor or None, keyword relevance that keeps a hit below it).
SEARCH_RULES: list[tuple[float | None, float]] = [
    (None, 0.0),
    *[(s, k) for s in (0.25, 0.28, 0.3, 0.32, 0.35) for k in (0.3, 0.4, 0.5, 0.6)],
]


def search_rule_name(similarity: float | None, keyword: float) -> str:
    """How the reports name a ``ctx_search`` rule."""
    if similarity is None:
        return "no floor"
    return f"cosine ≥ {similarity:g} or relevance ≥ {keyword:g}"


def hook_candidates(ctx: HookContext, conn: sqlean.Connection, text: str) -> list[HookCandidate]:
    """The hook's ranking for ``text`` without a floor, with each record's features."""
    terms = retrieval.query_terms(text)
    if not terms:
        return []
    rows = prompt._search(ctx, conn, terms, (), floor=0.0)
    if not rows:
        return []
    sql, params = retrieval.term_counts_sql(terms)
    counts = list(conn.execute(sql, params).fetchone())
    chosen = retrieval.select_terms(terms, counts)
    total = int(conn.execute(retrieval.RECORD_TOTAL_SQL).fetchone()[0])
    weights, denominator = retrieval.relevance_weights(terms, counts, chosen, total)
    every = [w for t, c, w in zip(terms, counts, retrieval.term_weights(counts, total), strict=True)
             if t in weights or c == 0]  # fmt: skip
    unit = retrieval.term_weights([1], total)[0]
    sql, params = retrieval.term_hits_sql(chosen, [row["id"] for row in rows])
    found = retrieval.matched_terms(chosen, conn.execute(sql, params).fetchall())
    out = []
    for row in rows:
        matched = found.get(row["id"], set())
        mass = sum(weights[t] for t in matched)
        out.append(
            HookCandidate(
                id=row["id"],
                relevance=retrieval.relevance(matched, weights, denominator),
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
    store: Store, query: SearchQuery, embedder: Embedder
) -> list[SearchCandidate]:
    """``ctx_search``'s hybrid ranking without a floor (every fused hit), with its features."""
    ranked = await hybrid.hybrid_search(store, query, embedder, floor=None)
    assert ranked.mode == "hybrid", ranked
    wide = replace(query, limit=max(ranked.considered, query.limit))
    every = await hybrid.hybrid_search(store, wide, embedder, floor=None)
    vector = await embedder.embed_query(query.text)
    nearest = await hybrid.vector_ranking(store, vector, query, hybrid.VECTOR_MAX)
    similarity = {record.id: sim for record, sim in nearest}
    ids = [hit.record.id for hit in every.hits]
    relevance = await hybrid.KeywordJudge(store, query.text).relevance(ids)
    return [SearchCandidate(i, similarity.get(i), relevance.get(i, 0.0)) for i in ids]


def search_kept(
    candidates: Sequence[SearchCandidate], similarity: float | None, keyword: float
) -> list[str]:
    """The ids a ``ctx_search`` rule keeps, in rank order."""
    if similarity is None:
        return [c.id for c in candidates]
    return [
        c.id
        for c in candidates
        if (c.similarity is not None and c.similarity >= similarity) or c.relevance >= keyword
    ]
