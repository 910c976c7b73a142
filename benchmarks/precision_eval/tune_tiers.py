"""The tuning harness of the prompt hook's tiers (issue 25): the tuning part only.

    python benchmarks/precision_eval/tune_tiers.py [--without-cues]

Builds the eval's store from the **tuning** projects and the global preferences (never a held-out
project), starts a real ``agentctx mcp`` that lends its model, and for every prompt collects once
what the hook's rules read: the keyword candidates that pass the floor (with their relevance) and
the nearest records by meaning the server names (with their cosines, filtered by the core's own
scope rules). Then it sweeps the thresholds of :mod:`agentctx.core.tiers` in memory, rendering each
prompt's entries with the hook's own renderer (so tokens are the hook's), and prints the settings
that meet the issue's goals, best first.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import minilm  # noqa: E402
from agentctx.core import meaning, plan, search, tiers  # noqa: E402
from agentctx.core.connect import open_db  # noqa: E402
from agentctx.core.inject import render_tiers  # noqa: E402
from agentctx.core.project import identify  # noqa: E402
from agentctx.core.tokens import estimate_tokens  # noqa: E402
from precision_eval import dataset, run  # noqa: E402

TYPE_CHECKING = False
if TYPE_CHECKING:
    from precision_eval.dataset import Dataset


def tuning_only(data: Dataset) -> Dataset:
    import dataclasses

    names = {n for n, p in data.projects.items() if p.part == "tuning"}
    return dataclasses.replace(
        data,
        projects={n: p for n, p in data.projects.items() if n in names},
        items=[i for i in data.items if i.is_global or i.project in names],
        prompts=[p for p in data.prompts if p.project in names],
    )


async def collect(data: Dataset) -> tuple[list[dict[str, Any]], dict[str, str]]:
    with tempfile.TemporaryDirectory(prefix="agentctx-tune-") as tmp:
        work = Path(tmp)
        env, folders, to_key = await run.build(data, work)
        await run.embed_all(minilm.assemble(work / "minilm"))
        run.config_set("embedding.model", minilm.NAME, env)
        run.config_set("embedding.path", str(work / "minilm"), env)
        conn = open_db(print)
        assert conn is not None
        out = []
        async with run.lending_server(next(iter(folders.values())), env, work / "err.txt"):
            for prompt in data.prompts:
                pid = identify(str(folders[prompt.project])).project_id
                terms = search.query_terms(prompt.text)
                found = plan.run(conn, search.for_prompt(terms, pid, floor=search.MIN_RELEVANCE))
                pending = meaning.ask(prompt.text, pid)
                hits = None if pending is None else pending.hits(time.monotonic() + 10)
                assert hits is not None, pending and pending.why
                rows = plan.run(conn, tiers.meaning_rows([h[0] for h in hits], pid, ()))
                allowed = {str(r["id"]): _plain(r) for r in rows}
                out.append(
                    {
                        "prompt": prompt.id,
                        "thin": found.thin,
                        "hits": [_plain(row) for row, _score in found.hits],
                        "relevance": found.relevance or {},
                        "neighbours": [(rid, cos) for rid, cos in hits if rid in allowed],
                        "rows": allowed,
                    }
                )
        conn.close()
        return out, to_key


def _plain(row: Any) -> dict[str, Any]:
    return {k: row[k] for k in ("id", "type", "title", "body", "valid_from", "scope", "source",
                                "confidence", "key")}  # fmt: skip


def simulate(item: dict[str, Any]) -> list[tiers.Candidate]:
    if item["thin"]:
        return []
    by_id: dict[str, tiers.Candidate] = {}
    for rank, row in enumerate(item["hits"], start=1):
        c = tiers.Candidate(row)
        c.keyword_rank = rank
        c.relevance = item["relevance"].get(c.id)
        by_id[c.id] = c
    cos = dict(item["neighbours"])
    for rid in cos:
        if rid not in by_id:
            by_id[rid] = tiers.Candidate(item["rows"][rid])
    for rid, c in by_id.items():
        c.cosine = cos.get(rid)
    kw = [
        c.id for c in sorted(by_id.values(), key=lambda c: c.keyword_rank or 99) if c.keyword_rank
    ]
    mo = [rid for rid, _ in sorted(cos.items(), key=lambda p: (-p[1], p[0]))]
    fused = dict(search.rrf([kw, mo]))
    best = max(cos.values(), default=None)
    for c in by_id.values():
        c.fused = fused.get(c.id, 0.0)
        c.tier, c.why = tiers.tier(c, meaning=True, best_cosine=best)
    order = {tiers.WHOLE: 0, tiers.LINE: 1, tiers.NONE: 2}
    ranked = sorted(by_id.values(), key=lambda c: (order[c.tier], -c.fused, c.id))
    return [c for c in ranked if c.tier != tiers.NONE][: tiers.MAX_ENTRIES]


def measure(
    items: list[dict[str, Any]], to_key: dict[str, str], prompts: dict[str, Any]
) -> dict[str, float]:
    named = whole = n_ans = 0
    neg_tokens: list[int] = []
    chat_tokens: list[int] = []
    for item in items:
        p = prompts[item["prompt"]]
        entries = simulate(item)
        text, ids, lines = render_tiers(entries)
        tokens = estimate_tokens(text) if text else 0
        keys_whole = {to_key[i] for i in ids}
        keys_named = keys_whole | {to_key[i] for i in lines}
        if p.kind == "answerable":
            n_ans += 1
            named += bool(set(p.answers) & keys_named)
            whole += bool(set(p.answers) & keys_whole)
        else:
            neg_tokens.append(tokens)
            if p.kind == "chitchat":
                chat_tokens.append(tokens)
    return {
        "named3": named / n_ans,
        "whole3": whole / n_ans,
        "neg_tokens": sum(neg_tokens) / len(neg_tokens),
        "chat_tokens": sum(chat_tokens) / len(chat_tokens),
    }


GRID = {
    "AGREE_COSINE": (0.4, 0.45, 0.5),
    "KEYWORD_LINE_COSINE": (0.3, 0.35, 0.4, 1.1),
    "STRONG_COSINE": (0.55, 0.6, 0.65),
    "POSSIBLE_COSINE": (0.5, 0.55),
    "COSINE_BAND": (1.0,),
    "WHOLE_RELEVANCE": (0.99,),
}


def describe(items: list[dict[str, Any]], to_key: dict[str, str], prompts: dict[str, Any]) -> None:
    """Per kind: the answers' cosines and the best cosine of a non-answer (keyword-kept or not)."""
    for kind in dataset.KINDS:
        kept_other: list[float] = []
        for item in items:
            p = prompts[item["prompt"]]
            if p.kind != kind:
                continue
            cos = dict(item["neighbours"])
            kept = {str(r["id"]) for r in item["hits"]}
            best_other = max((c for rid, c in cos.items() if to_key[rid] not in p.answers),
                             default=0.0)  # fmt: skip
            kept_other += [cos.get(rid, -1.0) for rid in kept if to_key[rid] not in p.answers]
            if kind == "answerable":
                answer = [round(c, 2) for rid, c in cos.items() if to_key[rid] in p.answers]
                in_kw = [round(cos.get(r, -1), 2) for r in kept if to_key[r] in p.answers]
                print(f"{p.id}: answer cos {answer}, best other {best_other:.2f}, kw {in_kw}")
            else:
                print(f"{p.id} ({kind}): best cos {best_other:.2f}, kw kept {len(kept)}")
        print(kind, "non-answers kept by keywords:", sorted(round(c, 2) for c in kept_other))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--without-cues", action="store_true")
    parser.add_argument("--describe", action="store_true", help="print each prompt's cosines")
    parser.add_argument("--cache", type=Path, help="keep the collected candidates in this file")
    args = parser.parse_args()
    data = tuning_only(dataset.load())
    if args.without_cues:
        data = run.without_cues(data)
    os.environ.pop("AGENTCTX_MEANING", None)
    prompts = {p.id: p for p in data.prompts}
    if args.cache and args.cache.exists():
        items, to_key = json.loads(args.cache.read_text())
    else:
        items, to_key = anyio.run(collect, data)
        if args.cache:
            args.cache.write_text(json.dumps([items, to_key]))
    if args.describe:
        describe(items, to_key, prompts)
    results = []
    for values in itertools.product(*GRID.values()):
        settings = dict(zip(GRID, values, strict=True))
        if settings["POSSIBLE_COSINE"] > settings["STRONG_COSINE"]:
            continue
        for name, value in settings.items():
            setattr(tiers, name, value)
        results.append((measure(items, to_key, prompts), settings))
    ok = [r for r in results if r[0]["neg_tokens"] <= 40 and r[0]["chat_tokens"] <= 10]
    ok.sort(key=lambda r: (-(r[0]["named3"] + r[0]["whole3"]), r[0]["neg_tokens"]))
    print(f"{len(ok)} of {len(results)} settings meet the token goals; the best:")
    for figures, settings in ok[:25]:
        print({k: round(v, 3) for k, v in figures.items()}, settings)
    results.sort(key=lambda r: (r[0]["neg_tokens"], -(r[0]["named3"] + r[0]["whole3"])))
    print("the frontier (fewer tokens per negative prompt, or more answers):")
    best = -1.0
    for figures, settings in results:
        if figures["named3"] + figures["whole3"] > best:
            best = figures["named3"] + figures["whole3"]
            print({k: round(v, 3) for k, v in figures.items()}, settings)


if __name__ == "__main__":
    main()
