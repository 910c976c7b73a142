"""The digest's order of decisions and conventions: reciprocal rank fusion of keyword and vector rank.

A digest has no query, so the ranking asks what the project is working on now: its **focus** is the
project's current handovers (one per checkout: parallel worktrees each add their task) and the
:data:`FOCUS_RECENT` most recent other records of the project. Two rankings
of the current decisions and conventions are fused with :func:`agentctx.core.search.rrf`:

- keyword rank: FTS5 BM25 of each decision against the focus's terms (``search.query_terms``);
- vector rank: cosine similarity of each decision's stored vector to the centroid of the focus
  records' stored vectors (no model call: consolidation embedded them already).

Without vectors the keyword rank stands alone; with no focus at all nothing is ranked and the digest
keeps its default order (pinned, confidence, score). The result is kept in ``records.digest_rank``
(1 = first; NULL = unranked), which :mod:`agentctx.retrieval.digest` orders by after pinning, so a digest
rebuilt by the SessionStart hook after a write keeps the same order. Records added after the last
consolidation are unranked and follow the ranked ones until the next run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from agentctx.core import search
from agentctx.embeddings import vecstore

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from agentctx.store import Store

FOCUS_RECENT = 10
#: How many decisions and conventions one ranking considers (the digest shows far fewer).
CANDIDATES = 500

_CANDIDATES_SQL = """
SELECT id FROM records WHERE project_id = ? AND type IN ('decision', 'convention')
  AND superseded_at IS NULL ORDER BY pinned DESC, score DESC, valid_from DESC, id LIMIT ?
"""
_FOCUS_SQL = """
SELECT id, title, body FROM records WHERE project_id = ? AND superseded_at IS NULL
  AND (type = 'handover' OR id IN (
    SELECT id FROM records WHERE project_id = ? AND superseded_at IS NULL
      AND type NOT IN ('handover', 'profile', 'decision', 'convention')
    ORDER BY valid_from DESC, id DESC LIMIT ?))
"""


async def rank_decisions(store: Store, project_id: str) -> list[str]:
    """Rank the project's current decisions and conventions; store and return the order."""
    candidates = [str(r[0]) for r in await store.rows(_CANDIDATES_SQL, (project_id, CANDIDATES))]
    focus = await store.rows(_FOCUS_SQL, (project_id, project_id, FOCUS_RECENT))
    rankings: list[list[str]] = []
    if candidates and focus:
        keyword = await _keyword_rank(store, project_id, focus)
        if keyword:
            rankings.append(keyword)
        vector = await _vector_rank(store, candidates, [str(r["id"]) for r in focus])
        if vector:
            rankings.append(vector)
    allowed = set(candidates)
    ranked = [item for item, _ in search.rrf(rankings) if item in allowed]
    async with store.transaction() as tx:
        await tx.execute(
            "UPDATE records SET digest_rank = NULL WHERE project_id = ? AND digest_rank IS NOT NULL",
            (project_id,),
        )
        for rank, record_id in enumerate(ranked, start=1):
            await tx.execute("UPDATE records SET digest_rank = ? WHERE id = ?", (rank, record_id))
    return ranked


async def _keyword_rank(store: Store, project_id: str, focus: list[Any]) -> list[str]:
    if not store.has_fts:
        return []
    text = " ".join(f"{row['title']} {row['body']}" for row in focus)
    match = search.fts_query(search.query_terms(text))
    if match is None:
        return []
    rows = await store.rows(
        "SELECT r.id FROM records_fts JOIN records r ON r.seq = records_fts.rowid "
        "WHERE records_fts MATCH ? AND r.project_id = ? AND r.superseded_at IS NULL "
        "AND r.type IN ('decision', 'convention') ORDER BY bm25(records_fts, ?, ?, ?), r.id "
        "LIMIT ?",
        (match, project_id, *search.BM25_WEIGHTS, CANDIDATES),
    )
    return [str(r[0]) for r in rows]


async def _vector_rank(store: Store, candidates: list[str], focus_ids: list[str]) -> list[str]:
    vectors = await vecstore.load_vectors(store, [*candidates, *focus_ids])
    anchors = [vectors[i] for i in focus_ids if i in vectors]
    scored = [i for i in candidates if i in vectors]
    if not anchors or not scored:
        return []
    centroid: NDArray[np.float32] = np.mean(np.stack(anchors), axis=0)
    norm = float(np.linalg.norm(centroid))
    if norm == 0.0:
        return []
    sims = np.stack([vectors[i] for i in scored]) @ (centroid / norm)
    order = sorted(range(len(scored)), key=lambda k: (-float(sims[k]), scored[k]))
    return [scored[k] for k in order]
