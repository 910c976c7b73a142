"""Cosine thresholds by embedding model: measured values first, then a stored calibration, then
the defaults (docs/retrieval.md, "Thresholds per model").

A cosine scale is the model's own: a floor measured for all-MiniLM-L6-v2 means nothing for a model
whose unrelated texts already sit at 0.5. Four things read a threshold by the name of the model
that made the vectors (``Embedder.name``, or the store's recorded vector model):

- ``ctx_search``'s cosine floor and strong label (:func:`similarity_floor`,
  :func:`strong_similarity`; :func:`agentctx.retrieval.hybrid.floor_for`);
- dedupe's merge candidates and its merge without an LLM (:func:`merge_bounds`;
  :mod:`agentctx.consolidate.dedupe`);
- CLAUDE.md drift's ``(floor, covered)`` meaning bounds (:func:`drift_bounds`;
  :mod:`agentctx.claude.claudemd.assessment`).

Each answers from the first of: the **measured** tables below (values measured on this project's
data for one model; a measured value always wins), the **calibration** stored for the model
(:mod:`agentctx.embeddings.calibrate` derives one from the shipped calibration set when
consolidation or ``agentctx model reembed`` first loads a model without measured values; kept in
``state/thresholds.json`` under the agentctx home), and else today's **defaults**: no cosine floor
and no strong cosine (hybrid search judges by keywords), dedupe's 0.92 / 0.97, drift's strict
(0.50, 0.80).

Standard library and :mod:`agentctx.core` only (the prompt hook's import chain may reach it).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from agentctx.core import files, home

if TYPE_CHECKING:
    from collections.abc import Callable

T = TypeVar("T")
D = TypeVar("D")

MINILM = "sentence-transformers/all-MiniLM-L6-v2"
#: MiniLM's int8 variant (:data:`agentctx.embeddings.models.INT8_VARIANTS`) takes MiniLM's
#: measured values: its vectors are at cosine 0.9995 to MiniLM's on average, 0.9987 at the lowest
#: (docs/retrieval.md, "A lighter model"; the first variant, ``:int8``, was at 0.994), but for
#: dedupe's merge candidate (:data:`MERGE_BOUNDS`). It is the default (``embedding.int8`` on).
MINILM_INT8 = MINILM + ":int8v2"

#: Cosine floors of ``ctx_search``'s vector hits, by embedding model name: measured on the tuning
#: data (benchmarks/precision_eval/tune_search.py; the answers' similarity against the
#: unanswerable queries' nearest records).
SIMILARITY_FLOOR: dict[str, float] = {MINILM: 0.30, MINILM_INT8: 0.30}
#: The cosine at which a ``ctx_search`` hit is ``strong`` on its own, by model (measured as the
#: floor is).
STRONG_SIMILARITY: dict[str, float] = {MINILM: 0.55, MINILM_INT8: 0.55}
#: Dedupe's ``(candidate, auto-merge)`` cosines for a model neither measured nor calibrated: the
#: values measured for all-MiniLM-L6-v2 (docs/consolidation.md), which every model used before.
MERGE_DEFAULT = (0.92, 0.97)
#: Dedupe's ``(candidate, auto-merge)`` cosines, by model (measured: docs/consolidation.md).
#: The variant's merge candidate is its own, by a hair: the calibration rule gives it 0.9145
#: (MiniLM 0.9152), but at 0.92 one of the set's paraphrase pairs falls under (0.9186; MiniLM's
#: is at 0.9200), so 64% of them would be asked about against MiniLM's 68%; at 0.915, as many as
#: MiniLM at 0.92 or more, with the same share of distinct pairs.
MERGE_BOUNDS: dict[str, tuple[float, float]] = {MINILM: MERGE_DEFAULT, MINILM_INT8: (0.915, 0.97)}
#: CLAUDE.md drift's ``(floor, covered)`` cosines, by model: measured for all-MiniLM-L6-v2
#: (docs/consolidation.md): paraphrases 0.29-0.81, the best unrelated chunk of a 1,000-chunk
#: document at most 0.47.
DRIFT_BOUNDS: dict[str, tuple[float, float]] = {MINILM: (0.30, 0.60), MINILM_INT8: (0.30, 0.60)}
#: Drift bounds of a model neither measured nor calibrated: strict, after the bge authors' advice
#: to filter similar pairs at 0.8 or above.
DRIFT_DEFAULT = (0.50, 0.80)

#: The file (under the home's ``state/``) that keeps each model's calibration.
STATE_FILE = "thresholds.json"
STATE_VERSION = 1

Source = Literal["measured", "calibrated", "default"]


@dataclass(frozen=True, slots=True)
class Thresholds:
    """One model's cosine thresholds (what :func:`agentctx.embeddings.calibrate.calibrate` gives)."""

    similarity_floor: float
    strong_similarity: float
    merge_min: float
    auto_merge: float
    drift_floor: float
    drift_covered: float

    def to_dict(self) -> dict[str, float]:
        """Plain data, rounded to 4 decimals (the state file, ``--json`` output)."""
        return {name: round(value, 4) for name, value in asdict(self).items()}

    @classmethod
    def from_dict(cls, data: Any) -> Thresholds | None:
        """The thresholds of :meth:`to_dict`'s data; None when anything is missing or odd."""
        if not isinstance(data, dict):
            return None
        values: dict[str, float] = {}
        for field in fields(cls):
            value = data.get(field.name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                return None
            if not -1.0 <= float(value) <= 1.0:
                return None
            values[field.name] = float(value)
        return cls(**values)


def measured(model: str | None) -> bool:
    """True when every threshold of ``model`` has a measured value (no calibration needed)."""
    return (
        model is not None
        and model in SIMILARITY_FLOOR
        and model in STRONG_SIMILARITY
        and model in MERGE_BOUNDS
        and model in DRIFT_BOUNDS
    )


def _lookup(
    model: str | None, table: dict[str, T], pick: Callable[[Thresholds], T], default: D
) -> T | D:
    """``model``'s measured value in ``table``, else ``pick`` of its calibration, else ``default``."""
    if model is None:
        return default
    if model in table:
        return table[model]
    found = calibrated(model)
    return pick(found) if found is not None else default


def similarity_floor(model: str | None) -> float | None:
    """``ctx_search``'s cosine floor for ``model``; None: the model has none (keywords judge)."""
    return _lookup(model, SIMILARITY_FLOOR, lambda t: t.similarity_floor, None)


def strong_similarity(model: str | None) -> float | None:
    """The cosine of a ``strong`` ``ctx_search`` hit for ``model``; None: labelled by keywords."""
    return _lookup(model, STRONG_SIMILARITY, lambda t: t.strong_similarity, None)


def merge_bounds(model: str | None) -> tuple[float, float]:
    """Dedupe's ``(candidate, auto-merge)`` cosines for ``model``."""
    return _lookup(model, MERGE_BOUNDS, lambda t: (t.merge_min, t.auto_merge), MERGE_DEFAULT)


def drift_bounds(model: str | None) -> tuple[float, float]:
    """CLAUDE.md drift's ``(floor, covered)`` cosines for ``model``."""
    return _lookup(model, DRIFT_BOUNDS, lambda t: (t.drift_floor, t.drift_covered), DRIFT_DEFAULT)


def source(model: str | None) -> Source:
    """Where ``model``'s thresholds come from (measured wins over calibrated)."""
    if measured(model):
        return "measured"
    return "calibrated" if model is not None and calibrated(model) is not None else "default"


# -- the stored calibrations -------------------------------------------------------------------


def state_path() -> str:
    """The file that keeps the calibrations (``state/thresholds.json`` under the home)."""
    return os.path.join(home.sub("state"), STATE_FILE)


_read_cache: tuple[tuple[str, int, int], dict[str, Any]] | None = None


def _stored() -> dict[str, Any]:
    """The state file's ``models`` entry (empty when absent or unreadable), re-read on change."""
    global _read_cache
    from agentctx.core import nofollow

    path = state_path()
    try:
        fd = nofollow.open_fd(path, os.O_RDONLY)  # a symlink or a FIFO there: nothing stored
    except OSError:
        return {}
    key = (path, -1, -1)
    try:
        info = os.fstat(fd)
        key = (path, info.st_mtime_ns, info.st_size)
        if _read_cache is not None and _read_cache[0] == key:
            return _read_cache[1]
        with os.fdopen(os.dup(fd), encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):  # unreadable: as if nothing were stored (rewritten next time)
        data = {}
    finally:
        os.close(fd)
    models = data.get("models") if isinstance(data, dict) else None
    found = models if isinstance(models, dict) else {}
    _read_cache = (key, found)
    return found


def calibrated(model: str) -> Thresholds | None:
    """The calibration stored for ``model`` (whether or not it has measured values)."""
    entry = _stored().get(model)
    return Thresholds.from_dict(entry.get("thresholds")) if isinstance(entry, dict) else None


def stored_digest(model: str) -> str | None:
    """The calibration set digest ``model``'s stored calibration was derived from."""
    entry = _stored().get(model)
    digest = entry.get("set") if isinstance(entry, dict) else None
    return digest if isinstance(digest, str) else None


def store(model: str, thresholds: Thresholds, digest: str, *, at: str) -> None:
    """Keep ``model``'s calibration (the other models' are kept too); owner-only, atomic."""
    models = dict(_stored())
    models[model] = {"thresholds": thresholds.to_dict(), "set": digest, "at": at}
    data = {"version": STATE_VERSION, "models": models}
    home.ensure_sub("state")
    text = json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    files.write_atomic(state_path(), text.encode("utf-8"), mode=0o600)
