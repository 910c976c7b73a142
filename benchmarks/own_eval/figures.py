"""The own eval's figures: what :mod:`run` observed, turned into numbers (the JSON results).

The rules behind each number are in :mod:`scoring`; :mod:`report` writes the Markdown around them.
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING, Any

from own_eval import floors, scoring

if TYPE_CHECKING:
    from own_eval.run import Asked, Run

RETRIEVERS = (
    ("hook", "UserPromptSubmit hook: what it injects (≤ 3 records)"),
    ("hook_unfloored", "the hook without the relevance floor (before it)"),
    ("hybrid", "`ctx_search`, hybrid (keywords + MiniLM vectors, RRF), top 3"),
    ("hybrid_unfloored", "`ctx_search`, hybrid without the floor (before it), top 3"),
    ("hybrid_strong", "`ctx_search`, hybrid: only the hits labelled strong, top 3"),
    ("keyword", "`ctx_search`, keyword only (before the model loads), top 3"),
    ("recency", "baseline: the 3 newest records"),
    ("none", "baseline: no memory"),
)


def metrics(run: Run, k: int) -> dict[str, Any]:
    """Every figure of the results, as plain data."""
    items = run.key.by_id()
    last = len(run.scripts)
    strict = scoring.precision_recall(run.matchings)
    lenient = scoring.precision_recall(run.matchings, lenient=True)
    record_of = {item: record for record, item in run.assigned.items()}
    successor_of = {rid: r.superseded_by for rid, r in run.records.items()}
    in_scope = [
        i for i in run.key.items if i.superseded_by and items[i.superseded_by].session <= last
    ]
    checks = [
        s
        for s in scoring.supersessions(run.key, record_of, successor_of)
        if s.old in {i.id for i in in_scope}
    ]
    known = [item for item in run.key.items if item.session <= last]
    every = scoring.answers_of(
        [_produced(run, r) for r in run.records.values()], run.assigned, known
    )
    expected_pairs = {(record_of.get(c.old), record_of.get(c.new)) for c in checks}
    other = []
    for rid, record in sorted(run.records.items()):
        if record.superseded_by is None or record.type == "handover":
            continue
        if (rid, record.superseded_by) in expected_pairs:
            continue
        same = every.get(rid, frozenset()) & every.get(record.superseded_by, frozenset())
        other.append(
            {
                "old": record.title,
                "new": run.records[record.superseded_by].title,
                "why": "merge of two records of the same fact" if same else "not in the key",
            }
        )
    per_session = [_session_row(run, n, m) for n, m in enumerate(run.matchings, start=1)]
    ours = [i["session_start"] + i["prompts"] for i in run.injected]
    budget = statistics.fmean(ours) if ours else 0.0
    n_recent = scoring.choose_n(budget, run.recency_costs)
    recency_tokens = [sum(costs[:n_recent]) for costs in run.recency_costs]
    retrieval = _retrieval(run, k, n_recent, items)
    return {
        "extraction": {
            "strict": _pr(strict),
            "lenient": _pr(lenient),
            "sessions": per_session,
        },
        "supersession": {
            "checks": [scoring.as_dict(c) for c in checks],
            "correct": sum(c.status == "correct" for c in checks),
            "other": other,
        },
        "store": [
            {
                "n": s["n"],
                "current": s["store"]["current"],
                "stale": _titles(run, s["store"]["stale"]),
                "noise": _titles(run, s["store"]["noise"]),
                "repeated_items": s["store"]["repeated_items"],
            }
            for s in run.sessions
        ],
        "duplicates": [_duplicate(run, a, b, c) for a, b, c in run.duplicate_similarity],
        "merge_checks": _merge_checks(run),
        "next_digest": run.final_digest,
        "digest": _digest_audit(run, items, last),
        "retrieval": retrieval,
        "calibration": _calibration(run, k),
        "floor_changes": [
            {
                "session": c["session"],
                "prompt": c["prompt"],
                "kept": _titles(run, c["kept"]),
                "removed": _titles(run, c["removed"]),
            }
            for c in run.floor_changes
        ],
        "tokens": {
            "per_session": [
                {
                    "n": n,
                    "session_start": inj["session_start"],
                    "prompts": inj["prompts"],
                    "prompt_count": inj["prompt_count"],
                    "records": inj["records"],
                    "prompts_unfloored": inj["prompts_unfloored"],
                    "agentctx": ours[n - 1],
                    "recency": recency_tokens[n - 1],
                }
                for n, inj in enumerate(run.injected, start=1)
            ],
            "prompts": sum(i["prompts"] for i in run.injected),
            "prompts_unfloored": sum(i["prompts_unfloored"] for i in run.injected),
            "mean_agentctx": budget,
            "mean_recency": statistics.fmean(recency_tokens) if recency_tokens else 0.0,
            "recency_n": n_recent,
        },
    }


def _digest_audit(run: Run, items: dict[str, scoring.KeyItem], last: int) -> dict[str, Any]:
    """What the last question's digest showed: records, and which of them no longer hold."""
    final = [a for a in run.asked if a.question.after == last]
    if not final:
        return {"shown": 0, "stale": [], "decisions": 0}
    asked = final[-1]
    shown = [i for i in asked.digest if i in run.records]
    stale = [
        run.records[i].title
        for i in shown
        if asked.answers.get(i)
        and not any(scoring.holds(items[x], last, items) for x in asked.answers[i])
    ]
    decisions = [i for i in shown if run.records[i].type in ("decision", "convention")]
    current = [
        r
        for r in run.records.values()
        if r.superseded_at is None and r.type in ("decision", "convention")
    ]
    return {
        "shown": len(shown),
        "stale": stale,
        "decisions": len(decisions),
        "decisions_current": len(current),
    }


