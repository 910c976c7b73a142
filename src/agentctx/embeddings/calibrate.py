"""Cosine thresholds for an embedding model, derived from the shipped calibration set.

**The set** (``calibration.json`` beside this module, written for agentctx) holds short
developer-memory texts in labelled pairs, across several stacks (a Django backend, a TypeScript
monorepo, a Rust CLI, a Go service, infrastructure, a data pipeline, mobile apps, a Spring
service):

- ``answers`` (a): a question and the record that answers it;
- ``non_answers`` (b): the same question and a record of the same project that shares its words
  or topic but does not answer it;
- ``duplicates`` (c): two phrasings of one fact (what dedupe should merge);
- ``distinct`` (d): two different facts on one topic that must not merge; ``markers`` says the
  two differ in a number or a polarity word, which dedupe's merge without an LLM checks
  (:func:`agentctx.consolidate.dedupe.same_markers`, besides a differing content word) and an
  embedding barely sees;
- ``drift`` (e): a decision, a CLAUDE.md line that states it in other words (``stated``) and one
  of the same file that does not (``unstated``).

Each pair is embedded as its use compares it: a question as a search query (with the model's
query prefix) against a record's :func:`agentctx.embeddings.vecstore.record_text`; the two records of (c) and
(d) both as record texts; a drift record's ``title — body``
(:func:`agentctx.claude.claudemd.semantic.semantic_text`) against the CLAUDE.md line as its chunk
(:func:`agentctx.claude.claudemd.semantic.chunks`). All texts go to the model in one call.

**The rules.** ``q(p, X)`` is the ``p`` quantile of the cosines of the pairs ``X`` (linear
interpolation); ``(d')`` are the (d) pairs without a ``markers`` difference.

=================  ===============================================  ==========  ===========
threshold          rule                                             MiniLM set  measured
=================  ===============================================  ==========  ===========
similarity floor   q(0.50, b): half the same-domain non-answers     0.30        0.30
                   fall below it (the rest is kept, labelled weak)
strong             (q(0.95, b) + q(0.75, a)) / 2: halfway between  0.54        0.55
                   where non-answers stop and answers are common
merge candidate    max(q(0.25, c), q(0.50, d')): three paraphrases  0.92        0.92
                   in four are asked about; never half the
                   distinct pairs
auto-merge         max(q(0.95, c), q(0.95, d')): only the closest   0.97        0.97
                   paraphrases, above nearly every distinct pair
                   that the marker check cannot tell apart
drift covered      max(q(0.05, e stated), q(0.95, e unstated))      0.62        0.60
drift floor        q(0.90, e unstated): nine lines in ten that do   0.34        0.30
                   not state the record give it no credit
=================  ===============================================  ==========  ===========

Quantiles and midpoints follow a model's scale: a model whose cosines all run higher gets higher
thresholds. The pairs are then put in order (floor below strong, candidate below auto-merge,
drift floor below covered, everything below 1) by :func:`derive`. For all-MiniLM-L6-v2 the
rules land within :data:`MINILM_TOLERANCE` of the measured values (``tests/test_calibration.py``),
but the measured values stay in use for it (:mod:`agentctx.embeddings.thresholds`): a calibration
is for models without them. What the set cannot show for MiniLM: one (d') pair (two warehouse
sizes, MEDIUM and LARGE) is at 0.988, above any auto-merge bound that paraphrases allow; only the
LLM tells those apart (docs/consolidation.md).

:func:`ensure` computes a model's calibration once (per model and version of the set) and keeps it
(:func:`agentctx.embeddings.thresholds.store`); consolidation's embed step and ``agentctx model
reembed`` call it when they load a model. Not on the hook path (numpy; a model call).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

import anyio
import numpy as np

from agentctx.core import clock
from agentctx.embeddings import thresholds
from agentctx.embeddings.thresholds import Thresholds

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agentctx.embeddings.models import Embedder

log = logging.getLogger("agentctx.calibrate")

SET_FILE = "calibration.json"
#: The date in the record texts of the set (``[type] [date] [project] title — body``).
SET_DATE = "2026-01-15"
#: How close the rules must land to all-MiniLM-L6-v2's measured values (tests/test_calibration.py).
MINILM_TOLERANCE = 0.05
#: The smallest gap kept between the two thresholds of a pair, and below a cosine of 1.
GAP = 0.01
_LIST_MARK = re.compile(r"^(?:[-*+]|\d+[.)])\s+")


@dataclass(frozen=True, slots=True)
class Cosines:
    """The cosine of each labelled pair of the set under one model, by kind (set order)."""

    answers: tuple[float, ...]
    non_answers: tuple[float, ...]
    duplicates: tuple[float, ...]
    distinct: tuple[float, ...]
    distinct_markers: tuple[bool, ...]
    stated: tuple[float, ...]
    unstated: tuple[float, ...]

    @property
    def distinct_unmarked(self) -> tuple[float, ...]:
        """The (d) pairs that do not differ in a number or a polarity word."""
        return tuple(
            c for c, marked in zip(self.distinct, self.distinct_markers, strict=True) if not marked
        )


def set_bytes() -> bytes:
    """The shipped calibration set, as stored in the package."""
    return (resources.files("agentctx.embeddings") / SET_FILE).read_bytes()


def load_set() -> dict[str, Any]:
    """The shipped calibration set (see the module doc for its parts)."""
    data: dict[str, Any] = json.loads(set_bytes())
    return data


def set_digest() -> str:
    """A short digest of the set: a stored calibration of another version of it is redone."""
    return hashlib.sha256(set_bytes()).hexdigest()[:16]


def record_text(project: str, record_type: str, title: str, body: str) -> str:
    """:func:`agentctx.embeddings.vecstore.record_text` of a set record (dated :data:`SET_DATE`)."""
    return f"[{record_type}] [{SET_DATE}] [{project}] {title} — {body}"


def drift_text(title: str, body: str) -> str:
    """A drift record as :func:`agentctx.claude.claudemd.semantic.semantic_text` gives it."""
    return f"{title} — {' '.join(body.split())}"


def chunk_text(line: str) -> str:
    """A one-sentence CLAUDE.md line as :func:`agentctx.claude.claudemd.semantic.chunks` gives it:
    the list mark dropped, emphasis and code marks removed."""
    plain = _LIST_MARK.sub("", line.strip())
    return " ".join(plain.translate(str.maketrans("", "", "*`")).split())


def pairs(data: dict[str, Any], query_prefix: str = "") -> dict[str, list[tuple[str, str]]]:
    """The set's text pairs by kind, as the model sees them (see the module doc)."""

    def question(item: dict[str, Any]) -> str:
        return query_prefix + str(item["query"])

    def answer(item: dict[str, Any]) -> str:
        r = item["record"]
        return record_text(item["project"], r["type"], r["title"], r["body"])

    def side(item: dict[str, Any], key: str) -> str:
        r = item[key]
        return record_text(item["project"], item["type"], r["title"], r["body"])

    def decision(item: dict[str, Any]) -> str:
        return drift_text(item["record"]["title"], item["record"]["body"])

    return {
        "answers": [(question(i), answer(i)) for i in data["answers"]],
        "non_answers": [(question(i), answer(i)) for i in data["non_answers"]],
        "duplicates": [(side(i, "a"), side(i, "b")) for i in data["duplicates"]],
        "distinct": [(side(i, "a"), side(i, "b")) for i in data["distinct"]],
        "stated": [(decision(i), chunk_text(i["stated"])) for i in data["drift"]],
        "unstated": [(decision(i), chunk_text(i["unstated"])) for i in data["drift"]],
    }


