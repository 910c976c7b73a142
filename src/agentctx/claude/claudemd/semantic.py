"""The meaning signal: CLAUDE.md cut into passages, and each record's best cosine with one.

:func:`chunks` cuts a CLAUDE.md into headings, list items, paragraphs, table rows, code blocks and
their sentences; :func:`similarities` embeds them and the records' ``title — body``
(:func:`semantic_text`) and keeps each record's best cosine. :func:`evaluate` runs
:func:`~agentctx.claude.claudemd.assessment.assess` with that signal for the records keywords leave
missing. numpy is imported only when embeddings run.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from agentctx.claude.claudemd.assessment import Assessment, StaleText, assess

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from agentctx.embeddings.models import Embedder
    from agentctx.records import Record

#: Chunks (and record texts) longer than this are cut: the model's cost grows with the length, and
#: a decision is stated in a sentence. Files beyond :data:`CHUNKS_MAX` chunks are embedded in part.
CHUNK_CHARS = 300
CHUNKS_MAX = 1000
EMBED_BATCH = 64
LIST_MARK = re.compile(r"^(?:[-*+]|\d+[.)])\s+")
_HEADING = re.compile(r"^#{1,6}\s+")
_FENCE = re.compile(r"^(`{3,}|~{3,})")
_TABLE_RULE = re.compile(r"^\|?[\s:|-]+\|?$")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9`*_(\"'])")


def semantic_text(record: Record) -> str:
    """The text of a record compared with CLAUDE.md chunks: ``title — body``.

    :func:`agentctx.embeddings.vecstore.record_text` without its ``[type] [date] [project]`` labels, which no
    CLAUDE.md line carries (they lower a paraphrase's cosine by about 0.05), cut like a chunk.
    """
    return f"{record.title} — {' '.join(record.body.split())}"[:CHUNK_CHARS]


def _plain(text: str) -> str:
    """One line: list mark and heading hashes dropped, emphasis and code marks removed."""
    text = _HEADING.sub("", LIST_MARK.sub("", text.strip()))
    return " ".join(text.translate(str.maketrans("", "", "*`")).split())


def chunks(text: str) -> list[str]:
    """The passages of a CLAUDE.md compared with records, in order, each once.

    Headings, list items (with their continuation lines), paragraphs, table rows and fenced code
    blocks are one chunk each; a paragraph or item of several sentences adds its sentences. At
    most :data:`CHUNKS_MAX`, each at most :data:`CHUNK_CHARS` characters.
    """
    units: list[str] = []
    current: list[str] = []
    fence: list[str] | None = None
    marker = ""

    def flush() -> None:
        if current:
            units.append(" ".join(current))
            current.clear()

    for line in text.splitlines():
        stripped = line.strip()
        if fence is not None:
            if stripped.startswith(marker):
                units.append(" ".join(fence))
                fence = None
            else:
                fence.append(stripped)
            continue
        opening = _FENCE.match(stripped)
        if opening:
            flush()
            fence, marker = [], opening.group(1)
        elif not stripped or stripped.startswith("<!--") or stripped == "---":
            flush()
        elif _HEADING.match(stripped) or stripped.startswith("|"):
            flush()
            if not _TABLE_RULE.match(stripped):
                units.append(" ".join(stripped.replace("|", " ").split()))
        elif LIST_MARK.match(stripped):
            flush()
            current.append(stripped)
        else:
            current.append(stripped)
    flush()
    if fence:
        units.append(" ".join(fence))
    found: dict[str, None] = {}
    for unit in units:
        for part in _SENTENCE_END.split(_plain(unit)):
            part = part.strip()[:CHUNK_CHARS]
            if sum(c.isalpha() for c in part) >= 3:
                found[part] = None
    return list(found)[:CHUNKS_MAX]


async def similarities(
    records: Sequence[Record],
    files: list[tuple[str, str]],
    embedder: Embedder,
    *,
    expired: Callable[[], bool] | None = None,
) -> dict[str, float] | None:
    """Each record's best cosine with a chunk of ``files`` (empty when there are no chunks).

    Embeds in batches of :data:`EMBED_BATCH` in a worker thread; returns None, leaving the rest
    undone, when ``expired()`` turns true between two batches.
    """
    import numpy as np

    passages = list(dict.fromkeys(c for _, text in files for c in chunks(text)))[:CHUNKS_MAX]
    if not records or not passages:
        return {}
    vectors = []
    for texts in (passages, [semantic_text(r) for r in records]):
        # Batches of similar lengths: the model pads each batch to its longest text.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        rows = np.zeros((len(texts), embedder.dims), dtype=np.float32)
        for start in range(0, len(order), EMBED_BATCH):
            if expired is not None and expired():
                return None
            batch = order[start : start + EMBED_BATCH]
            rows[batch] = await embedder.embed([texts[i] for i in batch])
        vectors.append(rows)
    best = (vectors[1] @ vectors[0].T).max(axis=1)  # unit vectors: the dot product is the cosine
    return {r.id: round(float(c), 4) for r, c in zip(records, best, strict=True)}


async def evaluate(
    records: Sequence[Record],
    files: list[tuple[str, str]],
    embedder: Embedder | None = None,
    *,
    expired: Callable[[], bool] | None = None,
) -> tuple[list[Assessment], list[StaleText]] | None:
    """:func:`assess` with the meaning signal for the records keywords leave missing.

    Contradicted records are not embedded: the stale text, on the same topic, would "cover"
    them. Without an embedder, keywords alone; None when ``expired()`` turned true meanwhile.
    """
    found, stale = assess(records, files)
    unsure = [a.record for a in found if a.missing and not a.contradicted]
    if embedder is None or not unsure:
        return found, stale
    similarity = await similarities(unsure, files, embedder, expired=expired)
    if similarity is None:
        return None
    return assess(records, files, similarity, model=embedder.name)
