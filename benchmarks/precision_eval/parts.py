"""Two finer meaning signals for the prompt hook's tiers, measured (issue 25; research, not shipped).

    python benchmarks/precision_eval/parts.py --cache DIR [--leave-one-out] [--cost]

A record's pooled vector blurs its details: a hard negative shares the record's topic but asks a
detail the record does not state. Two signals look at parts, with the model the eval runs
(all-MiniLM-L6-v2, its int8 variant, :func:`minilm.assemble_int8`) loaded here with ONNX Runtime
and the ``tokenizers`` library, checked against fastembed's vectors (:func:`check`):

1. **parts**: the record's title, each sentence of its body and its whole ``title — body`` are
   embedded apart (mean-pooled, as the server does); ``part_max`` is the prompt's best cosine to
   any part, ``part_z`` that cosine on the prompt's own scale (the server's spread, as
   ``cosine_z``), ``part_margin_z`` its distance above the next candidate's, in deviations.
2. **tokens** (late interaction, MaxSim): the model's last hidden state per token, unit length;
   for each content token of the prompt (not a special token, punctuation or a stop word of
   :data:`agentctx.core.search.STOPWORDS`) its best cosine to any token of the record;
   ``tok_mean`` the mean weighted by the word's :func:`~agentctx.core.search.specificity`,
   ``tok_min`` the lowest (a prompt word nothing in the record covers), ``tok_margin`` the mean's
   distance above the next candidate's.

The signals join each candidate's in ``tune_tiers.py`` through its ``extra`` hook (a per-candidate
dict in each collected item, :func:`tune_tiers.signals_of`); they count once
``tiers.WEIGHTS`` names them. Printed: each signal's area under the curve of "this candidate
answers the prompt" on the blind-written pool and ours, and ``--leave-one-out`` the harness's own
folds for the shipped signals refitted, + parts, + tokens, + both; ``--cost`` what each costs at
prompt time. Results: benchmarks/results/tiers_parts_research.md.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import minilm  # noqa: E402
from agentctx.core import search, tiers  # noqa: E402
from precision_eval import dataset, run, tune_tiers  # noqa: E402

#: Tokens per text: the model's own limit (the server embeds the first 128 of a record's text;
#: parts are short, and the token signal should see the whole body).
MAX_TOKENS = 256
SERVER_TOKENS = 128
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+")

PARTS = ("part_z", "part_margin_z")
TOKENS = ("tok_mean", "tok_min", "tok_margin")
REPORTED = ("part_max", *PARTS, *TOKENS, "tokg_mean", "tokg_min", "tokg_margin")


class Model:
    """all-MiniLM-L6-v2 as ONNX Runtime runs it, without pooling."""

    def __init__(self, folder: Path, threads: int | None = None) -> None:
        import importlib

        from tokenizers import Tokenizer

        ort: Any = importlib.import_module("onnxruntime")  # fastembed's runtime (no type stubs)

        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        self.session = ort.InferenceSession(str(folder / "model.onnx"), options)
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.no_padding()

    def hidden(self, texts: list[str], limit: int = MAX_TOKENS) -> list[tuple[Any, np.ndarray]]:
        """Per text: its encoding and its tokens' last hidden states (no padding), in batches of 16."""
        self.tokenizer.enable_truncation(limit)
        out: list[tuple[Any, np.ndarray]] = []
        for start in range(0, len(texts), 16):
            encs = self.tokenizer.encode_batch(texts[start : start + 16])
            width = max(len(e.ids) for e in encs)
            ids = np.zeros((len(encs), width), dtype=np.int64)
            mask = np.zeros_like(ids)
            for row, e in enumerate(encs):
                ids[row, : len(e.ids)] = e.ids
                mask[row, : len(e.ids)] = 1
            states = self.session.run(
                None,
                {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
            )[0]
            out += [(e, states[row, : len(e.ids)]) for row, e in enumerate(encs)]
        return out

    def pooled(self, texts: list[str], limit: int = MAX_TOKENS) -> np.ndarray:
        """Mean-pooled unit vectors (what fastembed gives)."""
        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        vecs = np.stack([states.mean(axis=0) for _e, states in self.hidden(texts, limit)])
        unit: np.ndarray = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
        return unit

    def tokens(self, texts: list[str], *, content: bool) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per text: its unit token vectors (no special tokens; ``content``: only content words'
        tokens) and each one's weight (its word's specificity)."""
        out = []
        for text, (enc, states) in zip(texts, self.hidden(texts), strict=True):
            keep, weights = [], []
            for i, (special, word_id) in enumerate(
                zip(enc.special_tokens_mask, enc.word_ids, strict=True)
            ):
                if special or word_id is None:
                    continue
                token = enc.tokens[i].removeprefix("##")
                if not any(ch.isalnum() for ch in token):
                    continue
                if content:
                    span = enc.word_to_chars(word_id)
                    word = text[span[0] : span[1]].lower() if span else token
                    if word in search.STOPWORDS or len(word) < 2:
                        continue
                    weights.append(search.specificity(word))
                else:
                    weights.append(1.0)
                keep.append(i)
            vecs = states[keep]
            vecs = vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-9)
            out.append((vecs, np.array(weights)))
        return out


def record_text(row: dict[str, Any]) -> str:
    return f"{row['title']} — {row['body']}"


def split_parts(row: dict[str, Any]) -> list[str]:
    """The record's title and each sentence of its body (at least three letters)."""
    sentences = [s.strip() for s in _SENTENCE.split(str(row["body"])) if s and s.strip()]
    return [p for p in [str(row["title"]), *sentences] if sum(ch.isalpha() for ch in p) >= 3]


