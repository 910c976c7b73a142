"""DevBench retrieval eval: the hook's keyword ranking and ``ctx_search``'s hybrid ranking.

Usage, from the repository root (``python3 -m nox -s eval`` installs what it needs and runs it)::

    python benchmarks/eval.py [--out-dir benchmarks/results]

The dataset (``benchmarks/data/devbench/``, Apache-2.0, from mcp-memory-service; see its README and
PROVENANCE) holds 30 developer memories and 20 questions in four categories: exact, semantic,
cross_type and negative (questions nothing should answer). Each memory becomes one record of a
fresh store in a temporary ``AGENTCTX_HOME``, in the project of a temporary folder:

* type: ``decision`` → decision, ``learning`` → discovery, ``bug-fix`` → bugfix, ``architecture``
  → decision (an architectural choice), ``configuration`` → convention (how the project is set up);
* title: the memory's first sentence, cut at a word to at most 120 characters; body: the whole
  memory; keywords: its topical tags (not ``devbench`` nor the ``bench:<id>`` tag), as extraction
  would give keywords (a second run without them shows what they are worth);
* ``valid_from``: its ``created_at_iso`` shifted so that the newest memory is one day old (so the
  recency decay of discoveries and bugfixes is the same whenever the eval runs); confidence
  explicit.

The records are then embedded by :func:`agentctx.embeddings.vecstore.embed_pending` with the offline
all-MiniLM-L6-v2 (int8) that the tests use (``benchmarks/minilm.py``). Retrievers, each asked for
the top 5 (the dataset's k):

* **hook**: the UserPromptSubmit ranking, :func:`agentctx.hooks.prompt._search` on the hook's own
  read-only connection (keywords only, the default relevance floor ``retrieval.min_relevance``),
  its first 5; and what the hook would inject (:func:`agentctx.core.inject.render`: at most 3
  records); and the same ranking without the floor (as before the floor existed);
* **ctx_search keyword**: :func:`agentctx.retrieval.hybrid.hybrid_search` without a model (what the server
  answers until its model is ready), with the server's floor;
* **vector only**: :func:`agentctx.retrieval.hybrid.vector_ranking` (cosine over the stored vectors);
* **ctx_search hybrid**: :func:`agentctx.retrieval.hybrid.hybrid_search` with the model (RRF of
  both), with the server's floor for MiniLM (:func:`agentctx.retrieval.hybrid.floor_for`), and
  without a floor.

The floors' calibration: every question is also ranked once without a floor, with the features
each candidate rule reads (``own_eval/floors.py``), and each rule's answers are scored alike. The
larger-project check ranks the questions again in a store whose project also holds
:data:`LARGER` synthetic notes (``benchmarks/synthetic_store.py``), for the rules that judge a
hit against the store's other vectors.

Scores as the dataset's authors do (see its README): recall@5 = relevant ids in the top 5 / relevant
count, MRR = 1 / rank of the first relevant id in the top 5 (0 if none), averaged per category and
over the 15 non-negative questions; for the negatives, the false-positive rate is the share of the
top-k slots filled (any record returned for them is a false positive), *answered* the share of
negatives that got any record. Writes ``eval.md`` and ``eval.json`` to the out dir.

The dataset's mapping to records and the eval's constants are in ``devbench.py``; the report's
tables and prose in ``eval_report.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

import minilm
import synthetic_store
from agentctx import config
from agentctx.core import inject
from agentctx.core import search as keyword_search
from agentctx.core.connect import open_db
from agentctx.core.project import identify
from agentctx.embeddings import models, vecstore
from agentctx.hooks import prompt
from agentctx.hooks.runner import HookContext
from agentctx.records import NewRecord
from agentctx.retrieval import hybrid
from agentctx.store import SearchQuery, Store
from devbench import (
    CATEGORIES,
    LARGER,
    LARGER_RULES,
    PUBLISHED,
    RETRIEVERS,
    ROOT,
    SYNTHETIC,
    TYPE_MAP,
    K,
    Memory,
    Question,
    keywords_of,
    load_dataset,
    shifted,
    title_of,
)
from eval_report import commentary, report
from own_eval import floors

#: Per question, the unfloored candidates with the features the floor rules read.
Candidates = dict[str, dict[str, Any]]


async def build(
    store: Store, project_dir: Path, memories: list[Memory], *, keywords: bool
) -> dict[str, str]:
    """The memories as records of the project of ``project_dir``: record id -> memory id."""
    identity = identify(str(project_dir))
    await store.touch_project(identity)
    when = shifted(memories)
    to_memory: dict[str, str] = {}
    for memory in memories:
        # one millisecond apart: ULIDs then sort in dataset order, and so do RRF's ties (by id)
        await anyio.sleep(0.002)
        record = await store.add(
            NewRecord(
                type=TYPE_MAP[memory.memory_type],
                title=title_of(memory.content),
                body=memory.content,
                project_id=identity.project_id,
                keywords=keywords_of(memory) if keywords else [],
                valid_from=when[memory.id],
                confidence="explicit",
                source="cli",
            )
        )
        to_memory[record.id] = memory.id
    return to_memory


async def run_home(
    home: Path, memories: list[Memory], questions: list[Question], model: models.Embedder, *,
    keywords: bool,
) -> tuple[dict[str, dict[str, list[str]]], Candidates]:  # fmt: skip
    """Every retriever's top ids (memory ids) for every question, on a fresh store in ``home``,
    and each question's unfloored candidates for the calibration."""
    os.environ["AGENTCTX_HOME"] = str(home)
    project_dir = home.parent / "mcp-memory-service"
    project_dir.mkdir(parents=True, exist_ok=True)
    project_id = identify(str(project_dir)).project_id
    settings = config.load()
    answers: dict[str, dict[str, list[str]]] = {name: {} for name, _ in RETRIEVERS}
    candidates: Candidates = {}
    async with await Store.open() as store:
        to_memory = await build(store, project_dir, memories, keywords=keywords)
        assert await vecstore.embed_pending(store, model) == len(memories)
        for question in questions:
            ctx = HookContext(
                "UserPromptSubmit", {"prompt": question.text, "cwd": str(project_dir)}
            )
            conn = open_db(ctx.log)
            assert conn is not None, "the hook cannot open the eval store"
            try:
                terms = keyword_search.query_terms(question.text)
                rows = prompt._search(ctx, conn, terms, ()) if terms else []
                hook = floors.hook_candidates(ctx, conn, question.text)
            finally:
                conn.close()
            answers["hook"][question.id] = [to_memory[r["id"]] for r in rows[:K]]
            answers["hook_injected"][question.id] = [to_memory[i] for i in inject.render(rows)[1]]
            answers["hook_unfloored"][question.id] = [to_memory[c.id] for c in hook[:K]]
            query = SearchQuery(question.text, project_id, limit=K)
            keyword = await hybrid.hybrid_search(
                store, query, None, floor=hybrid.floor_for(settings, None)
            )
            answers["keyword"][question.id] = [to_memory[h.record.id] for h in keyword.hits]
            answers["keyword_strong"][question.id] = [
                to_memory[h.record.id] for h in keyword.strong
            ]
            vector = await model.embed_query(question.text)
            nearest = await hybrid.vector_ranking(store, vector, query, K)
            answers["vector"][question.id] = [to_memory[r.id] for r, _ in nearest]
            floor = hybrid.floor_for(settings, model.name)
            fused = await hybrid.hybrid_search(store, query, model, floor=floor)
            assert fused.mode == "hybrid", fused
            answers["hybrid"][question.id] = [to_memory[h.record.id] for h in fused.hits]
            answers["hybrid_strong"][question.id] = [to_memory[h.record.id] for h in fused.strong]
            search = await floors.search_candidates(store, query, model)
            answers["hybrid_unfloored"][question.id] = [to_memory[c.id] for c in search[:K]]
            candidates[question.id] = {
                "hook": [(to_memory[c.id], c) for c in hook],
                "search": [(to_memory[c.id], c) for c in search],
            }
    return answers, candidates


