"""Timing of agentctx.core.tokens on the hook path (a sanity check, not a test: no asserts).

Usage, from the repository root (project venv)::

    python benchmarks/tokens/bench_speed.py

Prints the median time of ``estimate_tokens`` and ``truncate_to_tokens`` over texts of 1,000,
10,000 and 100,000 characters cut from the calibration data (real transcript text: prose, code,
shell output), from pure ASCII prose and from CJK text, and the import cost of the module in a fresh
interpreter (``python -X importtime``).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from agentctx.core.tokens import estimate_tokens, truncate_to_tokens

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

ROOT = Path(__file__).resolve().parents[2]


def _median_us(func: Callable[[], object], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        func()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e6


def _corpus() -> str:
    path = ROOT / "tests" / "data" / "token_calibration.jsonl"
    parts = [
        part
        for line in path.read_text("utf-8").splitlines()
        if line
        for part in json.loads(line)["parts"]
    ]
    text = "\n".join(parts)
    while len(text) < 100_000:
        text += text
    return text


def main() -> int:
    mixed = _corpus()
    prose = "The quick brown fox jumps over the lazy dog, again and again. " * 2000
    cjk = "日本語のテキストと中文文本。" * 10000
    print("| text | chars | estimate_tokens µs | truncate to 1,500 tok / 10,000 chars µs |")
    print("|---|--:|--:|--:|")
    for name, source in (("transcripts", mixed), ("ASCII prose", prose), ("CJK", cjk)):
        for size in (1_000, 10_000, 100_000):
            text = source[:size]
            repeat = 2000 if size <= 10_000 else 200
            est = _median_us(lambda t=text: estimate_tokens(t), repeat)  # type: ignore[misc]
            cut = _median_us(
                lambda t=text: truncate_to_tokens(t, 1500, 10_000),  # type: ignore[misc]
                max(repeat // 10, 20),
            )
            print(f"| {name} | {size:,} | {est:.1f} | {cut:.1f} |")
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import agentctx.core.tokens"],
        capture_output=True,
        text=True,
        check=True,
    )
    print("\nimport cost (python -X importtime, µs: self | cumulative | module):")
    for line in out.stderr.splitlines():
        if "agentctx" in line or "__future__" in line:
            print("  " + line.removeprefix("import time:").strip())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