def cosines(embedder: Embedder, data: dict[str, Any] | None = None) -> Cosines:
    """Each labelled pair's cosine under ``embedder`` (all texts in one call; blocking)."""
    data = load_set() if data is None else data
    by_kind = pairs(data, embedder.query_prefix)
    texts = list(dict.fromkeys(t for found in by_kind.values() for pair in found for t in pair))
    index = {text: n for n, text in enumerate(texts)}
    vectors = embedder.embed_sync(texts)

    def sims(kind: str) -> tuple[float, ...]:
        return tuple(float(np.dot(vectors[index[a]], vectors[index[b]])) for a, b in by_kind[kind])

    return Cosines(
        answers=sims("answers"),
        non_answers=sims("non_answers"),
        duplicates=sims("duplicates"),
        distinct=sims("distinct"),
        distinct_markers=tuple(bool(i["markers"]) for i in data["distinct"]),
        stated=sims("stated"),
        unstated=sims("unstated"),
    )


def _q(values: Sequence[float], p: float) -> float:
    return float(np.quantile(np.asarray(values, dtype=np.float64), p))


def derive(found: Cosines) -> Thresholds:
    """The thresholds the rules of the module doc give for these cosines."""
    floor = _q(found.non_answers, 0.50)
    strong = (_q(found.non_answers, 0.95) + _q(found.answers, 0.75)) / 2
    unmarked = found.distinct_unmarked or found.distinct
    merge_min = max(_q(found.duplicates, 0.25), _q(unmarked, 0.50))
    auto_merge = max(_q(found.duplicates, 0.95), _q(unmarked, 0.95))
    covered = max(_q(found.stated, 0.05), _q(found.unstated, 0.95))
    drift_floor = _q(found.unstated, 0.90)
    strong = min(max(strong, floor + GAP), 1 - GAP)
    floor = min(floor, strong - GAP)
    auto_merge = min(max(auto_merge, merge_min + GAP), 1 - GAP)
    merge_min = min(merge_min, auto_merge - GAP)
    covered = min(max(covered, drift_floor + GAP), 1 - GAP)
    drift_floor = min(drift_floor, covered - GAP)
    return Thresholds(
        similarity_floor=floor,
        strong_similarity=strong,
        merge_min=merge_min,
        auto_merge=auto_merge,
        drift_floor=drift_floor,
        drift_covered=covered,
    )


def calibrate(embedder: Embedder) -> Thresholds:
    """``embedder``'s thresholds, derived from the shipped set (one model call; blocking)."""
    return derive(cosines(embedder))


def current(model: str) -> bool:
    """True when ``model`` has a stored calibration made from this version of the set."""
    return (
        thresholds.calibrated(model) is not None and thresholds.stored_digest(model) == set_digest()
    )


async def ensure(embedder: Embedder) -> Thresholds | None:
    """The model's stored calibration, computed and stored first if there is none (or it was made
    from another version of the set). None for a model with measured values: those are used."""
    if thresholds.measured(embedder.name):
        return None
    if current(embedder.name):
        return thresholds.calibrated(embedder.name)
    found = await anyio.to_thread.run_sync(calibrate, embedder)
    digest, at = set_digest(), clock.now()
    await anyio.to_thread.run_sync(lambda: thresholds.store(embedder.name, found, digest, at=at))
    log.info("calibrated the cosine thresholds of %s: %s", embedder.name, found.to_dict())
    return found
