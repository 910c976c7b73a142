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
from agentctx import embed, identify  # noqa: E402
from agentctx.core import search as keyword  # noqa: E402
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
    store: Store, text: str, project_id: str, model: embed.Embedder | None
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


async def precision_tuning(work: Path, model: embed.Embedder) -> list[dict[str, Any]]:
    data = tuning_part(dataset.load())
    home = work / "home"
    home.mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items() if k not in run.DROPPED_ENV}
    env |= {"AGENTCTX_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    os.environ["AGENTCTX_HOME"] = str(home)
    folders: dict[str, Path] = {}
    for name, project in data.projects.items():
        folders[name] = work / "src" / name
        folders[name].mkdir(parents=True)
        run.make_project(folders[name], project.origin)
    to_key = await run.write_records(data, folders)
    to_key |= await run.stub_ids(run.capture_stubs(data, folders, env))
    out = []
    async with await Store.open() as store:
        await embed.embed_pending(store, model)
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


async def devbench(work: Path, model: embed.Embedder) -> list[dict[str, Any]]:
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
        await embed.embed_pending(store, model)
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
        model = await embed.load_model_async(minilm.settings(minilm.assemble(work / "minilm")))
        assert model is not None, "the offline MiniLM did not load"
        rows = await precision_tuning(work, model)
        rows += await devbench(work, model)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", type=Path, default=Path("/tmp/ctx_search_candidates.json"))
    args = parser.parse_args()
    rows = anyio.run(collect)
    args.out.write_text(json.dumps(rows, indent=1))
    print(f"{len(rows)} prompts -> {args.out}")


if __name__ == "__main__":
    main()
