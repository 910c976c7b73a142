"""Record scores: what a current record is still worth, recomputed offline by consolidation.

``score = base × access × recency × confidence`` (seed ADR-012), with the real-time rerank's constants
(:mod:`agentctx.core.search`) as the one source of truth, so a search and the digest never disagree on
what decays and how fast:

- ``base = TYPE_WEIGHT[type]`` (decision 1.3, convention 1.2, discovery/bugfix/preference 1.0,
  profile 0.9, handover 0.8);
- ``recency = 0.5 ** (age_days / HALF_LIFE_DAYS[type])``, age from ``valid_from``: decision,
  convention and profile have no half-life and pinned records never decay (1.0); preference 365 d,
  discovery 90 d, bugfix 60 d, handover 14 d. No floor here, unlike the rerank's ``RECENCY_FLOOR``:
  the floor keeps an old but relevant match findable, the score exists to notice what nobody needs;
- ``access = 1 + ACCESS_WEIGHT × min(1, ln(1 + access_count) / ln(1 + ACCESS_SATURATION)) ×
  0.5 ** (days_since_last_access / ACCESS_HALF_LIFE_DAYS)``: every read (``ctx_get`` bumps
  ``access_count`` and ``last_accessed``) lifts the score, by at most half, and the lift fades with
  time since the last read. A record never read scores 1.0 here: unread is not a penalty;
- ``confidence = CONFIDENCE_WEIGHT[confidence]`` (explicit and reinforced 1.0, inferred 0.7).

``records.low_score_since`` records when a score first fell below :data:`~agentctx.store.LOW_SCORE`
and is cleared when it rises again; a record below it for
:data:`~agentctx.store.inventory.PRUNE_AFTER_DAYS` is a prune candidate
(:mod:`agentctx.consolidate.archive`). Only rows whose score or mark changed are written,
:data:`BATCH` per transaction. Score writes do not invalidate digests: the consolidation
rebuilds the digest after scoring anyway, and a score alone never changes a stored record's facts.
"""

from __future__ import annotations

import logging
import math
from datetime import datetime
from typing import TYPE_CHECKING, Any

from agentctx.core import clock
from agentctx.core.search import CONFIDENCE_WEIGHT, HALF_LIFE_DAYS, TYPE_WEIGHT
from agentctx.store import LOW_SCORE

if TYPE_CHECKING:
    from agentctx.consolidate.timebox import TimeBox
    from agentctx.store import Store

log = logging.getLogger("agentctx.consolidate")

ACCESS_WEIGHT = 0.5
ACCESS_SATURATION = 20
ACCESS_HALF_LIFE_DAYS = 30.0
BATCH = 1000
_PRECISION = 6  # decimals kept, so that a rerun at the same moment writes nothing

_SELECT = (
    "SELECT seq, type, confidence, pinned, valid_from, access_count, last_accessed, score, "
    "low_score_since FROM records WHERE superseded_at IS NULL"
)
# Only still-current rows: a record superseded since the read keeps the score it had.
_UPDATE = (
    "UPDATE records SET score = ?, low_score_since = ? WHERE seq = ? AND superseded_at IS NULL"
)


def compute(row: Any, reference: float) -> float:
    """The score of a record row (a mapping with the record's columns) at ``reference`` (epoch s)."""
    record_type = str(row["type"])
    base = TYPE_WEIGHT.get(record_type, 1.0)
    recency = 1.0
    half_life = HALF_LIFE_DAYS.get(record_type)
    if half_life and not row["pinned"]:
        recency = 0.5 ** (clock.age_days(row["valid_from"], reference) / half_life)
    access = 1.0
    count = int(row["access_count"] or 0)
    if count > 0:
        volume = min(1.0, math.log1p(count) / math.log1p(ACCESS_SATURATION))
        since = clock.age_days(row["last_accessed"], reference) if row["last_accessed"] else 0.0
        access += ACCESS_WEIGHT * volume * 0.5 ** (since / ACCESS_HALF_LIFE_DAYS)
    return base * access * recency * CONFIDENCE_WEIGHT.get(str(row["confidence"]), 1.0)


def epoch(stamp: str) -> float:
    """Epoch seconds of a stored time."""
    return datetime.fromisoformat(stamp).timestamp()


async def rescore(
    store: Store,
    project_id: str | None,
    *,
    now: str | None = None,
    timebox: TimeBox | None = None,
) -> int:
    """Recompute the score of every current record of a project (``None``: all); rows written.

    ``now`` (ISO-8601, default the current time) is the moment scored at: tests travel in time.
    """
    stamp = clock.parse_time(now) if now else clock.now()
    reference = epoch(stamp)
    sql, params = _SELECT, []
    if project_id is not None:
        sql, params = f"{_SELECT} AND project_id = ?", [project_id]
    changes: list[tuple[float, str | None, int]] = []
    for row in await store.rows(sql, params):
        value = round(compute(row, reference), _PRECISION)
        low = (row["low_score_since"] or stamp) if value < LOW_SCORE else None
        if value != row["score"] or low != row["low_score_since"]:
            changes.append((value, low, int(row["seq"])))
    written = 0
    for start in range(0, len(changes), BATCH):
        if timebox is not None and timebox.expired():
            log.info("rescore: time box expired, %d scores left for next run", len(changes) - start)
            break
        async with store.transaction() as tx:
            written += await tx.executemany(_UPDATE, changes[start : start + BATCH])
    return written
