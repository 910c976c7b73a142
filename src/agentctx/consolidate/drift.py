"""Consolidation step 6: each record's CLAUDE.md drift score, for the digest's drift note.

For one project, the current explicit or reinforced decisions and conventions are judged against
the root's ``CLAUDE.md`` and ``.claude/CLAUDE.md`` by :func:`agentctx.claude.claudemd.evaluate` (keyword
coverage, plus embedding similarity when a model is loaded), the very judgement ``agentctx sync``
and ``ctx_sync_claudemd`` make, and each gets ``records.claudemd_drift_score``:

- missing (neither signal finds it): above 0.5, up to 1.0 when nothing of it is there;
- covered: 0.4 or less;
- contradicted (a superseded predecessor's text is still in CLAUDE.md): 1.0, since the file
  says the opposite of the current record; the contradiction itself is listed in the report;
- every other current record of the project (inferred ones, other types): 0.

A project without any CLAUDE.md gets 1.0 on every checked record: nothing reflects them, and the
note tells the developer that ``agentctx sync`` can write one. A project whose root is unknown or
gone is skipped: its scores stay as they are.

The digest counts current decisions and conventions scoring 0.5 or more (``records_drift``) and
shows its note from two. Scores are written in one transaction, only where they change, without
marking the project changed: the orchestrator rebuilds the digest after all steps, and
:attr:`DriftReport.candidates_changed` tells it whether this step changed the count. An expired
time box (checked before each embedding batch and before the write) leaves everything as it was.

Embedding CLAUDE.md costs seconds, so a completed judgement leaves a fingerprint of its inputs (the
files, the project's records, the model) in ``state/``; the next run skips the step
when nothing of it changed.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from agentctx.claude import claudemd
from agentctx.core import files, home
from agentctx.retrieval.digest import DRIFT_THRESHOLD

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from agentctx.claude.claudemd import StaleText
    from agentctx.consolidate.timebox import TimeBox
    from agentctx.embeddings.models import Embedder
    from agentctx.records import Record, RecordType
    from agentctx.store import Store, Transaction

# The digest's own count (digest._DRIFT_SQL), so that "changed" means the note changed.
_CANDIDATES_SQL = f"""
SELECT count(*) FROM records WHERE project_id = ? AND superseded_at IS NULL
  AND claudemd_drift_score >= {DRIFT_THRESHOLD} AND type IN ('decision', 'convention')
"""
_SET_SQL = (
    "UPDATE records SET claudemd_drift_score = ? WHERE id = ? AND superseded_at IS NULL "
    "AND claudemd_drift_score IS NOT ?"
)
_CLEAR_ALL_SQL = (
    "UPDATE records SET claudemd_drift_score = 0 WHERE project_id = ? AND superseded_at IS NULL "
    "AND claudemd_drift_score != 0"
)
_CLEAR_OTHERS_SQL = (
    "UPDATE records SET claudemd_drift_score = 0 WHERE project_id = ? AND superseded_at IS NULL "
    "AND claudemd_drift_score != 0 AND type NOT IN ('decision', 'convention')"
)


@dataclass(frozen=True, slots=True)
class RecordDrift:
    """One checked record's score and the signals behind it (``missing`` as ``agentctx sync``
    lists it; a contradicted record is a candidate even when it is not missing)."""

    id: str
    type: RecordType
    title: str
    score: float
    coverage: float
    similarity: float | None
    missing: bool
    contradicted_by: str | None


@dataclass(slots=True)
class DriftReport:
    """What the drift step found and wrote for one project."""

    project_id: str
    files: list[str] = field(default_factory=list)
    checked: int = 0
    #: Current decisions and conventions at or above 0.5, before and after this step.
    previous_candidates: int = 0
    candidates: int = 0
    updated: int = 0
    records: list[RecordDrift] = field(default_factory=list)
    contradictions: list[StaleText] = field(default_factory=list)
    method: str = claudemd.METHOD
    unfinished: bool = False
    skipped: str | None = None

    @property
    def candidates_changed(self) -> bool:
        """Whether the digest's drift count differs now (its note must be rebuilt)."""
        return self.candidates != self.previous_candidates

    def to_dict(self) -> dict[str, Any]:
        """The report as plain data, ``candidates_changed`` included."""
        return {**asdict(self), "candidates_changed": self.candidates_changed}


