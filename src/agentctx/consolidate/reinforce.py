"""Reinforcement of inferred preferences: one seen in enough distinct sessions becomes trusted.

Extraction reinforces as it goes (:meth:`agentctx.store.Transaction.reinforce`): a preference it
finds again in another session gains a ``derives_from`` edge to that session and one
``reinforce_count``, and is promoted at ``reinforcement_threshold``; an explicit statement makes it
``explicit`` at once. This consolidation step is the sweep behind it, for what extraction cannot see
at the time: a threshold lowered since, or evidence gathered by a near-duplicate merge.

Evidence is counted, never added to, so nothing is counted twice: the distinct sessions of a record
and of every earlier version in its supersession chain (a near-duplicate merged into it, archived
versions included), each version's own ``session_id`` plus the targets of its ``derives_from``
edges that are not record ids (an edge to another record derives knowledge, not a session). This is
the evidence ``agentctx profile show`` prints. A current inferred preference, project or global,
with at least ``threshold`` sessions becomes ``reinforced`` and its ``reinforce_count`` is raised to
sessions − 1 (never lowered). Only explicit and reinforced global
preferences enter every project's digest (:mod:`agentctx.retrieval.digest`), so a promoted global one drops
every digest for a rebuild.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentctx import config
from agentctx.core import search
from agentctx.preferences import SESSIONS_BY_ROOT, evidence_sql

if TYPE_CHECKING:
    from agentctx.store import Store


_EVIDENCE_SQL = evidence_sql(
    "SELECT id FROM records WHERE type = 'preference' AND confidence = 'inferred' "
    "AND superseded_at IS NULL AND project_id IN ({marks})",
    f"SELECT r.id, coalesce(s.n, 0) AS sessions FROM records r JOIN live USING (id) {SESSIONS_BY_ROOT}",
)
_PROMOTE_SQL = (
    "UPDATE records SET confidence = 'reinforced', reinforce_count = max(reinforce_count, ?) "
    "WHERE id = ? AND confidence = 'inferred' AND superseded_at IS NULL"
)


async def reinforce_preferences(
    store: Store, project_id: str, *, threshold: int | None = None
) -> int:
    """Promote the project's and the global inferred preferences seen in ``threshold`` sessions.

    ``threshold`` defaults to the ``reinforcement_threshold`` setting; returns how many were promoted.
    """
    needed = int(config.get("reinforcement_threshold") if threshold is None else threshold)
    ids = search.scope_projects(project_id, "all")
    rows = await store.rows(_EVIDENCE_SQL.format(marks=", ".join("?" * len(ids))), ids)
    due: list[tuple[int, str]] = []
    for row in rows:
        sessions = int(row["sessions"])
        if sessions >= needed:
            due.append((sessions - 1, str(row["id"])))
    if not due:
        return 0
    promoted = 0
    async with store.transaction() as tx:
        for count, record_id in due:
            changed = await tx.execute(_PROMOTE_SQL, (count, record_id))
            if changed:
                promoted += changed
                await tx.mark_changed(record_id)
    return promoted
