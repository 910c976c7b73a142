"""The developer profile (ADR-010): the current global preferences, and their Markdown mirror.

A global preference is a record with ``project_id = 'global'`` and ``type = 'preference'``. The profile
is read, corrected and pruned here; the CLI (``agentctx profile``) is a thin adapter over it.

* :func:`show` lists the current ones with their confidence and their **evidence**: the number of
  distinct sessions that showed the preference, i.e. the sessions of every version in its supersession
  chain (a merged near-duplicate or an edited version keeps its evidence) plus the sessions linked to
  them by ``derives_from`` edges (each later session that repeated it, see
  ``Transaction.mark_seen_in``). A preference typed by hand has no session and evidence 0.
* :func:`edit` supersedes a preference with a corrected version (source ``cli``, confidence
  ``explicit``, since the developer stated it).
* :func:`clear` retires a preference without a successor: ``superseded_at`` is set and
  ``superseded_by`` stays NULL. Nothing is deleted, so ``--as-of`` and history still answer, but it is no
  longer current: it leaves the profile, the digest and search.
* ``profile/preferences.md`` in the home mirrors the current profile. It is regenerated from the
  database (after every edit and clear, and by consolidation) and never read back. It holds no
  timestamps, so an unchanged profile leaves it byte-identical.
"""

from __future__ import annotations

import logging
import os
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import anyio

from agentctx.core import clock, digests, home, schema
from agentctx.core.errors import ConflictError, ValidationError
from agentctx.store import HISTORY_MAX_DEPTH
from agentctx.team import write_if_changed

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agentctx.records import Record
    from agentctx.store import Store

log = logging.getLogger("agentctx.preferences")

MIRROR_DIR = "profile"
MIRROR_NAME = "preferences.md"
#: The confidences the SessionStart digest injects in every session (retrieval.digest._PREFERENCES_SQL).
IN_DIGEST = ("explicit", "reinforced")
EDIT_RATIONALE = "edited with agentctx profile edit"


def evidence_sql(live: str, select: str) -> str:
    """A query counting each live record's distinct sessions: ``WITH live, chain, seen`` + ``select``.

    ``live`` selects the ids to count for; the CTE walks every version of each (back along
    superseded_by, archived versions too), then collects the distinct sessions of those versions:
    their ``session_id`` and their ``derives_from`` edges that do not name a record. ``select`` reads
    ``live``, and ``seen(root, session)`` grouped as it likes. One definition of "evidence" for
    reinforcement (:mod:`agentctx.consolidate.reinforce`) and for :func:`show`.
    """
    return f"""
WITH RECURSIVE
  live(id) AS ({live}),
  chain(root, id, depth) AS (
    SELECT id, id, 0 FROM live
    UNION
    SELECT chain.root, r.id, chain.depth + 1 FROM records r JOIN chain ON r.superseded_by = chain.id
    WHERE chain.depth < {HISTORY_MAX_DEPTH}
    UNION
    SELECT chain.root, a.id, chain.depth + 1 FROM records_archive a
    JOIN chain ON a.superseded_by = chain.id WHERE chain.depth < {HISTORY_MAX_DEPTH}),
  seen(root, session) AS (
    SELECT chain.root, r.session_id FROM chain JOIN records r ON r.id = chain.id
    WHERE coalesce(r.session_id, '') != ''
    UNION
    SELECT chain.root, a.session_id FROM chain JOIN records_archive a ON a.id = chain.id
    WHERE coalesce(a.session_id, '') != ''
    UNION
    SELECT chain.root, e.to_id FROM chain JOIN edges e
      ON e.from_id = chain.id AND e.rel_type = 'derives_from'
    WHERE NOT EXISTS (SELECT 1 FROM records x WHERE x.id = e.to_id)
      AND NOT EXISTS (SELECT 1 FROM records_archive x WHERE x.id = e.to_id))
{select}"""


SESSIONS_BY_ROOT = (
    "LEFT JOIN (SELECT root, count(DISTINCT session) AS n FROM seen GROUP BY root) s "
    "ON s.root = r.id"
)
_FIELDS = (
    "r.id, r.title, r.body, r.confidence, r.source, r.pinned, r.reinforce_count, r.valid_from, "
    "r.recorded_at, r.keywords"
)
# The distinct sessions of every version of each current global preference: the evidence that
# reinforcement counts (consolidate/reinforce.py), so the two always agree.
_SHOW_SQL = evidence_sql(
    f"SELECT id FROM records WHERE project_id = '{schema.GLOBAL_PROJECT_ID}' "
    "AND type = 'preference' AND superseded_at IS NULL",
    f"SELECT {_FIELDS}, coalesce(s.n, 0) AS evidence FROM records r JOIN live USING (id) "
    f"{SESSIONS_BY_ROOT}",
)


@dataclass(frozen=True, slots=True)
class ProfileEntry:
    """One current global preference as the profile shows it."""

    id: str
    title: str
    body: str
    confidence: str
    evidence: int
    reinforce_count: int
    source: str
    pinned: bool
    valid_from: str
    recorded_at: str
    keywords: str

    @property
    def in_digest(self) -> bool:
        """True when every session's digest carries it (explicit or reinforced)."""
        return self.confidence in IN_DIGEST

    def to_dict(self) -> dict[str, Any]:
        """Plain data (the ``--json`` shape), ``in_digest`` included."""
        return {**asdict(self), "in_digest": self.in_digest}


