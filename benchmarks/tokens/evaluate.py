"""Error table of agentctx.core.tokens.estimate_tokens against real Claude usage.

Usage, from the repository root (project venv)::

    python benchmarks/tokens/evaluate.py [CALIBRATION.jsonl]

Default input: tests/data/token_calibration.jsonl (the shipped subset). Pass the full clean set
written by reference_ctok.py to reproduce the numbers in docs/token-estimate.md.

For every category (and per model) it prints the number of samples, the aggregate ratio
sum(estimate) / sum(true), the mean and median per-sample ratio, the share of samples undercounted
(ratio < 1) and the worst ratio, where "true" is the API's count minus the wrapper overhead of the
sample's message shape. The same table follows against the per-text reference counts of the v3
(Claude 3 .. Opus 4.6) and v4.7 (Opus 4.7+) vocabularies.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from agentctx.core.tokens import estimate_tokens

ROOT = Path(__file__).resolve().parents[2]


def _row(label: str, pairs: list[tuple[float, float]]) -> str:
    ratios = sorted(e / t for e, t in pairs)
    estimated = sum(e for e, _ in pairs)
    true = sum(t for _, t in pairs)
    under = sum(1 for r in ratios if r < 1)
    return (
        f"| {label:<28} | {len(pairs):5d} | {estimated / true:6.3f} | "
        f"{sum(ratios) / len(ratios):6.3f} | {ratios[len(ratios) // 2]:6.3f} | "
        f"{100 * under / len(ratios):5.1f} % | {ratios[0]:6.3f} |"
    )


HEADER = (
    "| category                     |     n |    agg |   mean | median | under   |  worst |\n"
    "|------------------------------|------:|-------:|-------:|-------:|--------:|-------:|"
)


def table(samples: list[dict[str, Any]], truth: str, min_true: float = 0.0) -> str:
    groups: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for sample in samples:
        estimated = float(sum(estimate_tokens(part) for part in sample["parts"]))
        if truth == "real":
            true = float(sample["tokens"]) - float(sample["overhead"])
        else:
            true = float(sample[truth])
        if true < max(min_true, 1.0):
            continue
        groups[sample["category"]].append((estimated, true))
        groups["ALL"].append((estimated, true))
        if truth == "real":
            groups["model " + str(sample["model"]).removeprefix("claude-")].append(
                (estimated, true)
            )
    order = ["prose", "code", "json", "shell", "mixed", "ALL"]
    keys = [k for k in order if k in groups] + sorted(k for k in groups if k not in order)
    return "\n".join([HEADER, *(_row(k, groups[k]) for k in keys)])


def main(argv: list[str]) -> int:
    path = Path(argv[1]) if len(argv) > 1 else ROOT / "tests" / "data" / "token_calibration.jsonl"
    samples = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line]
    print(f"{len(samples)} samples from {path}\n")
    print("estimate / real API usage (minus wrapper overhead):")
    print(table(samples, "real"))
    print("\nsame, samples with >= 50 true tokens:")
    print(table(samples, "real", 50))
    print("\nestimate / reference v3 vocabulary (same texts):")
    print(table(samples, "ref_v3"))
    print("\nestimate / reference v4.7 vocabulary (same texts):")
    print(table(samples, "ref_v47"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
