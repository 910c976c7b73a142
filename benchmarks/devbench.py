"""DevBench: the dataset, how a memory maps to a record, and the eval's fixed shape.

The dataset (``benchmarks/data/devbench/``) is read as it is; a memory's record type, title,
keywords and ``valid_from`` are decided here (``eval.py``'s ``build`` applies them, its docstring
describes them). k, the categories, the retrievers' names and labels and the larger-project
constants are shared by the runner (``eval.py``) and the report (``eval_report.py``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from agentctx.core import clock
from agentctx.core.schema import TITLE_MAX
from own_eval import floors

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "data" / "devbench"
K = 5
CATEGORIES = ("exact", "semantic", "cross_type")
TYPE_MAP = {
    "decision": "decision",
    "learning": "discovery",
    "bug-fix": "bugfix",
    "architecture": "decision",
    "configuration": "convention",
}
#: mcp-memory-service's published DevBench figures (benchmarks/data/devbench/README.md):
#: all-MiniLM-L6-v2 vectors, no LLM. category -> (recall@5, MRR).
PUBLISHED = {"exact": (1.0, 1.0), "semantic": (0.8, 0.7), "cross_type": (0.9, 0.867)}
RETRIEVERS = (
    ("hook", "hook: UserPromptSubmit ranking (keywords), top 5"),
    ("hook_injected", "hook: what it injects (≤ 3 records)"),
    ("hook_unfloored", "hook ranking without the relevance floor (before it)"),
    ("keyword", "`ctx_search`, keyword (until the model is ready)"),
    ("keyword_strong", "`ctx_search`, keyword: only the hits labelled strong"),
    ("vector", "vector only (MiniLM int8 over our record text)"),
    ("hybrid", "`ctx_search`, hybrid (keyword + vector, RRF)"),
    ("hybrid_unfloored", "`ctx_search`, hybrid without the floor (before it)"),
    ("hybrid_strong", "`ctx_search`, hybrid: only the hits labelled strong"),
)
#: Synthetic notes of the larger-project check (``benchmarks/synthetic_store.py``, seed 1), and the
#: memory id their hits are scored as.
LARGER = 500
SYNTHETIC = "synthetic"
#: The rules compared in the larger project.
LARGER_RULES = (
    floors.SearchRule("none"),
    floors.MINILM_RULE,
    *[floors.SearchRule("background", z, 0.4) for z in (2.2, 3.0, 4.0)],
)


@dataclass(frozen=True, slots=True)
class Memory:
    """One memory of the dataset."""

    id: str
    content: str
    tags: list[str]
    memory_type: str
    created_at: str


@dataclass(frozen=True, slots=True)
class Question:
    """One question: its category and the memory ids that answer it."""

    id: str
    category: str
    text: str
    expected: list[str]


def load_dataset() -> tuple[list[Memory], list[Question]]:
    """The dataset's memories and questions, in its order."""
    data = json.loads((DATA / "devbench_dataset.json").read_text())
    memories = [
        Memory(m["id"], m["content"], m["tags"], m["memory_type"], m["created_at_iso"])
        for m in data["memories"]
    ]
    questions = [
        Question(q["id"], q["category"], q["question"], q["expected_tags"]) for q in data["queries"]
    ]
    return memories, questions


def title_of(content: str) -> str:
    """The first sentence, cut at a word to at most TITLE_MAX characters."""
    end = content.find(". ")
    sentence = content if end < 0 else content[: end + 1]
    if len(sentence) <= TITLE_MAX:
        return sentence
    return sentence[: TITLE_MAX - 1].rsplit(" ", 1)[0].rstrip(",;:") + "…"


def keywords_of(memory: Memory) -> list[str]:
    """The memory's topical tags (not ``devbench`` nor ``bench:<id>``), as a record's keywords."""
    return [t for t in memory.tags if t != "devbench" and not t.startswith("bench:")]


def shifted(memories: list[Memory]) -> dict[str, str]:
    """valid_from per memory: the dataset's dates moved so that the newest is one day old."""
    times = {m.id: datetime.fromisoformat(m.created_at.replace("Z", "+00:00")) for m in memories}
    shift = datetime.now(UTC) - timedelta(days=1) - max(times.values())
    return {mid: clock.format_time(t + shift) for mid, t in times.items()}