def _order(entry: ProfileEntry) -> tuple[Any, ...]:
    # What the digest carries first, then by weight of evidence; title and id make it total.
    return (
        not entry.in_digest,
        not entry.pinned,
        -entry.evidence,
        entry.title.casefold(),
        entry.id,
    )


async def show(store: Store) -> list[ProfileEntry]:
    """The current global preferences with confidence and evidence, digest-bound ones first."""
    rows = await store.rows(_SHOW_SQL)
    entries = [
        ProfileEntry(
            id=row["id"],
            title=row["title"],
            body=row["body"],
            confidence=row["confidence"],
            evidence=int(row["evidence"]),
            reinforce_count=int(row["reinforce_count"]),
            source=row["source"],
            pinned=bool(row["pinned"]),
            valid_from=row["valid_from"],
            recorded_at=row["recorded_at"],
            keywords=row["keywords"],
        )
        for row in rows
    ]
    return sorted(entries, key=_order)


async def preference(store: Store, record_id: str) -> Record:
    """The current global preference with this id, or a clear error saying what the id is."""
    record = await store.get(record_id.strip())
    if record.project_id != schema.GLOBAL_PROJECT_ID or record.type != "preference":
        where = "global" if record.project_id == schema.GLOBAL_PROJECT_ID else "project"
        raise ValidationError(
            f"record {record.id} is a {where} {record.type}, not a global preference; the profile "
            "holds global preferences only (use `agentctx edit` or `agentctx supersede` for it)"
        )
    if record.superseded_at is not None:
        if record.superseded_by:
            raise ConflictError(
                f"preference {record.id} was replaced by {record.superseded_by}; "
                f"use that id (agentctx profile show)"
            )
        raise ConflictError(
            f"preference {record.id} was already cleared from the profile at {record.superseded_at}"
        )
    return record


async def edit(
    store: Store, record_id: str, *, title: str | None = None, body: str | None = None
) -> Record:
    """Supersede a global preference with a corrected version (source cli, explicit); the new one."""
    old = await preference(store, record_id)
    if title is None and body is None:
        raise ValidationError("give a new title, a new body, or both")
    new_title = old.title if title is None else title
    new_body = old.body if body is None else body
    if " ".join(new_title.split()) == old.title and new_body.strip() == old.body:
        raise ValidationError("nothing to change: the title and body are as they are")
    _, new = await store.supersede(
        old.id,
        new_body,
        EDIT_RATIONALE,
        title=new_title,
        source="cli",
        confidence="explicit",
    )
    await _sync_quietly(store)
    return new


async def clear(store: Store, record_id: str) -> Record:
    """Retire a global preference (superseded, no successor); the record as it is now."""
    record = await preference(store, record_id)
    async with store.transaction() as tx:
        changed = await tx.execute(schema.SUPERSEDE_SQL, (clock.now(), None, record.id))
        if changed != 1:
            raise ConflictError(f"preference {record.id} changed meanwhile; nothing was cleared")
    # After the commit, as every writer does: the digests that carried it are stale now.
    await anyio.to_thread.run_sync(digests.invalidate, [schema.GLOBAL_PROJECT_ID])
    await _sync_quietly(store)
    return await store.get(record.id)


# -- the mirror -------------------------------------------------------------------------------------


def mirror_path() -> str:
    """Where the Markdown mirror of the profile lives in the home."""
    return os.path.join(home.sub(MIRROR_DIR), MIRROR_NAME)


def render_mirror(entries: Sequence[ProfileEntry]) -> str:
    """The mirror's Markdown: digest-bound preferences, then the inferred ones not yet confirmed."""
    out = [
        "# Developer profile",
        "",
        "<!-- Written by agentctx from the global preferences in its database, never read back.",
        "     Change it with `agentctx profile edit <id>` or `agentctx profile clear <id>`. -->",
        "",
    ]
    if not entries:
        return "\n".join([*out, "No global preferences yet.", ""])
    groups = (
        ("In every session's digest", [e for e in entries if e.in_digest]),
        ("Inferred, not confirmed yet", [e for e in entries if not e.in_digest]),
    )
    for heading, group in groups:
        if not group:
            continue
        out += [f"## {heading}", ""]
        for entry in group:
            sessions = "1 session" if entry.evidence == 1 else f"{entry.evidence} sessions"
            pin = " · pinned" if entry.pinned else ""
            out += [
                f"### {entry.title}",
                "",
                entry.body,
                "",
                f"_{entry.confidence} · {sessions}{pin} · id `{entry.id}`_",
                "",
            ]
    return "\n".join(out)


def write_mirror(entries: Sequence[ProfileEntry]) -> str:
    """Write ``profile/preferences.md`` (0600, in a 0700 folder) atomically; return its path."""
    folder = home.ensure_sub(MIRROR_DIR)
    path = os.path.join(folder, MIRROR_NAME)
    payload = render_mirror(entries).encode("utf-8")
    write_if_changed(path, payload, private=True)
    return path


async def sync_mirror(store: Store) -> str:
    """Regenerate the mirror from the store's current profile; return its path."""
    entries = await show(store)
    return await anyio.to_thread.run_sync(write_mirror, entries)


async def _sync_quietly(store: Store) -> None:
    # The change is committed; a mirror that cannot be written is a warning, not a failed edit.
    try:
        await sync_mirror(store)
    except OSError as exc:
        log.warning("agentctx: the profile mirror %s was not updated: %s", mirror_path(), exc)
