"""``ctx_search``'s strength labels: the candidates of the TUNING data, with the signals they read.

Usage, from the repository root::

    python benchmarks/precision_eval/tune_search.py [--out /tmp/ctx_search_candidates.json]

Tuning data only (docs/retrieval.md, "ctx_search's labels"): the precision eval's tuning part
(its tuning projects and the global preferences; no record, prompt or word of the held-out part is
loaded) and DevBench. Each store is built as the eval builds it (records through ``Store.add``,
capture stubs through the real PostToolUse hook, embedded with the offline all-MiniLM-L6-v2), and
each prompt is ranked once without a floor, by keywords alone and hybrid, each candidate with its
cosine similarity (None outside the vector ranking) and its keyword relevance
(:func:`agentctx.core.search.judge`), and the prompt with its content
(:func:`agentctx.core.search.content`). The rules are then swept over this file in memory
(:func:`sweep`), so a rule is one pass over a few hundred candidate lists.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import minilm  # noqa: E402
from agentctx import identify  # noqa: E402
from agentctx.core import search as keyword  # noqa: E402
from agentctx.embeddings import models, vecstore  # noqa: E402
from agentctx.retrieval import hybrid  # noqa: E402
from agentctx.store import SearchQuery, Store  # noqa: E402
from precision_eval import dataset, run  # noqa: E402

DEPTH = 15  # ctx_search's largest page


def tuning_part(data: dataset.Dataset) -> dataset.Dataset:
    """The tuning projects, the global preferences and the prompts typed in a tuning project."""
    projects = {n: p for n, p in data.projects.items() if p.part == "tuning"}
    items = [i for i in data.items if i.is_global or i.project in projects]
    prompts = [p for p in data.prompts if p.project in projects]
    return dataset.Dataset(projects, items, prompts)


async def candidates(
    store: Store, text: str, project_id: str, model: models.Embedder | None
) -> list[dict[str, Any]]:
    """The unfloored ranking of ``text`` (hybrid with a model, else keywords), with signals."""
    query = SearchQuery(text, project_id, limit=DEPTH)
    ranked = await hybrid.hybrid_search(store, query, model, floor=None)
    ids = [hit.record.id for hit in ranked.hits]
    similarity: dict[str, float] = {}
    if model is not None:
        vector = await model.embed_query(text)
        near = await hybrid.vector_ranking(store, vector, replace(query, limit=50), 50)
        similarity = {record.id: sim for record, sim in near}
    relevance = await hybrid.KeywordJudge(store, text).relevance(ids)
    return [
        {"id": i, "similarity": similarity.get(i), "relevance": relevance.get(i, 0.0)} for i in ids
    ]


async def precision_tuning(work: Path, model: models.Embedder) -> list[dict[str, Any]]:
    data = tuning_part(dataset.load())
    _env, folders, to_key = await run.build(data, work)
    out = []
    async with await Store.open() as store:
        await vecstore.embed_pending(store, model)
        for prompt in data.prompts:
            pid = identify(str(folders[prompt.project])).project_id
            row: dict[str, Any] = {
                "set": "precision-tuning",
                "id": prompt.id,
                "kind": prompt.kind,
                "answers": list(prompt.answers),
                "content": keyword.content(keyword.query_terms(prompt.text)),
                "searchable": bool(keyword.query_terms(prompt.text)),
            }
            for mode, m in (("keyword", None), ("hybrid", model)):
                found = await candidates(store, prompt.text, pid, m) if row["searchable"] else []
                for c in found:
                    c["id"] = to_key[c["id"]]
                row[mode] = found
            out.append(row)
    return out


async def devbench(work: Path, model: models.Embedder) -> list[dict[str, Any]]:
    import devbench as db
    from eval import build

    memories, questions = db.load_dataset()
    home = work / "devbench-home"
    home.mkdir(mode=0o700)
    os.environ["AGENTCTX_HOME"] = str(home)
    project_dir = work / "mcp-memory-service"
    project_dir.mkdir()
    out = []
    async with await Store.open() as store:
        to_memory = await build(store, project_dir, memories, keywords=True)
        await vecstore.embed_pending(store, model)
        pid = identify(str(project_dir)).project_id
        for q in questions:
            row: dict[str, Any] = {
                "set": "devbench",
                "id": q.id,
                "kind": "unanswerable" if q.category == "negative" else "answerable",
                "answers": list(q.expected),
                "content": keyword.content(keyword.query_terms(q.text)),
                "searchable": bool(keyword.query_terms(q.text)),
            }
            for mode, m in (("keyword", None), ("hybrid", model)):
                found = await candidates(store, q.text, pid, m)
                for c in found:
                    c["id"] = to_memory[c["id"]]
                row[mode] = found
            out.append(row)
    return out


async def collect() -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="agentctx-tune-") as tmp:
        work = Path(tmp)
        model = await models.load_model_async(minilm.settings(minilm.assemble(work / "minilm")))
        assert model is not None, "the offline MiniLM did not load"
        rows = await precision_tuning(work, model)
        rows += await devbench(work, model)
    return rows


# -- the sweep -------------------------------------------------------------------------------------

K = 5


def figures(
    rows: list[dict[str, Any]], mode: str, floor: tuple[float, float], strong: tuple[float, float],
    content: float,
) -> dict[str, float]:  # fmt: skip
    """A rule's figures on ``rows``: ``floor`` = (cosine, relevance) that keep a hit (hybrid: either;
    keyword: the relevance), ``strong`` = (cosine alone, relevance with a cosine at the floor), and
    the query ``content`` below which every hit is weak (the rule of :func:`hybrid.strength`)."""
    kept_all: dict[str, list[dict[str, Any]]] = {}
    for row in rows:

        def keep(c: dict[str, Any]) -> bool:
            sim = c["similarity"] if c["similarity"] is not None else -1.0
            if mode == "keyword":
                return bool(c["relevance"] >= floor[1])
            return sim >= floor[0] or c["relevance"] >= floor[1]

        kept_all[row["id"]] = [c for c in row[mode] if keep(c)][:K]

    def is_strong(row: dict[str, Any], c: dict[str, Any]) -> bool:
        if row["content"] < content:
            return False
        if mode == "keyword":
            return bool(c["relevance"] >= strong[1])
        sim = c["similarity"]
        if sim is None:
            return False
        return bool(sim >= strong[0] or (c["relevance"] >= strong[1] and sim >= floor[0]))

    out: dict[str, list[float]] = {}
    for row in rows:
        kept = kept_all[row["id"]]
        ids = {c["id"] for c in kept}
        strong_ids = {c["id"] for c in kept if is_strong(row, c)}
        answers = set(row["answers"])
        if row["kind"] == "answerable":
            out.setdefault("recall5", []).append(len(answers & ids) / len(answers))
            out.setdefault("answer_strong", []).append(float(bool(answers & strong_ids)))
            out.setdefault("strong_extra", []).append(float(len(strong_ids - answers)))
        else:
            out.setdefault(f"{row['kind']}_says_so", []).append(float(not strong_ids))
    return {name: sum(values) / len(values) for name, values in out.items()}


#: The chosen rule (thresholds.SIMILARITY_FLOOR, hybrid.SEARCH_RELEVANCE, thresholds.STRONG_SIMILARITY,
#: STRONG_RELEVANCE, core.search.MIN_CONTENT for all-MiniLM-L6-v2), then the grid it came from.
CHOSEN = ((0.30, 0.20), (0.55, 0.99), 1.0)
GRID = [
    (floor, (sim, rel), content)
    for floor in ((0.32, 0.4), (0.30, 0.20), (0.25, 0.2))
    for sim in (0.5, 0.52, 0.55, 0.6)
    for rel in (0.7, 0.8, 0.9, 0.99)
    for content in (1.0, 1.5)
]


def sweep(rows: list[dict[str, Any]]) -> None:
    """The chosen rule and the grid's figures on each tuning set, in both modes."""
    sets = sorted({row["set"] for row in rows})
    for mode in ("hybrid", "keyword"):
        print(f"## {mode}")
        for floor, strong, content in [CHOSEN, *GRID]:
            cells = []
            for name in sets:
                f = figures([r for r in rows if r["set"] == name], mode, floor, strong, content)
                cells.append(
                    f"{name}: recall5 {f['recall5']:.3f} answer_strong {f['answer_strong']:.2f} "
                    f"extra {f['strong_extra']:.2f} unanswerable {f['unanswerable_says_so']:.2f}"
                )
            print(f"floor {floor} strong {strong} content {content} | " + " | ".join(cells))
            if mode == "keyword":
                break  # keyword mode reads the relevance numbers only: the chosen rule


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", type=Path, default=Path("/tmp/ctx_search_candidates.json"))
    parser.add_argument("--sweep", action="store_true", help="sweep the rules over --out")
    args = parser.parse_args()
    if args.sweep:
        sweep(json.loads(args.out.read_text()))
        return
    rows = anyio.run(collect)
    args.out.write_text(json.dumps(rows, indent=1))
    print(f"{len(rows)} prompts -> {args.out}")


if __name__ == "__main__":
    main()
