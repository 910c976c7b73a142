"""Clean the transcript candidates with an offline reference tokenizer and write the test data.

Needs ``ctok`` (PyPI, MIT; an offline reconstruction of Claude's tokenizers, not an agentctx
dependency) in whatever interpreter runs this script, e.g. a scratch venv::

    python -m venv /tmp/ctok-venv && /tmp/ctok-venv/bin/pip install ctok
    /tmp/ctok-venv/bin/python benchmarks/tokens/reference_ctok.py CANDIDATES.jsonl \
        tests/data/token_calibration.jsonl [ALL_CLEAN_SAMPLES.jsonl]

(ctok declares Python >= 3.12; it runs on 3.11 with ``pip install --ignore-requires-python``.)

What the reference is used for, and only for (docs/token-estimate.md):

1. Wrapper overhead. The API wraps every payload in tokens the transcript does not show (reply
   framing, ``<invoke name=...>``-style tool-call markup, tool-result framing). For each structure
   (tool names + parameter names + block count) the overhead is the median of the lowest cluster of
   ``true tokens - reference(content)`` over all samples of that structure. ``tokens - overhead`` is
   the content's true cost; the overhead itself never depends on our estimator.
2. Invisible content. Claude Code sometimes adds text the transcript does not record (system
   reminders about todos, file changes; ~90 or ~1000 tokens). Samples more than ``HIDDEN_SLACK``
   tokens away from their structure's overhead are dropped and counted.
3. A second, per-text reference: the content counts of the v3 family (Claude 3 .. Opus 4.6, the
   models in the transcripts) and of the v4.7 family (Opus 4.7 and later), stored as ``ref_v3`` /
   ``ref_v47`` so the tests can check the estimate against the newer vocabulary too.
"""

from __future__ import annotations

import importlib
import json
import random
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any, cast

Json = dict[str, Any]

#: A structure needs this many samples to pin its overhead down.
MIN_GROUP = 3
#: Residuals within this many tokens above the group minimum form the "no hidden content" cluster.
CLUSTER = 12
#: Distance from the structure overhead beyond which a sample is taken to hold invisible content.
HIDDEN_SLACK = 40
#: Test data budget (bytes) and per-sample cap on payload characters.
MAX_FILE_BYTES = 290_000
MAX_SAMPLE_CHARS = 6_000
PAD = "\u27e8pad\u27e9"


def _ctok_counter() -> Any:
    return importlib.import_module("ctok")


def content_tokens(ctok: Any, text: str, version: str) -> int:
    """Tokens of ``text`` alone: ctok's message framing (pad pieces) removed."""
    if not text:
        return 0
    pieces = cast("list[str]", ctok.tokenize(text, version))
    return sum(1 for piece in pieces if piece != PAD)


def annotate(samples: list[Json]) -> None:
    ctok = _ctok_counter()
    cache: dict[str, tuple[int, int]] = {}
    for sample in samples:
        v3 = v47 = 0
        for part in sample["parts"]:
            if part not in cache:
                cache[part] = (content_tokens(ctok, part, "3.0"), content_tokens(ctok, part, "4.7"))
            v3 += cache[part][0]
            v47 += cache[part][1]
        sample["ref_v3"] = v3
        sample["ref_v47"] = v47


def overheads(samples: list[Json]) -> dict[str, float]:
    """Structure -> wrapper overhead (median of the lowest residual cluster)."""
    residuals: dict[str, list[int]] = defaultdict(list)
    for sample in samples:
        residuals[sample["structure"]].append(int(sample["tokens"]) - int(sample["ref_v3"]))
    result: dict[str, float] = {}
    for structure, values in residuals.items():
        if len(values) < MIN_GROUP:
            continue
        low = min(values)
        cluster = sorted(v for v in values if v <= low + CLUSTER)
        if len(cluster) < MIN_GROUP:
            continue
        result[structure] = float(cluster[len(cluster) // 2])
    return result


def select(clean: list[Json]) -> list[Json]:
    """A size-bounded, category-stratified subset for tests/data (deterministic)."""
    rng = random.Random(20260210)
    groups: dict[tuple[str, str], list[Json]] = defaultdict(list)
    for sample in clean:
        if sum(len(p) for p in sample["parts"]) <= MAX_SAMPLE_CHARS:
            groups[(sample["side"], sample["category"])].append(sample)
    for group in groups.values():
        rng.shuffle(group)
    chosen: list[Json] = []
    size = 0
    # Round-robin over the groups so every category is represented before any grows large.
    while any(groups.values()):
        for key in sorted(groups):
            if not groups[key]:
                continue
            sample = groups[key].pop()
            line = json.dumps(sample, ensure_ascii=False)
            if size + len(line.encode()) + 1 > MAX_FILE_BYTES:
                groups[key].clear()
                continue
            chosen.append(sample)
            size += len(line.encode()) + 1
    chosen.sort(key=lambda s: (s["side"], s["category"], s["source"], s["message_id"]))
    return chosen


def main(argv: list[str]) -> int:
    if len(argv) not in (3, 4):
        print(__doc__)
        return 2
    samples = [json.loads(line) for line in Path(argv[1]).read_text("utf-8").splitlines() if line]
    annotate(samples)
    table = overheads(samples)
    clean: list[Json] = []
    dropped: dict[str, int] = defaultdict(int)
    for sample in samples:
        overhead = table.get(sample["structure"])
        if overhead is None:
            dropped["structure seen < 3 times"] += 1
            continue
        deviation = int(sample["tokens"]) - int(sample["ref_v3"]) - overhead
        if deviation > HIDDEN_SLACK:
            dropped["invisible added content"] += 1
            continue
        if deviation < -HIDDEN_SLACK:
            dropped["prompt shrank (content removed)"] += 1
            continue
        sample["overhead"] = overhead
        clean.append(sample)
    print(f"{len(samples)} candidates, {len(clean)} clean, dropped: {dict(dropped)}")
    deviations = sorted(int(s["tokens"]) - int(s["ref_v3"]) - float(s["overhead"]) for s in clean)
    if deviations:
        q = [deviations[int(p * (len(deviations) - 1))] for p in (0.01, 0.1, 0.5, 0.9, 0.99)]
        print(f"true - overhead - ref_v3 over clean samples: p1/p10/p50/p90/p99 = {q}")
    for structure, overhead in sorted(table.items(), key=lambda kv: kv[0])[:400]:
        count = sum(1 for s in clean if s["structure"] == structure)
        if count >= 10:
            print(f"  overhead {overhead:6.1f}  n={count:4d}  {structure[:110]}")
    chosen = select(clean)
    fields = (
        "side",
        "category",
        "model",
        "source",
        "message_id",
        "structure",
        "tokens",
        "overhead",
        "ref_v3",
        "ref_v47",
        "parts",
    )
    with Path(argv[2]).open("w", encoding="utf-8") as handle:
        for sample in chosen:
            handle.write(json.dumps({k: sample[k] for k in fields}, ensure_ascii=False) + "\n")
    print(f"wrote {len(chosen)} samples to {argv[2]}")
    if len(argv) == 4:
        with Path(argv[3]).open("w", encoding="utf-8") as handle:
            for sample in clean:
                handle.write(json.dumps({k: sample[k] for k in fields}, ensure_ascii=False) + "\n")
        print(f"wrote all {len(clean)} clean samples to {argv[3]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
