"""A change of embedding model: settle the stored vectors' model, follow the re-embed, say where it is.

The rules are :mod:`agentctx.core.vectors` (plans); this is their async face for consolidation's
``embed`` step, ``agentctx model reembed`` and ``doctor``: :func:`prepare` after loading the
configured model (a change drops the old vectors and flags every record, one transaction), the
re-embed itself is :func:`agentctx.embeddings.vecstore.embed_pending` batch by batch (resumable: what is still
pending), :func:`finish` once nothing is pending, :func:`status` for the progress; :func:`calibrate`
gives a model without measured cosine thresholds its calibrated ones once
(:mod:`agentctx.embeddings.calibrate`). No numpy and no fastembed imported here: doctor and the CLI
read the status without loading a model.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentctx.core import clock, errors, vectors

if TYPE_CHECKING:
    from agentctx.embeddings.models import Embedder
    from agentctx.store import Store

log = logging.getLogger("agentctx.embed")


@dataclass(frozen=True, slots=True)
class Prepared:
    """What :func:`prepare` did: ``same``, ``adopted`` (unrecorded vectors of this dimension) or
    ``switched`` (the old vectors dropped, ``flagged`` records to re-embed); ``before``: the
    stored vectors' model and dimension until now."""

    action: str
    model: str
    dims: int
    before_model: str | None
    before_dims: int | None
    flagged: int

    def to_dict(self) -> dict[str, Any]:
        """Plain data (``consolidate --json``, ``model reembed --json``)."""
        return {
            "action": self.action,
            "model": self.model,
            "dims": self.dims,
            "before": {"model": self.before_model, "dims": self.before_dims},
            "flagged": self.flagged,
        }


def unrecorded_owner() -> str:
    """The model that made vectors stored before the model was recorded: the one the settings
    name (the config file or the environment), else the default of those releases."""
    from agentctx import config
    from agentctx.core.errors import ConfigError

    try:
        rows = config.explain()
    except ConfigError:  # unreadable settings: the default of those releases
        rows = []
    for row in rows:
        if row["key"] == "embedding.model" and row["source"] != "default" and row["value"]:
            return str(row["value"])
    return vectors.UNRECORDED_DEFAULT


async def prepare(store: Store, embedder: Embedder) -> Prepared:
    """Make ``embedder`` the model of the stored vectors: a model change drops the old vectors,
    resizes the vector table and flags every record for the re-embed (one transaction).

    Consolidation and ``agentctx model reembed`` call it after loading the configured model; the
    re-embed is then :func:`agentctx.embeddings.vecstore.embed_pending`, resumable batch by batch.
    """
    now = clock.now()
    async with store.transaction() as tx:
        action, before = await tx.run(
            vectors.settle(
                embedder.name,
                embedder.dims,
                vec=bool(store.capabilities.vec_version),
                now=now,
                owner=unrecorded_owner(),
            )
        )
    flagged = 0
    if action == "switched":
        current = await store.run(vectors.space())
        flagged = current.reembed_total if current is not None else 0
        was = (
            f"{before.model or 'an unrecorded model'} ({before.dims} dimensions)" if before else ""
        )
        log.warning(
            "embedding model changed: %s; re-embedding %d records with %s (%d dimensions)",
            f"dropped the vectors of {was}" if was else "no vectors before",
            flagged,
            embedder.name,
            embedder.dims,
        )
    return Prepared(
        action,
        embedder.name,
        embedder.dims,
        before.model if before else None,
        before.dims if before else None,
        flagged,
    )


async def calibrate(embedder: Embedder) -> str | None:
    """Calibrate ``embedder``'s cosine thresholds if it has neither measured nor stored ones
    (:func:`agentctx.embeddings.calibrate.ensure`); a line saying what was done, None when nothing
    was. A failure is logged and said, never raised: the defaults stay in use."""
    from agentctx.embeddings import calibrate as calibration
    from agentctx.embeddings import thresholds

    if thresholds.measured(embedder.name) or calibration.current(embedder.name):
        return None
    try:
        found = await calibration.ensure(embedder)
    except Exception as exc:  # a model or disk problem: thresholds stay the defaults
        reason = errors.one_line(exc)
        log.warning("calibrating the thresholds of %s failed: %s", embedder.name, reason)
        return f"calibrating the thresholds of {embedder.name} failed ({reason}): defaults in use"
    if found is None:
        return None
    values = ", ".join(f"{k} {v:.2f}" for k, v in found.to_dict().items())
    return f"calibrated the cosine thresholds of {embedder.name}: {values}"


async def finish(store: Store) -> bool:
    """Mark the re-embed done once no record is pending; True when it ended now."""
    async with store.transaction() as tx:
        return await tx.run(vectors.finish())


@dataclass(frozen=True, slots=True)
class VectorStatus:
    """The stored vectors: whose (None: not recorded, or an older schema), how many, how many
    records wait, and the re-embed in progress (``reembed_total`` 0: none)."""

    model: str | None
    dims: int | None
    embedded: int
    pending: int
    reembed_total: int
    switched_at: str | None

    @property
    def reembedded(self) -> int:
        """Records of the re-embed in progress that have their new vector."""
        return max(0, self.reembed_total - self.pending)

    def to_dict(self) -> dict[str, Any]:
        """Plain data (``doctor --json``, ``model reembed --json``)."""
        return {
            "model": self.model,
            "dims": self.dims,
            "embedded": self.embedded,
            "pending": self.pending,
            "reembed": (
                {"total": self.reembed_total, "done": self.reembedded, "since": self.switched_at}
                if self.reembed_total
                else None
            ),
        }


def status_of(space: vectors.Space | None, counts: tuple[int, int]) -> VectorStatus:
    """:class:`VectorStatus` from :func:`agentctx.core.vectors.space` and ``counts``."""
    embedded, pending = counts
    if space is None:
        return VectorStatus(None, None, embedded, pending, 0, None)
    return VectorStatus(
        space.model, space.dims, embedded, pending, space.reembed_total, space.switched_at
    )


async def status(store: Store) -> VectorStatus:
    """The stored vectors' model and the embedding backlog."""
    return status_of(await store.run(vectors.space()), await store.run(vectors.counts()))