async def score_drift(
    store: Store,
    project_id: str,
    project_root: str | None,
    *,
    embedder: Embedder | None,
    timebox: TimeBox,
) -> DriftReport:
    """Set ``claudemd_drift_score`` for the project's records from its CLAUDE.md files."""
    report = DriftReport(project_id)
    if timebox.expired():
        report.unfinished = True
        return report
    if not project_root or not await anyio.Path(project_root).is_dir():
        report.skipped = "the project's root folder is unknown or gone"
        return report
    files = await claudemd.discover(project_root, project_root)
    report.files = [f.path for f in files]
    if not files:  # no CLAUDE.md is no drift: nothing in the project says otherwise
        report.skipped = "no CLAUDE.md in the project (`agentctx sync --apply` creates one)"
        async with store.transaction() as tx:
            report.previous_candidates = await _count(tx, project_id)
            report.updated = await tx.execute(_CLEAR_ALL_SQL, (project_id,))
            report.candidates = 0
            if report.updated:
                tx.mark_project_changed(project_id)
        await anyio.to_thread.run_sync(
            _save_seal, project_id, ""
        )  # no judgement to keep: a returning CLAUDE.md is judged anew
        return report
    records = await claudemd.load_records(store, project_id)
    seal = _fingerprint(files, records, embedder)
    if _last_seal(project_id) == seal:
        report.skipped = "CLAUDE.md and the records are unchanged since the last run"
        rows = await store.rows(_CANDIDATES_SQL, (project_id,))
        report.previous_candidates = report.candidates = int(rows[0][0])
        return report
    judged = await claudemd.evaluate(
        records, claudemd.user_views(files), embedder, expired=timebox.expired
    )
    if judged is None or timebox.expired():
        report.unfinished = True
        return report
    assessments, report.contradictions = judged
    report.checked = len(assessments)
    report.method = claudemd.method(embedder.name if embedder is not None else None)
    report.records = [
        RecordDrift(
            id=a.record.id,
            type=a.record.type,
            title=a.record.title,
            score=a.score,
            coverage=round(a.coverage, 2),
            similarity=a.similarity,
            missing=a.missing,
            contradicted_by=a.contradicted,
        )
        for a in assessments
    ]
    scores = {a.record.id: a.score for a in assessments}
    for record in records:
        if record.is_current:
            scores.setdefault(record.id, 0.0)
    stored = {r.id: r.claudemd_drift_score for r in records}
    changes = [(i, score) for i, score in scores.items() if stored[i] != score]
    async with store.transaction() as tx:
        report.previous_candidates = await _count(tx, project_id)
        for record_id, score in changes:
            report.updated += await tx.execute(_SET_SQL, (score, record_id, score))
        report.updated += await tx.execute(_CLEAR_OTHERS_SQL, (project_id,))
        report.candidates = await _count(tx, project_id)
    await anyio.to_thread.run_sync(_save_seal, project_id, seal)
    return report


def _fingerprint(
    files: Sequence[claudemd.ClaudeMd], records: Sequence[Record], embedder: Embedder | None
) -> str:
    """What the judgement depends on: the files, the records and the model (no model: keywords)."""
    digest = hashlib.sha256(claudemd.METHOD.encode())
    digest.update((embedder.name if embedder is not None else "-").encode())
    for item in files:
        digest.update(f"\0{item.path}\0{item.text}".encode())
    for r in sorted(records, key=lambda r: r.id):
        fields = (r.id, r.type, r.title, r.body, r.confidence, r.superseded_by or "")
        digest.update(("\0".join(fields) + "\0").encode())
    return digest.hexdigest()


def _seal_path(project_id: str) -> str:
    return os.path.join(
        home.sub("state"), f"drift-{hashlib.sha256(project_id.encode()).hexdigest()[:24]}"
    )


def _last_seal(project_id: str) -> str | None:
    from agentctx.core import nofollow

    try:
        return nofollow.read_bytes(_seal_path(project_id), 4096).decode("ascii").strip()
    except (OSError, ValueError):
        return None


def _save_seal(project_id: str, seal: str) -> None:
    """Remember a completed judgement (best effort: without it the next run judges again)."""
    try:
        home.ensure_sub("state")
        files.write_atomic(_seal_path(project_id), seal.encode("ascii"))
    except (OSError, UnicodeEncodeError):
        pass


def _offer_path(project_id: str) -> str:
    return os.path.join(
        home.sub("state"), f"sync-offer-{hashlib.sha256(project_id.encode()).hexdigest()[:24]}"
    )


def sync_offer_due(project_id: str, report: Mapping[str, Any]) -> bool:
    """Whether the digest should offer ``agentctx sync --apply``: the drift step found no
    CLAUDE.md (``report``: its result) and the offer was never made for this project."""
    return str(report.get("skipped") or "").startswith("no CLAUDE.md") and not os.path.exists(
        _offer_path(project_id)
    )


def mark_sync_offered(project_id: str) -> None:
    """Remember the offer (best effort: without it the next digest offers again)."""
    try:
        home.ensure_sub("state")
        files.write_atomic(_offer_path(project_id), b"offered\n")
    except OSError:
        pass


async def _count(tx: Transaction, project_id: str) -> int:
    rows = await tx.rows(_CANDIDATES_SQL, (project_id,))
    return int(rows[0][0])
