"""Deletion: ``agentctx reset``, and the team hub's erasure of single records (docs/spec.md, 5.5).

Everything else keeps history (supersession, the archive), so the only ``DELETE`` of records lives
here, in one write transaction of the :class:`~agentctx.store.Store`: a failed reset deletes nothing.
Supersession never crosses namespaces, so no record outside the project refers to a deleted one and
no other record changes or becomes current again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentctx.core import schema
from agentctx.core.errors import ValidationError

if TYPE_CHECKING:
    from collections.abc import Iterable

    from agentctx.store import Store, Transaction


async def reset(store: Store, project_id: str) -> int:
    """Delete every record of one project (archived ones too, not global ones); how many."""
    if project_id == schema.GLOBAL_PROJECT_ID:
        raise ValidationError("reset works on a project; global records are kept")
    async with store.transaction() as tx:
        tx.mark_project_changed(project_id)
        await tx.execute("PRAGMA defer_foreign_keys = ON")
        ids = "SELECT id FROM records WHERE project_id = ?"
        every = f"{ids} UNION ALL SELECT id FROM records_archive WHERE project_id = ?"
        await tx.execute(
            f"DELETE FROM edges WHERE from_id IN ({every}) OR to_id IN ({every})",
            (project_id,) * 4,
        )
        if store.capabilities.vec_version:
            await tx.execute(f"DELETE FROM records_vec WHERE record_id IN ({ids})", (project_id,))
        await tx.execute("DELETE FROM nodes WHERE project_id = ?", (project_id,))
        # what the verdicts say about them (issue 25) goes with them
        for table in ("record_priors", "injection_verdicts"):
            await tx.execute(
                f"DELETE FROM {table} WHERE record_id IN ({every})", (project_id, project_id)
            )
        deleted = await tx.execute("DELETE FROM records WHERE project_id = ?", (project_id,))
        return deleted + await tx.execute(
            "DELETE FROM records_archive WHERE project_id = ?", (project_id,)
        )


async def erase(store: Store, tx: Transaction, record_ids: Iterable[str]) -> int:
    """Delete records by id inside ``tx`` (an erasure at the team hub); how many were deleted.

    A record that a deleted one superseded stays superseded (``superseded_by`` cleared, its
    ``superseded_at`` kept): an erasure never makes an older version current again.
    """
    deleted = 0
    for record_id in record_ids:
        for table in ("records", "records_archive"):
            await tx.execute(
                f"UPDATE {table} SET superseded_by = NULL WHERE superseded_by = ?", (record_id,)
            )
        await tx.execute("DELETE FROM edges WHERE from_id = ? OR to_id = ?", (record_id, record_id))
        if store.capabilities.vec_version:
            await tx.execute("DELETE FROM records_vec WHERE record_id = ?", (record_id,))
        deleted += await tx.execute("DELETE FROM records WHERE id = ?", (record_id,))
        deleted += await tx.execute("DELETE FROM records_archive WHERE id = ?", (record_id,))
    return deleted
