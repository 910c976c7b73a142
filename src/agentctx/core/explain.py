"""Why the prompt hook injects what it does: ``agentctx search --explain`` and, with
``AGENTCTX_DEBUG``, one line per prompt in ``hooks.log``.

It runs the hook's own rules (:func:`agentctx.core.search.for_prompt`, :mod:`agentctx.core.tiers`,
:func:`agentctx.core.inject.render_tiers`) and says for each candidate which tier it got and why.
A concept of its own, apart from the rendering in :mod:`agentctx.core.inject`: a prompt that is
not being explained does not load it.
"""

from __future__ import annotations

from agentctx.core import search, tiers
from agentctx.core.inject import TOP_K, render_tiers

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Collection, Sequence
    from typing import Any

    from agentctx.core.plan import Plan


def explain(
    text: str,
    project_id: str,
    floor: float,
    shown: Collection[str] = (),
    neighbours: Sequence[tuple[str, float]] | None = None,
) -> Plan[dict[str, Any]]:
    """What the hook injects for ``text`` in a project, and why each candidate is in or out.

    ``{"terms": [{"term", "records", "searched", "specificity"}], "floor", "content", "injected":
    [ids], "candidates": [{"id", "type", "title", "bm25", "score", "relevance", "verdict"}]}``,
    candidates in score order (the hook's own order is relevance first: ``injected``).
    ``shown``: ids this session was shown already (left out before ranking, as the hook does).
    ``neighbours``: the prompt's nearest records by meaning, ``(id, cosine)`` (None: keywords
    alone); each candidate then also has its ``cosine``, ``fused`` score and ``tier``
    (:mod:`agentctx.core.tiers`: whole, line or none) and ``lines`` lists the one-line entries.
    """
    terms = search.query_terms(text)
    result: dict[str, Any] = {
        "terms": [],
        "floor": floor,
        "injected": [],
        "lines": [],
        "meaning": neighbours is not None,
        "candidates": [],
    }
    if not terms:
        return result
    total = yield from search.record_total()
    counts = yield from search.term_counts(terms, total)
    chosen = search.select_terms(terms, counts)
    result["terms"] = [
        {
            "term": t,
            "records": n,
            "searched": t in chosen,
            "specificity": round(search.specificity(t), 3),
        }
        for t, n in zip(terms, counts, strict=True)
    ]
    hook = yield from search.for_prompt(terms, project_id, exclude_ids=shown, floor=floor)
    picked = yield from tiers.select(
        terms, project_id, exclude_ids=shown, floor=floor, neighbours=neighbours, found=hook
    )
    _text, injected, lines = render_tiers(picked.entries)
    result["injected"] = injected
    result["lines"] = lines
    tiered = {c.id: c for c in picked.candidates}
    result["content"] = round(search.content(terms), 3)
    found = yield from search.for_prompt(terms, project_id, exclude_ids=shown, floor=0.0)
    ids = [str(row["id"]) for row, _score in found.hits]
    if found.degraded is None:
        exact = yield from search.relevances(terms, ids)
    else:  # the LIKE fallback has no term weights: the hook applies no floor
        exact = dict.fromkeys(ids, 1.0)
    kept = {str(row["id"]) for row, _score in hook.hits}
    best = max(exact.values(), default=0.0)
    for row, score in found.hits:
        record_id = str(row["id"])
        pick = tiered.get(record_id)
        if record_id in injected:
            verdict = f"injected whole: {pick.why}" if pick else "injected"
        elif record_id in lines:
            verdict = f"offered as a line: {pick.why}" if pick else "offered as a line"
        elif hook.thin:
            verdict = (
                f"left out: the prompt has too little to search on (content "
                f"{result['content']:g} < {search.MIN_CONTENT:g})"
            )
        elif exact[record_id] < search.record_floor(floor, row):
            level = search.record_floor(floor, row)
            cued = " (raised: it has retrieval cues)" if level != floor else ""
            verdict = (
                f"left out: relevance {exact[record_id]:.2f} is below the floor {level:g}{cued}"
            )
        elif exact[record_id] < search.RELATIVE_FLOOR * best:
            verdict = (
                f"left out: relevance {exact[record_id]:.2f} is below "
                f"{search.RELATIVE_FLOOR:g} of the best candidate's ({best:.2f})"
            )
        elif pick is not None and pick.tier == tiers.NONE:
            verdict = f"left out: {pick.why}"
        elif record_id not in kept or len(injected) >= TOP_K:
            verdict = f"left out: {TOP_K} more relevant records are taken"
        else:
            verdict = "left out: it does not fit the token or character cap"
        result["candidates"].append(
            {
                "id": record_id,
                "type": row["type"],
                "title": row["title"],
                "bm25": round(-float(row["rank"]), 3),
                "score": round(score, 3),
                "relevance": round(exact[record_id], 3),
                "cosine": _rounded(pick.cosine if pick else dict(neighbours or ()).get(record_id)),
                "fused": round(pick.fused, 4) if pick else 0.0,
                "tier": pick.tier if pick else tiers.NONE,
                "verdict": verdict,
            }
        )
    listed = {c["id"] for c in result["candidates"]}
    for pick in picked.candidates:  # found by meaning alone
        if pick.id in listed:
            continue
        if pick.id in injected:
            verdict = f"injected whole: {pick.why}"
        elif pick.id in lines:
            verdict = f"offered as a line: {pick.why}"
        else:
            verdict = f"left out: {pick.why}"
        result["candidates"].append(
            {
                "id": pick.id,
                "type": pick.row["type"],
                "title": pick.row["title"],
                "bm25": 0.0,
                "score": 0.0,
                "relevance": 0.0,
                "cosine": _rounded(pick.cosine),
                "fused": round(pick.fused, 4),
                "tier": pick.tier,
                "verdict": verdict,
            }
        )
    if found.degraded is not None:
        result["degraded"] = found.degraded
    return result


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
