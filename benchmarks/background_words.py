"""Build ``src/agentctx/core/background.py``: how common the common words are in code and its prose.

Usage (the shipped table was built from the four corpora below, each as named)::

    python benchmarks/background_words.py \\
        --corpus python=<CPython 3.11 Lib> --corpus go=/usr/share/go-1.19/src \\
        --corpus rust=/usr/src/rustc-1.63.0/library --corpus typescript=<typescript 5.6.3>/lib

(Debian bookworm packages ``golang-1.19-src`` and ``rust-src``; ``npm pack typescript@5.6.3``.)

A small store makes every word look rare: in 200 records "run", "again" or "handler" match a few
records each, so their store IDF says they are strong evidence. The prompt hook weighs a prompt's
terms by this background table too (:func:`agentctx.core.search.specificity`). Each corpus is the
standard library of a language (code, doc comments, and prose), cut into 30-line documents; a
word's background IDF is ``ln(1 / r)`` with ``r`` the share of documents holding it, averaged over
the languages with equal weight, so no one language decides what is common. Only words with an
IDF below :data:`KEEP_BELOW_IDF` are kept: any other word is fully specific. Word counts are facts
about the corpora; no text of them is copied.
"""

from __future__ import annotations

import argparse
import math
import os
import sysconfig
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = ROOT / "src" / "agentctx" / "core" / "background.py"
LINES_PER_DOCUMENT = 30
KEEP_BELOW_IDF = 6.0  # agentctx.core.search.SPECIFIC_IDF: rarer words weigh fully anyway
SOURCES = (".py", ".go", ".rs", ".ts")
SKIPPED = {"site-packages", "__pycache__", "testdata", "vendor", "node_modules"}


def words(text: str) -> set[str]:
    """The tokens the search makes of ``text`` (agentctx.core.search.query_terms, less stop words)."""
    return set("".join(c if c.isalnum() or c == "_" else " " for c in text.lower()).split())


def count(root: Path) -> tuple[int, Counter[str]]:
    """Documents and, per word, the documents holding it, over the source files under ``root``."""
    documents = 0
    found: Counter[str] = Counter()
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = sorted(d for d in subfolders if d not in SKIPPED)
        for name in sorted(files):
            if not name.endswith(SOURCES):
                continue
            lines = (Path(folder) / name).read_text(errors="replace").splitlines()
            for start in range(0, len(lines), LINES_PER_DOCUMENT):
                tokens = words("\n".join(lines[start : start + LINES_PER_DOCUMENT]))
                if tokens:
                    documents += 1
                    found.update(tokens)
    return documents, found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--corpus",
        action="append",
        metavar="NAME=DIR",
        help="a language's standard library (repeatable; default: this Python's)",
    )
    parser.add_argument("--out", type=Path, default=TARGET, help="the module to write")
    args = parser.parse_args()
    corpora = dict(c.split("=", 1) for c in args.corpus or [])
    if not corpora:
        corpora = {"python": sysconfig.get_paths()["stdlib"]}
    shares: dict[str, float] = {}
    described = []
    for name, folder in corpora.items():
        documents, found = count(Path(folder))
        described.append(f"{name}: {documents:,} documents")
        for word, n in found.items():
            shares[word] = shares.get(word, 0.0) + n / documents / len(corpora)
    common = sorted(
        ((word, max(0.0, -math.log(share))) for word, share in shares.items()),
        key=lambda pair: (pair[1], pair[0]),
    )
    table = "".join(f"{word} {idf:.2f}\n" for word, idf in common if idf < KEEP_BELOW_IDF)
    kept = table.count("\n")
    args.out.write_text(
        '"""How common the common words are in code and its prose (generated: do not edit).\n\n'
        "Built by ``python benchmarks/background_words.py`` from the standard libraries of\n"
        f"{len(corpora)} languages in {LINES_PER_DOCUMENT}-line documents:\n"
        + "".join(f"- {line}\n" for line in described)
        + "\n"
        "Read by :func:`agentctx.core.search.specificity`. ``TABLE`` holds one ``word idf`` line per\n"
        "word, most common first, between newlines (a lookup is one ``str.find``); ``idf`` is\n"
        "``ln(1 / share of documents holding the word)``, the shares averaged over the languages.\n"
        '"""\n\n'
        f'TABLE = """\n{table}"""\n'
    )
    print(f"{args.out}: {kept:,} words ({'; '.join(described)})")


if __name__ == "__main__":
    main()