def _duplicate(run: Run, dup: str, original: str, cosine: float) -> dict[str, Any]:
    a, b = run.records[dup], run.records[original]
    if a.superseded_by == original or b.superseded_by == dup:
        outcome = "merged"
    elif a.superseded_at is None and b.superseded_at is None:
        outcome = "both still current"
    else:
        outcome = "one of them superseded otherwise"
    return {"duplicate": a.title, "original": b.title, "cosine": cosine, "outcome": outcome}


def _merge_checks(run: Run) -> dict[str, int]:
    checks = {"pairs_asked": 0, "merged": 0}
    for session in run.sessions:
        for report in session["consolidation"]:
            dedupe = report.get("dedupe") or {}
            checks["pairs_asked"] += int(dedupe.get("asked") or 0)
            checks["merged"] += int(dedupe.get("merged") or 0)
    return checks


def _produced(run: Run, record: Any) -> scoring.Produced:
    return scoring.Produced(
        record.id,
        run.session_of.get(record.id, 0),
        str(record.type),
        record.title,
        f"{record.title}\n{record.body}\n{record.keywords}",
        record.superseded_by,
    )


def _pr(pr: scoring.PR) -> dict[str, Any]:
    return {
        "precision": pr.precision,
        "recall": pr.recall,
        "matched": pr.matched,
        "produced": pr.produced,
        "items": pr.items,
    }


def _session_row(run: Run, n: int, m: scoring.Matching) -> dict[str, Any]:
    def title(record_id: str) -> str:
        record = run.records.get(record_id)
        return record.title if record is not None else record_id

    items = len(m.matched) + len(m.wrong_type) + len(m.missed)
    return {
        "n": n,
        "script": run.sessions[n - 1]["script"],
        "style": run.sessions[n - 1]["style"],
        "items": items,
        "produced": m.produced,
        "matched": len(m.matched),
        "wrong_type": [
            f"{item} as {run.records[r].type}: {title(r)}" for r, item in m.wrong_type.items()
        ],
        "duplicates": [f"{title(r)} (repeats {item})" for r, item in m.duplicates.items()],
        "extras": [title(r) for r in m.extras],
        "missed": m.missed,
        "precision": len(m.matched) / m.produced if m.produced else 1.0,
        "recall": len(m.matched) / items if items else 1.0,
        "extraction": run.sessions[n - 1]["extraction"],
    }


def _ids(asked: Asked, retriever: str) -> list[str]:
    if retriever == "recency":
        return asked.newest[:3]
    if retriever == "none":
        return []
    ids: list[str] = getattr(asked, retriever)
    return ids


