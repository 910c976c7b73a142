"""The background table (``agentctx.core.background``) and what the prompt hook reads from it.

A small store makes every word look rare; the shipped table says which words are common wherever
code is discussed. These tests check the table's shape, the builder that makes it, and the rules
that read it (:func:`agentctx.core.search.specificity`, :func:`~agentctx.core.search.content`).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

from agentctx.core import background, search

ROOT = Path(__file__).resolve().parents[1]


def test_the_table_is_sorted_parseable_and_only_holds_common_words() -> None:
    lines = background.TABLE.strip("\n").split("\n")
    assert len(lines) > 1000
    pairs = [(word, float(idf)) for word, idf in (line.split(" ") for line in lines)]
    idfs = [idf for _word, idf in pairs]
    assert idfs == sorted(idfs)  # most common first
    assert all(0 < idf <= search.SPECIFIC_IDF for idf in idfs)  # kept below it, then rounded
    words = [word for word, _idf in pairs]
    assert len(words) == len(set(words))
    searchable = [w for w in words if len(w) > 1 and w not in search.STOPWORDS]
    assert [w for w in searchable if search.query_terms(w) != [w]] == []


def test_common_words_are_not_specific_and_unknown_ones_are() -> None:
    for word in ("run", "test", "error", "file"):
        assert search.specificity(word) < 0.5, word
    for word in ("pgbouncer", "missinggreenlet", "test_numbering", "zzzunknown"):
        assert search.specificity(word) == 1.0, word
    assert search.specificity("run") < search.specificity("again") < 1.0
    # a word is looked up whole: a prefix of a listed word is not that word
    assert "\nhandler " in background.TABLE and "\nhandl " not in background.TABLE
    assert search.specificity("handl") == 1.0 > search.specificity("handler")


def test_content_tells_chit_chat_from_a_question() -> None:
    assert search.content(search.query_terms("run it again")) < search.MIN_CONTENT
    assert search.content(search.query_terms("whats our msrv")) >= search.MIN_CONTENT
    asked = search.query_terms("how do we rotate the redis password")
    assert search.content(asked) >= search.MIN_CONTENT


def test_the_builder_writes_a_module_of_the_same_shape(tmp_path: Path) -> None:
    corpus = tmp_path / "lib"
    corpus.mkdir()
    common = "def run(self):\n    return self.value\n"
    for i in range(40):  # "run" and "self" in every document, "rare_name" in one
        extra = "rare_name = 1\n" if i == 0 else ""
        (corpus / f"m{i}.py").write_text(common + extra)
    out = tmp_path / "table.py"
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "background_words.py"),
         "--corpus", f"python={corpus}", "--out", str(out)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    spec = importlib.util.spec_from_file_location("table", out)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert "\nrun 0.00\n" in module.TABLE and "\nself 0.00\n" in module.TABLE
    assert "\nrare_name " in module.TABLE  # ln(40) = 3.69 < 6: still common enough to list
    assert module.TABLE.index("\nrun ") < module.TABLE.index("\nrare_name ")