async def similarities(
    home: Path, questions: list[Question], model: models.Embedder
) -> dict[str, float]:
    """The cosine similarity of each question's nearest record (does a floor separate negatives?)."""
    os.environ["AGENTCTX_HOME"] = str(home)
    found = {}
    async with await Store.open() as store:
        for question in questions:
            near = await vecstore.nearest(store, await model.embed_query(question.text), 1)
            found[question.id] = near[0][1]
    return found


async def larger_project(
    home: Path, memories: list[Memory], questions: list[Question], model: models.Embedder
) -> Candidates:
    """Each question's unfloored ``ctx_search`` candidates when the project also holds
    :data:`LARGER` synthetic notes of a web app (their hits score as :data:`SYNTHETIC`)."""
    project_dir = synthetic_project(home)
    identity = identify(str(project_dir))
    candidates: Candidates = {}
    async with await Store.open() as store:
        to_memory = await build(store, project_dir, memories, keywords=True)
        await vecstore.embed_pending(store, model)
        for question in questions:
            query = SearchQuery(question.text, identity.project_id, limit=K)
            search = await floors.search_candidates(store, query, model)
            candidates[question.id] = {
                "search": [(to_memory.get(c.id, SYNTHETIC), c) for c in search]
            }
    return candidates


def synthetic_project(home: Path) -> Path:
    """The project folder of a new store in ``home`` holding :data:`LARGER` synthetic notes."""
    os.environ["AGENTCTX_HOME"] = str(home)
    home.mkdir(parents=True)
    project_dir = home.parent / "mcp-memory-service"
    project_dir.mkdir()
    identity = identify(str(project_dir))
    synthetic_store.build(str(home / "agentctx.db"), LARGER, identity.project_id, identity.name, 1)
    return project_dir