def features(model: Model, items: list[dict[str, Any]], prompts: dict[str, Any]) -> None:
    """Set each item's ``extra``: every candidate's part and token signals."""
    rows: dict[str, dict[str, Any]] = {}
    for item in items:
        for c in tune_tiers._candidates(item):
            rows[c.id] = c.row
    ids = sorted(rows)
    texts = {rid: record_text(rows[rid]) for rid in ids}
    parts = {rid: split_parts(rows[rid]) for rid in ids}
    flat = [p for rid in ids for p in parts[rid]]
    part_vecs = model.pooled(flat)
    whole_vecs = model.pooled([texts[rid] for rid in ids])
    by_part: dict[str, np.ndarray] = {}
    at = 0
    for n, rid in enumerate(ids):
        k = len(parts[rid])
        by_part[rid] = np.vstack([part_vecs[at : at + k], whole_vecs[n : n + 1]])
        at += k
    rec_tokens = dict(
        zip(ids, (v for v, _w in model.tokens([texts[r] for r in ids], content=False)), strict=True)
    )
    texts_p = [prompts[item["prompt"]].text for item in items]
    p_vecs = model.pooled(texts_p)
    p_tokens = model.tokens(texts_p, content=True)
    for item, pv, (pt, pw) in zip(items, p_vecs, p_tokens, strict=True):
        cands = tune_tiers._candidates(item)
        mean, dev = tune_tiers.neighbours(item).spread or tiers.DEFAULT_SPREAD
        dev = max(dev, 0.01)
        best = [float((by_part[c.id] @ pv).max()) for c in cands]
        tok_mean, tok_min = [], []
        for c in cands:
            if len(pt) == 0:
                tok_mean.append(0.0)
                tok_min.append(0.0)
                continue
            sims = (pt @ rec_tokens[c.id].T).max(axis=1)
            w = pw if pw.sum() > 0 else np.ones_like(pw)
            tok_mean.append(float((sims * w).sum() / w.sum()))
            tok_min.append(float(sims.min()))
        extra = {}
        for i, c in enumerate(cands):
            others = best[:i] + best[i + 1 :]
            other_tok = tok_mean[:i] + tok_mean[i + 1 :]
            extra[c.id] = {
                "part_max": best[i],
                "part_z": (best[i] - mean) / dev / tiers.Z_UNIT,
                "part_margin_z": (best[i] - max(others, default=mean)) / dev,
                # centred near the prompts' typical values, so that the fit's bias need not carry them
                "tok_mean": (tok_mean[i] - 0.5) * 4,
                "tok_min": (tok_min[i] - 0.3) * 4,
                "tok_margin": (tok_mean[i] - max(other_tok, default=tok_mean[i])) * 10,
            }
        item["extra"] = extra


def check(model: Model, folder: Path, texts: list[str]) -> float:
    """The lowest cosine between this module's pooled vectors and fastembed's (the server's
    embedder, 128 tokens) for ``texts``."""
    from agentctx.embeddings import models

    embedder = models.load_model(minilm.settings(folder))
    assert embedder is not None
    theirs = embedder.embed_sync(texts)
    ours = model.pooled(texts, SERVER_TOKENS)
    return float((theirs * ours).sum(axis=1).min())


