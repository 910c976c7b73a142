"""Two ways to a prompt vector (issue 25): the static token-vector table against the real model.

Usage, from the repository root (the test venv: it has the offline MiniLM)::

    python benchmarks/static_prompt.py quality [--out benchmarks/results/static_prompt.json]
    python benchmarks/static_prompt.py cost [--sizes 10000,100000] [--runs 15]

``quality``: the precision eval's TUNING data only (its tuning projects, atlas and relay, which are
being moved into tuning, and the global preferences; no other held-out data), built as the eval
builds it (``precision_eval/run.py: build``), embedded with the offline all-MiniLM-L6-v2, and the
static table derived from the same model (:mod:`agentctx.embeddings.tokens`). For every answerable
prompt: is an answer among the top k (1, 3, 5) current records of the project or global, ranked
(a) by cosine to the static prompt vector (:func:`agentctx.core.static_prompt.candidates`, the
hook's function), (b) by cosine to the model's prompt vector (``hybrid.vector_ranking``, as
``ctx_search``), (c) by keywords (``ctx_search``'s keyword ranking, no floor). Also the top-1
cosine of each way for answerable and unanswerable prompts (what a floor would have to split).

``cost``: a synthetic store of N records (``synthetic_store.py``, as ``hooks.py``) whose
``records_vec`` holds a random unit vector per record (KNN reads every vector whatever their
values) and a token table of MiniLM's real vocabulary with random vectors; the wall time of a process that opens the store as the
prompt hook does and calls ``static_prompt.candidates`` against ``python -c pass`` (interleaved
rounds, medians), and the in-process time of the call.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import minilm  # noqa: E402
from agentctx import identify  # noqa: E402
from agentctx.core import db, static_prompt  # noqa: E402
from agentctx.embeddings import models, tokens, vecstore  # noqa: E402
from agentctx.retrieval import hybrid  # noqa: E402
from agentctx.store import SearchQuery, Store  # noqa: E402
from precision_eval import dataset, run  # noqa: E402

KS = (1, 3, 5)
#: Held-out projects the other branch moves into tuning (the brief allows them here).
MOVED_TO_TUNING = ("atlas", "relay")


def tuning_data() -> dataset.Dataset:
    data = dataset.load()
    projects = {
        n: p for n, p in data.projects.items() if p.part == "tuning" or n in MOVED_TO_TUNING
    }
    items = [i for i in data.items if i.is_global or i.project in projects]
    prompts = [p for p in data.prompts if p.project in projects]
    return dataset.Dataset(projects, items, prompts)


async def quality() -> dict[str, Any]:
    data = tuning_data()
    with tempfile.TemporaryDirectory(prefix="agentctx-static-") as tmp:
        work = Path(tmp)
        _env, folders, to_key = await run.build(data, work)
        model = await models.load_model_async(minilm.settings(minilm.assemble(work / "minilm")))
        assert model is not None, "the offline MiniLM did not load"
        async with await Store.open() as store:
            await vecstore.embed_pending(store, model)
            started = time.perf_counter()
            stored = await tokens.ensure(store, model)
            derive_s = time.perf_counter() - started
            path = store.path
            ways: dict[str, dict[str, Any]] = {
                w: {"hits": dict.fromkeys(KS, 0), "top1": {"answerable": [], "other": []}}
                for w in ("static", "model", "keywords")
            }
            answerable = 0
            conn, _caps = db.connect(path, load_vec=True)
            for prompt in data.prompts:
                pid = identify(str(folders[prompt.project])).project_id
                query = SearchQuery(prompt.text, pid, limit=max(KS))
                static = static_prompt.candidates(conn, prompt.text, pid, max(KS)) or []
                vector = await model.embed_query(prompt.text)
                near = await hybrid.vector_ranking(store, vector, query, max(KS))
                ranked = await hybrid.hybrid_search(store, query, None, floor=None)
                found = {
                    "static": [(to_key.get(r, r), s) for r, s in static],
                    "model": [(to_key.get(r.id, r.id), s) for r, s in near],
                    "keywords": [(to_key.get(h.record.id, h.record.id), 0.0) for h in ranked.hits],
                }
                kind = "answerable" if prompt.kind == "answerable" else "other"
                answerable += kind == "answerable"
                for way, hits in found.items():
                    if hits and way != "keywords":
                        ways[way]["top1"][kind].append(hits[0][1])
                    if kind != "answerable":
                        continue
                    keys = [key for key, _ in hits]
                    for k in KS:
                        ways[way]["hits"][k] += any(a in keys[:k] for a in prompt.answers)
            conn.close()
    out: dict[str, Any] = {
        "answerable": answerable,
        "prompts": len(data.prompts),
        "records": len(to_key),
        "table_tokens": stored,
        "derive_seconds": round(derive_s, 1),
    }
    for way, tally in ways.items():
        out[way] = {f"top{k}": round(v / answerable, 3) for k, v in tally["hits"].items()}
        for kind, values in tally["top1"].items():
            if values:
                out[way][f"top1_cosine_{kind}_median"] = round(statistics.median(values), 3)
    return out


PROBE = """
import sys, time
from agentctx.core import db, static_prompt
conn, _ = db.connect(sys.argv[1], load_vec=False, create=False)
found = static_prompt.candidates(conn, sys.argv[2], sys.argv[3], 3)
assert found, "no candidates"
"""
PROMPT = "how do we retry the payment webhook when the signature check fails?"


def cost(sizes: list[int], runs: int) -> list[dict[str, Any]]:
    import numpy as np

    import synthetic_store

    results = []
    for size in sizes:
        with tempfile.TemporaryDirectory(prefix="agentctx-static-cost-") as tmp:
            home = Path(tmp) / "home"
            home.mkdir(mode=0o700)
            os.environ["AGENTCTX_HOME"] = str(home)
            path = str(home / "agentctx.db")
            synthetic_store.build(path, size, "p-bench", "bench", 7)
            anyio.run(_fill, path, size, np)
            env = {**os.environ, "AGENTCTX_HOME": str(home)}
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            base = [sys.executable, "-c", "pass"]
            probe = [sys.executable, "-c", PROBE, path, PROMPT, "p-bench"]
            for cmd in (base, probe):  # warm the page cache and bytecode
                subprocess.run(cmd, env=env, check=True, capture_output=True)
            times: dict[str, list[float]] = {"base": [], "probe": []}
            for _ in range(runs):
                for name, cmd in random.sample([("base", base), ("probe", probe)], 2):
                    started = time.perf_counter()
                    subprocess.run(cmd, env=env, check=True, capture_output=True)
                    times[name].append(time.perf_counter() - started)
            conn, _caps = db.connect(path, load_vec=True, create=False)
            calls = []
            for _ in range(runs):
                started = time.perf_counter()
                static_prompt.candidates(conn, PROMPT, "p-bench", 3)
                calls.append(time.perf_counter() - started)
            conn.close()
            base_ms = statistics.median(times["base"]) * 1000
            probe_ms = statistics.median(times["probe"]) * 1000
            results.append(
                {
                    "records": size,
                    "python_c_pass_ms": round(base_ms, 1),
                    "probe_ms": round(probe_ms, 1),
                    "ratio": round(probe_ms / base_ms, 2),
                    "in_process_ms": round(statistics.median(calls) * 1000, 1),
                }
            )
            print(json.dumps(results[-1]), flush=True)
    return results


async def _fill(path: str, size: int, np: Any) -> None:
    """A random unit vector per record and a token table of MiniLM's real vocabulary with random
    int8 vectors: the time of lookups, averaging and KNN does not depend on the values (deriving
    the real table takes minutes; ``quality`` measures with the real one)."""
    folder = minilm.assemble(Path(path).parent / "minilm")
    vocab = [
        line.rstrip("\n")
        for line in (folder / "vocab.txt").read_text("utf-8").splitlines()
        if line.strip() and not line.startswith("[")
    ]
    dims = 384
    rng = np.random.default_rng(7)
    async with await Store.open(path) as store:
        ids = [str(r[0]) for r in await store.rows("SELECT id FROM records")]
        async with store.transaction() as tx:
            for start in range(0, len(ids), 5000):
                chunk = ids[start : start + 5000]
                matrix = rng.standard_normal((len(chunk), dims)).astype(np.float32)
                matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
                await tx.executemany(
                    "INSERT INTO records_vec(record_id, embedding) VALUES (?, ?)",
                    [(rid, matrix[n].tobytes()) for n, rid in enumerate(chunk)],
                )
            await tx.execute("UPDATE records SET pending_embedding = 0")
            await tx.execute(
                "UPDATE embedding_model SET model = ?, dims = ? WHERE id = 1", (minilm.NAME, dims)
            )
        weights = rng.uniform(0.1, 1.0, len(vocab)).astype(np.float32)
        table = tokens.Table(
            minilm.NAME,
            dims,
            True,
            vocab,
            rng.integers(-127, 128, (len(vocab), dims), dtype=np.int8),
            np.full(len(vocab), 1 / 127, dtype=np.float32),
            weights,
        )
        await tokens.store_table(store, table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("quality", "cost"))
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.what == "quality":
        result: Any = anyio.run(quality)
    else:
        result = cost([int(s) for s in args.sizes.split(",")], args.runs)
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