def larger_figures(candidates: Candidates, questions: list[Question]) -> list[dict[str, Any]]:
    """Per rule of :data:`LARGER_RULES`: answerable questions answered and lost, and how many of
    each negative's ranked candidates it keeps."""
    rows = []
    base = search_kept(candidates, LARGER_RULES[0])
    for rule in LARGER_RULES:
        kept = search_kept(candidates, rule)
        hit = {
            q.id: bool(set(q.expected) & set(kept[q.id][:K]))
            for q in questions
            if q.category != "negative"
        }
        was = {q.id: bool(set(q.expected) & set(base[q.id][:K])) for q in questions}
        rows.append(
            {
                "rule": rule.name,
                "answered": sum(hit.values()),
                "lost": [q for q, ok in hit.items() if was[q] and not ok],
                "negatives": {
                    q.id: [len(kept[q.id]), len(base[q.id])]
                    for q in questions
                    if q.category == "negative"
                },
            }
        )
    return rows


def score(
    answers: dict[str, list[str]], questions: list[Question], k: int = K
) -> dict[str, dict[str, float]]:
    """recall@k and MRR per category and overall; FPR and 'answered' share for the negatives."""
    per: dict[str, list[tuple[float, float]]] = {c: [] for c in CATEGORIES}
    fills: list[float] = []
    answered: list[float] = []
    for question in questions:
        top = answers[question.id][:k]
        if question.category == "negative":
            fills.append(len(top) / k)
            answered.append(1.0 if top else 0.0)
            continue
        relevant = set(question.expected)
        recall = len(relevant & set(top)) / len(relevant)
        rank = next((i for i, mid in enumerate(top, start=1) if mid in relevant), None)
        per[question.category].append((recall, 1.0 / rank if rank else 0.0))
    result: dict[str, dict[str, float]] = {}
    for category, pairs in per.items():
        result[category] = {
            "recall": statistics.fmean(p[0] for p in pairs),
            "mrr": statistics.fmean(p[1] for p in pairs),
            "n": len(pairs),
        }
    every = [p for pairs in per.values() for p in pairs]
    result["overall"] = {
        "recall": statistics.fmean(p[0] for p in every),
        "mrr": statistics.fmean(p[1] for p in every),
        "n": len(every),
    }
    result["negative"] = {
        "fpr": statistics.fmean(fills),
        "answered": statistics.fmean(answered),
        "n": len(fills),
    }
    return result