def _retrieval(
    run: Run, k: int, n_recent: int, items: dict[str, scoring.KeyItem]
) -> dict[str, Any]:
    rows = []
    for asked in run.asked:
        q = asked.question
        row: dict[str, Any] = {
            "id": q.id,
            "after": q.after,
            "text": q.text,
            "expects": list(q.expects),
        }
        for name, _label in RETRIEVERS:
            ids = _ids(asked, name)
            row[name] = {
                "recall": scoring.recall_at(ids, q.expects, asked.answers, k)
                if q.expects
                else None,
                "stale": scoring.stale_hits(ids, asked.answers, items, q.after, k),
                "found": sorted(set().union(*(asked.answers.get(i, frozenset()) for i in ids[:k]))),
                "count": len(ids[:k]),
            }
        in_context = list(dict.fromkeys([*asked.digest, *asked.hook]))
        row["in_context"] = {
            "agentctx": scoring.recall_at(in_context, q.expects, asked.answers, len(in_context))
            if q.expects
            else None,
            "recency": scoring.recall_at(asked.newest, q.expects, asked.answers, n_recent)
            if q.expects
            else None,
        }
        row["hook_tokens"] = asked.hook_tokens
        rows.append(row)
    positive = [r for r in rows if r["expects"]]
    negative = [r for r in rows if not r["expects"]]
    summary: dict[str, Any] = {}
    for name, _label in RETRIEVERS:
        summary[name] = {
            "recall": _mean(r[name]["recall"] for r in positive),
            "recall_midway": _mean(
                r[name]["recall"] for r in positive if r["after"] < len(run.scripts)
            ),
            "stale": sum(r[name]["stale"] for r in positive),
            "negatives_answered": sum(r[name]["count"] > 0 for r in negative),
        }
    summary["in_context"] = {
        "agentctx": _mean(r["in_context"]["agentctx"] for r in positive),
        "recency": _mean(r["in_context"]["recency"] for r in positive),
    }
    return {
        "questions": rows,
        "summary": summary,
        "positive": len(positive),
        "negative": len(negative),
        "negative_hook_tokens": sum(r["hook_tokens"] for r in negative),
    }


def _calibration(run: Run, k: int) -> dict[str, list[dict[str, Any]]]:
    """Each floor rule of :mod:`own_eval.floors` over the questions' unfloored candidates.

    *answered*: answerable questions whose expected items are all in the rule's top ``k``;
    *negatives*: questions nothing answers that still get a record; *lost*: answered without a
    floor and not with the rule.
    """

    def figures(kept: dict[str, list[str]]) -> dict[str, Any]:
        positive = [a for a in run.asked if a.question.expects]

        def full(asked: Asked, ids: list[str]) -> bool:
            q = asked.question
            return scoring.recall_at(ids, q.expects, asked.answers, k) == 1.0

        hit = {_key(a): full(a, kept[_key(a)]) for a in positive}
        return {
            "answered": sum(hit.values()),
            "negatives": sum(1 for a in run.asked if not a.question.expects and kept[_key(a)]),
            "hit": hit,
        }

    def finish(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        first = rows[0]["hit"]  # the first rule is "no floor"
        for row in rows:
            row["lost"] = [q for q, ok in first.items() if ok and not row["hit"][q]]
            del row["hit"]
        return rows

    hook = []
    for rule in floors.HOOK_RULES:
        kept = {_key(a): floors.hook_kept(a.hook_candidates, rule) for a in run.asked}
        hook.append({"rule": rule[0], **figures(kept)})
    search = []
    for search_rule in floors.SEARCH_RULES:
        kept = {_key(a): floors.search_kept(a.search_candidates, search_rule) for a in run.asked}
        search.append({"rule": search_rule.name, **figures(kept)})
    return {"hook": finish(hook), "search": finish(search)}


def _key(asked: Asked) -> str:
    return asked.question.id


def _mean(values: Any) -> float:
    found = [v for v in values if v is not None]
    return statistics.fmean(found) if found else 0.0


def _titles(run: Run, ids: list[str]) -> list[str]:
    return [run.records[i].title if i in run.records else i for i in ids]
