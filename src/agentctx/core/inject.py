"""What UserPromptSubmit injects: the record blocks within the caps, and why each candidate is in
or out (``agentctx search --explain``).

The hook runs :func:`agentctx.core.search.for_prompt`, then :func:`render`: the best candidates
above the relevance floor, at most :data:`TOP_K` blocks that fit :data:`MAX_TOKENS` and
:data:`MAX_CHARS` together (a block that does not fit is skipped for the next one).
:func:`explain` runs the same steps and keeps every candidate with its signals and the reason it
was left out, so a user can see why a record was (not) injected.
"""

from __future__ import annotations

from agentctx.core import clock, search
from agentctx.core.tokens import estimate_tokens, truncate_to_tokens

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Collection
    from typing import Any

    from agentctx.core.plan import Plan

TOP_K = 3
MAX_TOKENS = 2000
MAX_CHARS = 8000
RECORD_BODY_CHARS = 1500
HEADER = "Relevant records from the agentctx context store (not shown earlier in this session):"


def render(rows: list[Any]) -> tuple[str, list[str]]:
    """Up to three record blocks that fit both caps together, and their ids."""
    used = estimate_tokens(HEADER) + 2
    chars = len(HEADER) + 2
    blocks: list[str] = []
    ids: list[str] = []
    for row in rows:
        if len(blocks) == TOP_K:
            break
        block = format_record(row)
        cost, size = estimate_tokens(block) + 2, len(block) + 2
        if used + cost > MAX_TOKENS or chars + size > MAX_CHARS:
            continue
        used += cost
        chars += size
        blocks.append(block)
        ids.append(row["id"])
    if not blocks:
        return "", []
    return "\n\n".join([HEADER, *blocks]), ids


def format_record(row: Any) -> str:
    """One record as injected: a heading line with type, title, age and id, then the body."""
    age = clock.age_days(row["valid_from"])
    when = "today" if age < 1 else f"{int(age)}d ago"
    notes = [row["type"], when, f"id {row['id']}"]
    if row["confidence"] == "inferred":
        notes.append("inferred, unconfirmed")
    if row["scope"] == "global":
        notes.append("all projects")
    body = truncate_to_tokens(row["body"], 450, RECORD_BODY_CHARS)
    if len(body) < len(row["body"]):
        body += " […]"
    return f"### {row['title']} ({', '.join(notes)})\n{body}"


def explain(
    text: str, project_id: str, floor: float, shown: Collection[str] = ()
) -> Plan[dict[str, Any]]:
    """What the hook injects for ``text`` in a project, and why each candidate is in or out.

    ``{"terms": [{"term", "records", "searched", "specificity"}], "floor", "content", "injected":
    [ids], "candidates": [{"id", "type", "title", "bm25", "score", "relevance", "verdict"}]}``,
    candidates in score order (the hook's own order is relevance first: ``injected``).
    ``shown``: ids this session was shown already (left out before ranking, as the hook does).
    """
    terms = search.query_terms(text)
    result: dict[str, Any] = {"terms": [], "floor": floor, "injected": [], "candidates": []}
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
    _text, injected = render([row for row, _score in hook.hits])
    result["injected"] = injected
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
        if record_id in injected:
            verdict = "injected"
        elif hook.thin:
            verdict = (
                f"left out: the prompt has too little to search on (content "
                f"{result['content']:g} < {search.MIN_CONTENT:g})"
            )
        elif exact[record_id] < floor:
            verdict = f"left out: relevance {exact[record_id]:.2f} is below the floor {floor:g}"
        elif exact[record_id] < search.RELATIVE_FLOOR * best:
            verdict = (
                f"left out: relevance {exact[record_id]:.2f} is below "
                f"{search.RELATIVE_FLOOR:g} of the best candidate's ({best:.2f})"
            )
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
                "verdict": verdict,
            }
        )
    if found.degraded is not None:
        result["degraded"] = found.degraded
    return result