def auc(scores: list[float], labels: list[float]) -> float:
    """The area under the ROC curve (ties half), by ranks."""
    s, y = np.array(scores), np.array(labels)
    pos, neg = s[y == 1], s[y == 0]
    if not len(pos) or not len(neg):
        return float("nan")
    greater = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return float(greater / (len(pos) * len(neg)))


def aucs(runs: list[tuple[list[dict[str, Any]], dict[str, str]]], prompts: dict[str, Any]) -> None:
    names = [n for n in tiers.WEIGHTS if n != "bias"] + ["cosine", *REPORTED]
    for pool in ("written blind", "written by us"):
        members = {p.project for p in prompts.values() if tune_tiers.pool_of(p.project) == pool}
        for (label, (items, to_key)), firsts in itertools.product(
            zip(("with cues", "without cues"), runs, strict=True), (False, True)
        ):
            table: dict[str, list[float]] = {n: [] for n in names}
            ys: list[float] = []
            for item in items:
                p = prompts[item["prompt"]]
                if p.project not in members or item["thin"]:
                    continue
                cands = tune_tiers._candidates(item)
                found = tune_tiers.signals_of(item, cands, search.query_terms(p.text))
                unknown = min((cos for _r, cos in item["neighbours"]), default=0.0)
                near = max(cands, key=lambda c: c.cosine if c.cosine is not None else -1)
                top = {near.id} | {c.id for c in cands if c.keyword_rank == 1}
                for c, sig in zip(cands, found, strict=True):
                    if firsts and c.id not in top:
                        continue
                    ys.append(float(to_key[c.id] in p.answers))
                    for n in names:
                        table[n].append(c.cosine if n == "cosine" and c.cosine is not None
                                        else unknown if n == "cosine" else sig[n])  # fmt: skip
            cells = ", ".join(f"{n} {auc(v, ys):.3f}" for n, v in table.items())
            which = "the first by meaning and by keywords" if firsts else "every candidate"
            print(f"AUC, {pool}, {label}, {which} ({int(sum(ys))} answers of {len(ys)}): {cells}")


