"""The eval's quality floors: fail when a figure the evals just wrote falls below its floor.

Usage, from the repository root, after ``benchmarks/eval.py`` and ``benchmarks/own_eval/run.py``
(``python3 -m nox -s eval`` runs all three)::

    python benchmarks/quality.py [--results benchmarks/results] [--floors benchmarks/quality_floors.json]

``quality_floors.json`` lists, per figure, the results file, the path of keys inside it and a
``min`` (higher is better) or a ``max`` (lower is better). The floors are the figures of the offline
run when they were recorded (both evals are deterministic offline: a fixed dataset, the offline
MiniLM, recorded model answers), so any lost answer fails; a change that improves a figure should
raise its floor in the same commit. With ``AGENTCTX_EVAL_LIVE`` set the own eval scored the live
model (``own_eval_live.json``), whose figures vary run to run: only DevBench's floors are checked.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def figure(data: Any, path: str) -> float:
    """The number at ``path`` (keys joined by dots) in ``data``."""
    for key in path.split("."):
        data = data[key]
    return float(data)


def check(results: Path, floors: list[dict[str, Any]], *, live: bool) -> list[str]:
    """One line per floor (``ok`` or ``FAIL``); the failures are the lines starting with FAIL."""
    lines = []
    loaded: dict[str, Any] = {}
    for floor in floors:
        name = floor["file"]
        if live and name.startswith("own_eval"):
            continue
        if name not in loaded:
            loaded[name] = json.loads((results / name).read_text())
        try:
            value = figure(loaded[name], floor["path"])
        except (KeyError, TypeError, ValueError):  # a part the run did not measure, e.g. held-out
            lines.append(f"FAIL {name}: {floor['path']} is not in the results (no figure to check)")
            continue
        if "min" in floor:
            ok, bound = value >= floor["min"], f">= {floor['min']}"
        else:
            ok, bound = value <= floor["max"], f"<= {floor['max']}"
        verdict = "ok  " if ok else "FAIL"
        lines.append(f"{verdict} {name}: {floor['path']} = {value:.4g} (floor {bound})")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--results", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument("--floors", type=Path, default=ROOT / "benchmarks" / "quality_floors.json")
    args = parser.parse_args()
    floors = json.loads(args.floors.read_text())["floors"]
    live = os.environ.get("AGENTCTX_EVAL_LIVE", "") not in ("", "0")
    lines = check(args.results, floors, live=live)
    print("\n".join(lines))
    failed = [line for line in lines if line.startswith("FAIL")]
    if failed:
        sys.exit(f"{len(failed)} of {len(lines)} quality floors failed")
    print(f"all {len(lines)} quality floors hold")


if __name__ == "__main__":
    main()