def calibration(
    candidates: Candidates, questions: list[Question]
) -> dict[str, list[dict[str, Any]]]:
    """Each floor rule's figures: answerable questions still answered, recall, negatives answered.

    A question is *answered* when a relevant memory is in the top 5 (the hook's injection: the top
    3); *lost* lists the questions answered without a floor and not with the rule.
    """

    def figures(kept: dict[str, list[str]], base: dict[str, list[str]]) -> dict[str, Any]:
        positives = [q for q in questions if q.category != "negative"]
        hit = {q.id: bool(set(q.expected) & set(kept[q.id][:K])) for q in positives}
        was = {q.id: bool(set(q.expected) & set(base[q.id][:K])) for q in positives}
        return {
            "answered": sum(hit.values()),
            "recall": statistics.fmean(
                len(set(q.expected) & set(kept[q.id][:K])) / len(q.expected) for q in positives
            ),
            "recall3": statistics.fmean(
                len(set(q.expected) & set(kept[q.id][:3])) / len(q.expected) for q in positives
            ),
            "negatives": sum(1 for q in questions if q.category == "negative" and kept[q.id]),
            "lost": [q.id for q in positives if was[q.id] and not hit[q.id]],
        }

    hook_base = {q: [m for m, _ in c["hook"]] for q, c in candidates.items()}
    hook = []
    for rule in floors.HOOK_RULES:
        kept = {q: [m for m, x in c["hook"] if rule[1](x)] for q, c in candidates.items()}
        hook.append({"rule": rule[0], **figures(kept, hook_base)})
    search_base = {q: [m for m, _ in c["search"]] for q, c in candidates.items()}
    search = []
    for search_rule in floors.SEARCH_RULES:
        kept = search_kept(candidates, search_rule)
        search.append({"rule": search_rule.name, **figures(kept, search_base)})
    return {"hook": hook, "search": search}


def search_kept(candidates: Candidates, rule: floors.SearchRule) -> dict[str, list[str]]:
    """Per question, the memory ids a ``ctx_search`` rule keeps, in rank order."""
    kept = {}
    for q, c in candidates.items():
        by_id = {x.id: m for m, x in c["search"]}
        kept[q] = [by_id[i] for i in floors.search_kept([x for _, x in c["search"]], rule)]
    return kept


async def evaluate() -> tuple[str, dict[str, Any]]:
    """The report (Markdown) and the figures and answers (for JSON)."""
    began = time.perf_counter()
    memories, questions = load_dataset()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        os.environ["HF_HUB_OFFLINE"] = "1"
        folder = minilm.assemble_int8(work / "minilm")
        model = await models.load_model_async(minilm.settings(folder))
        if model is None:
            raise SystemExit("the offline MiniLM did not load (see the log line above)")
        with_keywords, candidates = await run_home(work / "a" / "home", memories, questions,
                                                   model, keywords=True)  # fmt: skip
        sims = await similarities(work / "a" / "home", questions, model)
        bare, _ = await run_home(work / "b" / "home", memories, questions, model, keywords=False)
        larger = await larger_project(work / "c" / "home", memories, questions, model)
    cal: dict[str, Any] = dict(calibration(candidates, questions))
    records = len(next(iter(larger.values()))["search"][0][1].background)
    cal["larger"] = larger_figures(larger, questions)
    cal["larger_records"] = records
    main_scores = {name: score(with_keywords[name], questions) for name, _ in RETRIEVERS}
    main_scores["hook_injected"] = score(with_keywords["hook_injected"], questions, k=3)
    bare_scores = {name: score(bare[name], questions) for name, _ in RETRIEVERS}
    bare_scores["hook_injected"] = score(bare["hook_injected"], questions, k=3)
    seconds = time.perf_counter() - began
    text = report(main_scores, bare_scores, with_keywords, questions, sims, seconds, cal)
    text += commentary(main_scores, bare_scores, sims, questions, cal)
    payload: dict[str, Any] = {
        "k": K,
        "type_map": TYPE_MAP,
        "published": {c: {"recall": r, "mrr": m} for c, (r, m) in PUBLISHED.items()},
        "with_keywords": {"scores": main_scores, "answers": with_keywords},
        "without_keywords": {"scores": bare_scores, "answers": bare},
        "nearest_similarity": sims,
        "calibration": cal,
    }
    return text, payload


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out-dir", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args()
    text, payload = anyio.run(evaluate)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "eval.md").write_text(text)
    (args.out_dir / "eval.json").write_text(json.dumps(payload, indent=1, sort_keys=True) + "\n")
    print(text)


if __name__ == "__main__":
    main()