def cost(model: Model, items: list[dict[str, Any]], prompts: dict[str, Any]) -> None:
    """Signal 1: parts per record and their storage; signal 2: the time to embed the top 12
    candidates' texts without pooling (median of 20 prompts, wall and CPU, the load noted)."""
    rows: dict[str, dict[str, Any]] = {}
    for item in items:
        for c in tune_tiers._candidates(item):
            rows[c.id] = c.row
    counts = [len(split_parts(r)) + 1 for r in rows.values()]
    print(f"parts per record (title, sentences, whole): mean {statistics.fmean(counts):.2f}, "
          f"median {statistics.median(counts)}, max {max(counts)} over {len(counts)} records; "
          f"storage extra per record at 384 float32: {statistics.fmean(counts) * 1536 - 1536:.0f} B "
          f"(int8: {statistics.fmean(counts) * 384 - 384:.0f} B)")  # fmt: skip
    chosen = [it for it in items if not it["thin"]][:: max(1, len(items) // 20)][:20]
    model.tokenizer.enable_truncation(MAX_TOKENS)
    lengths = [len(model.tokenizer.encode(record_text(r)).ids) for r in rows.values()]
    print(
        f"tokens per record text: median {statistics.median(lengths)}, mean "
        f"{statistics.fmean(lengths):.0f}, max {max(lengths)}"
    )
    for top in (12, 3):
        walls, cpus = [], []
        for item in chosen:
            cands = sorted(tune_tiers._candidates(item), key=lambda c: -(c.cosine or 0))[:top]
            texts = [record_text(c.row) for c in cands]
            w0, c0 = time.perf_counter(), time.process_time()
            model.tokens(texts, content=False)
            walls.append((time.perf_counter() - w0) * 1000)
            cpus.append((time.process_time() - c0) * 1000)
        print(
            f"top {top} unpooled (one ONNX thread): wall median {statistics.median(walls):.0f} ms, "
            f"CPU median {statistics.median(cpus):.0f} ms over {len(walls)} prompts; load "
            f"{os.getloadavg()}"
        )
    one = [prompts[it["prompt"]].text for it in chosen]
    walls = []
    for text in one:
        w0 = time.perf_counter()
        model.pooled([text])
        walls.append((time.perf_counter() - w0) * 1000)
    print(f"for scale, one prompt pooled: wall median {statistics.median(walls):.1f} ms")


def curve(runs: list[tuple[list[dict[str, Any]], dict[str, str]]], prompts: dict[str, Any]) -> None:
    """Threshold-free, leaving one project out: each project's evidence under the weights fitted
    without it (the harness's fit); the area under the curve of that evidence, and the figures of
    one pair of scores for all projects, from a fine grid: the best named + whole within 40
    tokens per unanswerable prompt and 10 per chit-chat prompt, pooled (the two scores are chosen
    on the pool itself, the same way for every set of signals: a comparison of the signals, not an
    estimate for a held-out part)."""
    projects = sorted({p.project for p in prompts.values()})
    steps = [round(v * 0.25, 2) for v in range(-8, 9)]
    grid = [(w, line) for w in steps for line in steps if line <= w]
    sums: dict[tuple[str, int, tuple[float, float]], dict[str, float]] = {}
    oof: dict[tuple[str, int, bool], tuple[list[float], list[float]]] = {}
    tops: dict[tuple[str, int], list[tuple[float, str, bool]]] = {}
    for out in projects:
        xs: list[list[float]] = []
        ys: list[float] = []
        for items, to_key in runs:
            x, y = tune_tiers.examples(items, to_key, prompts, set(projects) - {out})
            xs += x
            ys += y
        tiers.WEIGHTS.update(tune_tiers.fit(xs, ys))
        pool = tune_tiers.pool_of(out)
        for i, (items, to_key) in enumerate(runs):
            for item in items:
                p = prompts[item["prompt"]]
                if p.project != out or item["thin"]:
                    continue
                cands = tune_tiers._scored(item, search.query_terms(p.text))
                first = max(cands, key=lambda c: c.evidence or 0.0, default=None)
                if first is not None:
                    tops.setdefault((pool, i), []).append(
                        (first.evidence or 0.0, p.kind, to_key[first.id] in p.answers)
                    )
                near = max(cands, key=lambda c: c.cosine if c.cosine is not None else -1)
                top = {near.id} | {c.id for c in cands if c.keyword_rank == 1}
                for c in cands:
                    for firsts in (False, True):
                        if firsts and c.id not in top:
                            continue
                        scores, labels = oof.setdefault((pool, i, firsts), ([], []))
                        scores.append(c.evidence or 0.0)
                        labels.append(float(to_key[c.id] in p.answers))
            for w, line in grid:
                tune_tiers.apply({"WHOLE_SCORE": w, "LINE_SCORE": line})
                f = tune_tiers.measure(items, to_key, prompts, {out})
                total = sums.setdefault((pool, i, (w, line)), {})
                for key, n in (("named3", "answerable"), ("whole3", "answerable"),
                               ("neg_tokens", "negatives"), ("chat_tokens", "chitchat")):  # fmt: skip
                    total[key] = total.get(key, 0.0) + f[key] * f[n]
                for n in ("answerable", "negatives", "chitchat"):
                    total[n] = total.get(n, 0.0) + f[n]
    for (pool, i, firsts), (scores, labels) in sorted(oof.items()):
        which = "the first by meaning and by keywords" if firsts else "every candidate"
        print(f"  evidence left out, AUC, {pool}, run {i}, {which}: {auc(scores, labels):.3f}")
    for (pool, i), firsts_of in sorted(tops.items()):
        negatives = sorted((e for e, kind, _a in firsts_of if kind != "answerable"), reverse=True)
        answered = [(e, a) for e, kind, a in firsts_of if kind == "answerable"]
        cells = []
        for share in (0.1, 0.2, 0.3):
            cut = negatives[int(share * len(negatives))]
            hit = sum(1 for e, a in answered if a and e > cut) / len(answered)
            cells.append(
                f"{share:.0%} of unanswerable prompts pass: answer first and past {hit:.1%}"
            )
        print(
            f"  prompt level, {pool}, run {i}, the first candidate by evidence: " + "; ".join(cells)
        )
    for pool in ("written blind", "written by us"):
        for i in range(len(runs)):
            rows = []
            for settings in grid:
                t = sums[(pool, i, settings)]
                named, whole = t["named3"] / t["answerable"], t["whole3"] / t["answerable"]
                neg, chat = (
                    t["neg_tokens"] / t["negatives"],
                    t["chat_tokens"] / max(t["chitchat"], 1),
                )
                rows.append((named, whole, neg, chat, settings))
            within = [r for r in rows if r[2] <= 40 and r[3] <= 10]
            best = max(within, key=lambda r: (r[0] + r[1], -r[2]), default=None)
            best_named = max(within, key=lambda r: (r[0], r[1], -r[2]), default=None)
            free = [r for r in rows if r[2] <= 40]
            best_free = max(free, key=lambda r: (r[0] + r[1], -r[2]), default=None)
            for label, r in (
                ("best named + whole within 40 / 10 tokens", best),
                ("best named within 40 / 10 tokens", best_named),
                (
                    "best named + whole within 40 tokens per negative, chit-chat unbounded",
                    best_free,
                ),
            ):
                if r is not None:
                    print(f"  {pool}, run {i}, {label}: named {r[0]:.1%} "
                          f"whole {r[1]:.1%} neg {r[2]:.1f} chat {r[3]:.1f} at {r[4]}")  # fmt: skip


def gate(items: list[dict[str, Any]], prompts: dict[str, Any]) -> None:
    """Add the token signals gated as the keyword relevance is (``tokg_*``): a prompt with fewer
    than :data:`agentctx.core.tiers.MIN_CONTENT_TERMS` content words covers nothing (its raw mean
    and min 0, no margin), so that one word of a chit-chat prompt found in a record is no match."""
    for item in items:
        terms = search.query_terms(prompts[item["prompt"]].text)
        words = sum(1 for term in terms if search.specificity(term) >= tiers.CONTENT_TERM)
        few = words < tiers.MIN_CONTENT_TERMS
        for sig in item["extra"].values():
            sig["tokg_mean"] = -2.0 if few else sig["tok_mean"]
            sig["tokg_min"] = -1.2 if few else sig["tok_min"]
            sig["tokg_margin"] = 0.0 if few else sig["tok_margin"]


GATED = ("tokg_mean", "tokg_min", "tokg_margin")
CONFIGS = {
    "baseline (shipped signals refitted)": (),
    "+ parts": PARTS,
    "+ tokens": TOKENS,
    "+ both": PARTS + TOKENS,
    "+ tokens gated": GATED,
    "+ both gated": PARTS + GATED,
    "+ part_max": ("part_max",),
    "+ tokg_margin": ("tokg_margin",),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--cache", type=Path, required=True, help="tune_tiers.py's --cache folder")
    parser.add_argument("--leave-one-out", action="store_true")
    parser.add_argument("--configs", default=",".join(CONFIGS), help="which (comma-separated)")
    parser.add_argument("--cost", action="store_true")
    parser.add_argument("--curve", action="store_true", help="threshold-free comparison (curve)")
    args = parser.parse_args()
    base = run.tuning_only(dataset.load())
    prompts = {p.id: p for p in base.prompts}
    folder = minilm.assemble_int8(args.cache / "minilm")
    model = Model(folder, threads=1)
    runs = []
    for cues in ("with", "without"):
        items, to_key = json.loads((args.cache / f"{cues}.json").read_text())
        kept = args.cache / f"parts-{cues}.json"
        if kept.exists():
            extra = json.loads(kept.read_text())
            for item in items:
                item["extra"] = extra[item["prompt"]]
        else:
            t0 = time.perf_counter()
            features(model, items, prompts)
            print(f"signals of the {cues}-cues run in {time.perf_counter() - t0:.0f} s", flush=True)
            kept.write_text(json.dumps({item["prompt"]: item["extra"] for item in items}))
        gate(items, prompts)
        runs.append((items, to_key))
    sample = [prompts[p].text for p in list(prompts)[:40]]
    sample += [record_text(r) for r in list(runs[0][0][0]["rows"].values())[:40]]
    print(f"pooled vectors against fastembed's, lowest cosine over {len(sample)} texts: "
          f"{check(model, folder, sample):.5f}")  # fmt: skip
    aucs(runs, prompts)
    if args.cost:
        cost(model, runs[1][0], prompts)
    shipped = dict(tiers.WEIGHTS), tiers.WHOLE_SCORE, tiers.LINE_SCORE
    for name in args.configs.split(",") if args.leave_one_out or args.curve else ():
        tiers.WEIGHTS.clear()
        tiers.WEIGHTS.update(shipped[0])
        tiers.WEIGHTS.update(dict.fromkeys(CONFIGS[name], 0.0))
        tune_tiers.apply({"WHOLE_SCORE": shipped[1], "LINE_SCORE": shipped[2]})
        print(f"\n== {name}: {list(tiers.WEIGHTS)} (load {os.getloadavg()})", flush=True)
        t0 = time.perf_counter()
        if args.leave_one_out:
            tune_tiers.leave_one_out(runs, prompts)
        if args.curve:
            curve(runs, prompts)
        print(f"({time.perf_counter() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
